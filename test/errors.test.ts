import t from 'tap';
import { buildTestApp } from './helpers/app.js';

/** A small deterministic PRNG (mulberry32): the same inputs on every run. */
function prng(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** Percent-encodes like encodeURIComponent; a lone surrogate becomes the bytes UTF-8 forbids for it (%ED%BF%BF). */
const enc = (s: string) => s.split(/([\ud800-\udfff])/).map((part, i) => (i % 2 === 1 ? '%ED%BF%BF' : encodeURIComponent(part))).join('');

const NASTY = ['\u0000', '\udfff', '\ud800', '\uffff', '\u202e', 'é', '😀', '"', '\\', '%', '%00', '+16:00', '-99:99', '0000', '9999999999999999999999', '-1', '1e309', 'NaN', ' ', '', '[]', '{}', 'null', 'Z', 'T'];

t.test('no input to submit, list, lookup or callback makes a route answer 500', async (t) => {
  const { app } = await buildTestApp(t, { env: { PROVIDER_BASE_URL: 'http://127.0.0.1:9', UPSTREAM_TIMEOUT_MS: '200' } });
  const random = prng(12);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const text = () => Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(NASTY)).join('');
  const value = (): unknown => pick([text(), random() * 1e6, -1, true, null, [text()], { x: text() }, 1e308, Number.MAX_SAFE_INTEGER + 2]);
  const date = () => pick(['2024-01-01T00:00:00', '2024-02-30', '0000-01-01T00:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01']) + pick(['', 'Z', '+16:00', '-15:59', '+2400', text()]);

  const statuses = new Map<number, number>();
  for (let i = 0; i < 150; i++) {
    const customerUuid = pick([`fz-${i}`, text()]);
    const requests = [
      {
        method: 'POST' as const,
        url: '/v1/underwritings',
        payload: {
          customerUuid,
          cpf: pick(['52998224725', text()]),
          costSavingEnabled: pick([true, false, text()]),
          srd: { grossIncome: pick([1000, value()]), address: { street: text(), city: value() }, [text()]: value() },
        },
      },
      { method: 'GET' as const, url: `/v1/underwritings?${pick(['since', 'until', 'status', 'limit', 'cursor', text()])}=${enc(date())}` },
      { method: 'GET' as const, url: `/v1/underwritings/${enc(customerUuid)}?wait=${enc(pick(['0', text()]))}` },
      { method: 'POST' as const, url: '/v1/underwritings/lookup', payload: { cpf: pick(['52998224725', text()]), limit: value(), cursor: value() } },
      {
        method: 'POST' as const,
        url: '/v1/callbacks/underwriting',
        payload: JSON.stringify({
          customerUuid,
          started: date(),
          finished: date(),
          serviceType: pick(['CREDIT_SCORE', text()]),
          response: { costSavingEnabled: pick([true, value()]), score: value(), riskBand: value(), limit: value() },
          extra: value(),
        }),
      },
    ];
    for (const request of requests) {
      const res = await app.inject({ ...request, headers: { 'content-type': 'application/json' } });
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      if (res.statusCode >= 500 && res.statusCode !== 504) t.fail(`${request.method} ${request.url} answered ${res.statusCode}: ${res.body}`, { request });
    }
  }
  t.ok(statuses.get(400)! > 0, `answers by status: ${JSON.stringify(Object.fromEntries(statuses))}`);
  t.notOk(statuses.has(500), 'never 500');
});
