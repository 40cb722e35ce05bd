import t from 'tap';
import { AppError } from '../../src/http/errors.js';
import { statsQuery, statsView } from '../../src/stats/schemas.js';
import { statsRange } from '../../src/stats/service.js';
import { buildTestApp } from '../helpers/app.js';

// Issue 32: GET /v1/stats?until=9999-12-31T23:59:59Z answered 500 (the hour rounded up into year
// 10000, which the response schema cannot hold). Every accepted since/until/bucket must give an
// answer the schema holds, or a 400.

/** mulberry32: a small seeded generator, so a failure names the seed that reproduces it. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** An instant as a client may write it, anywhere in what `instant` accepts, extremes favoured. */
function randomInstant(random: () => number): string {
  const pick = <T>(options: readonly T[]) => options[Math.floor(random() * options.length)]!;
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  const year = random() < 0.3 ? pick([1, 2, 1969, 1970, 9998, 9999]) : int(1, 9999);
  const month = random() < 0.3 ? pick([1, 12]) : int(1, 12);
  const lastDay = new Date(Date.UTC(2001, month, 0)).getUTCDate() + (month === 2 && (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)) ? 1 : 0);
  const day = random() < 0.3 ? pick([1, lastDay]) : int(1, lastDay);
  const date = `${pad(year, 4)}-${pad(month)}-${pad(day)}`;
  if (random() < 0.15) return date;
  const time = random() < 0.3 ? pick(['00:00:00', '23:59:59', '23:00:00']) : `${pad(int(0, 23))}:${pad(int(0, 59))}:${pad(int(0, 59))}`;
  const fraction = random() < 0.3 ? `.${pad(int(0, 999999), 6)}` : '';
  const zone = random() < 0.3 ? 'Z' : `${pick(['+', '-'])}${pad(random() < 0.3 ? 15 : int(0, 15))}:${pad(random() < 0.3 ? 59 : int(0, 59))}`;
  return `${date}T${time}${fraction}${zone}`;
}

function randomQuery(random: () => number): Record<string, string> {
  const query: Record<string, string> = {};
  if (random() < 0.8) query.since = randomInstant(random);
  if (query.since && random() < 0.4) {
    // A span the answer may hold (up to a little over MAX_BUCKETS hours), wherever it lies.
    const until = new Date(Date.parse(query.since) + Math.floor(random() * 1200) * 3600_000 + Math.floor(random() * 3600_000));
    query.until = until.toISOString();
  } else if (random() < 0.8) query.until = randomInstant(random);
  if (random() < 0.9) query.bucket = random() < 0.5 ? 'hour' : 'day';
  return query;
}

const answerRange = statsView.pick({ since: true, until: true });
const NOW = new Date('2026-11-25T12:34:56Z');

t.test('every accepted since, until and bucket gives a range the answer can hold, or a 400', async (t) => {
  const seed = Number(process.env.STATS_DATES_SEED ?? 20261125);
  const random = generator(seed);
  let accepted = 0;
  let refused = 0;
  const failures: string[] = [];
  for (let i = 0; i < 20_000; i++) {
    const raw = randomQuery(random);
    const parsed = statsQuery.safeParse(raw);
    if (!parsed.success) continue;
    try {
      const { since, until } = statsRange(parsed.data, NOW);
      const shown = { since: since.toISOString(), until: until.toISOString() };
      // The schema's four-digit years, and none PostgreSQL lacks (year 0000 is 1 BC there).
      if (!answerRange.safeParse(shown).success || since.getUTCFullYear() < 1) failures.push(`${JSON.stringify(raw)} -> ${JSON.stringify(shown)}`);
      accepted += 1;
    } catch (err) {
      if (!(err instanceof AppError && err.statusCode === 400)) failures.push(`${JSON.stringify(raw)} -> ${String(err)}`);
      refused += 1;
    }
  }
  t.same(failures.slice(0, 5), [], `seed ${seed}: ${failures.length} failures`);
  t.ok(accepted > 1000 && refused > 1000, `both outcomes exercised (${accepted} answered, ${refused} refused)`);
});

t.test('the extremes through the route: 200 or 400, never 500', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW });
  const cases = [
    'until=9999-12-31T23:59:59Z',
    'until=9999-12-31T23:59:59Z&bucket=day',
    'until=9999-12-31T00:00:00-15:59&bucket=day',
    'since=9999-12-31T22:00:00Z&until=9999-12-31T23:59:59.999999Z',
    'since=0001-01-01T00:00:00%2B15:59&until=0001-01-02&bucket=day',
    'since=0001-01-01&bucket=hour&until=0001-01-01T05:00:00Z',
    'since=9999-12-31T23:30:00Z&until=9999-12-31T23:59:59Z',
  ];
  const random = generator(7);
  for (let i = 0; i < 20; i++) cases.push(new URLSearchParams(randomQuery(random)).toString());
  for (const query of cases) {
    const res = await app.inject({ method: 'GET', url: `/v1/stats?${query}` });
    t.ok(res.statusCode === 200 || res.statusCode === 400, `${query}: ${res.statusCode} ${res.statusCode >= 500 ? res.body : ''}`);
  }
  const last = await app.inject({ method: 'GET', url: '/v1/stats?until=9999-12-31T23:59:59Z' });
  t.equal(last.statusCode, 200);
  t.equal(last.json().until, '9999-12-31T23:00:00.000Z', 'until is clamped to the last hour that ends within year 9999');
});
