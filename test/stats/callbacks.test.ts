import t from 'tap';
import { maskCpfLike, redactCpfLike } from '../../src/stats/mask.js';
import { buildTestApp } from '../helpers/app.js';
import { DIGIT_ZEROS, inScript } from '../helpers/cpf.js';
import { insertRow, insertStray, sharedDatabase } from './fixtures.js';

const KEY = 'console-key-0123456789abcdef';
const database = await sharedDatabase(t);

interface Item {
  id: number;
  customerUuid: string | null;
  receivedAt: string;
  kind: string;
  problem: string | null;
  rawBody: string;
}
type Page = { items: Item[]; nextCursor: string | null };

t.test('CPF-like digit runs are masked in any separator form; other numbers are left alone', async (t) => {
  const cases: Array<[string, string]> = [
    ['{"cpf":"52998224725"}', '{"cpf":"***********"}'],
    ['cpf 529.982.247-25 ok', 'cpf ***.***.***-** ok'],
    ['529 982 247 25', '*** *** *** **'],
    ['529/982/247-25', '***/***/***-**'],
    ['529 . 982 . 247 - 25', '*** . *** . *** - **'],
    ['id529982247251x', 'id************x'],
    ['"score":710,"limit":5000,"started":"2026-01-01T00:00:01.000Z"', '"score":710,"limit":5000,"started":"2026-01-01T00:00:01.000Z"'],
    ['1234567890', '1234567890'],
    ['cpf ５２９．９８２．２４７－２５ ok', 'cpf ***．***．***－** ok'],
    ['５２９９８２２４７２５', '***********'],
  ];
  for (const [raw, masked] of cases) t.equal(maskCpfLike(raw), masked, raw);
});

t.test('a run is read whatever the number of separators between its digits, and in the digits of any script', async (t) => {
  const cases: Array<[string, string]> = [
    ['529....982....247....25', '***....***....***....**'],
    ['cpf 529 - - 982 - - 247 - - 25 ok', 'cpf *** - - *** - - *** - - ** ok'],
    ['529%2E%2E%2E%2E982%2E%2E%2E%2E247%2D%2D%2D%2D25', '***%2E%2E%2E%2E***%2E%2E%2E%2E***%2D%2D%2D%2D**'],
    [String.raw`\u0035\u0032\u0039 \/ \/ \u0039\u0038\u0032 \/ \/ \u0032\u0034\u0037 \/ \/ \u0032\u0035`, String.raw`*** \/ \/ *** \/ \/ *** \/ \/ **`],
    ...Object.values(DIGIT_ZEROS).flatMap((zero): Array<[string, string]> => [
      [`{"cpf":"${inScript('52998224725', zero)}"}`, '{"cpf":"***********"}'],
      [inScript('cpf 529.982.247-25 ok', zero), 'cpf ***.***.***-** ok'],
      [inScript('"limit":5000,"score":710', zero), inScript('"limit":5000,"score":710', zero)],
    ]),
  ];
  for (const [raw, masked] of cases) {
    t.equal(maskCpfLike(raw), masked, raw);
    t.notMatch(redactCpfLike(raw, '[redacted]'), masked === raw ? /\[redacted\]/ : /\p{Nd}{3}/u, `${raw}: redacted whole`);
  }
});

t.test('unmatched and invalid callbacks, newest first, by kind, paged by cursor, raw bodies masked', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const { db } = database;
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-22T09:00:00Z' }); // a matched callback: never listed
  const invalidBody = '{"customerUuid":"c-9","cpf":"529.982.247-25","response":{"score":"x"}}';
  const invalidId = await insertStray(db, 'invalid', '2026-11-22T10:00:00Z', { rawBody: invalidBody, customerUuid: 'c-9', error: 'response.score: expected number' });
  await insertStray(db, 'invalid', '2026-11-22T10:30:00Z', { rawBody: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), customerUuid: null, error: 'not JSON' });
  const unmatched: number[] = [];
  for (let i = 0; i < 5; i++) unmatched.push(await insertStray(db, 'unmatched', `2026-11-22T1${i}:15:00Z`));

  const invalid = (await app.inject({ url: '/v1/callbacks?kind=invalid' })).json() as Page;
  t.same(invalid.items.map((i) => i.problem), ['not JSON', 'response.score: expected number'], 'newest first');
  t.same(invalid.items[1], {
    id: invalidId,
    customerUuid: 'c-9',
    receivedAt: '2026-11-22T10:00:00.000Z',
    kind: 'invalid',
    problem: 'response.score: expected number',
    rawBody: '{"customerUuid":"c-9","cpf":"***.***.***-**","response":{"score":"x"}}',
  });
  t.equal(invalid.items[0]!.rawBody, '{\ufffd\ufffd}', 'bytes that are not UTF-8 become U+FFFD');
  t.equal(invalid.items[0]!.customerUuid, null);
  t.equal(invalid.nextCursor, null, 'one page');

  const pages: Item[][] = [];
  let cursor: string | null = null;
  do {
    const res = await app.inject({ url: `/v1/callbacks?kind=unmatched&limit=2${cursor ? `&cursor=${cursor}` : ''}` });
    t.equal(res.statusCode, 200);
    const page = res.json() as Page;
    pages.push(page.items);
    cursor = page.nextCursor;
  } while (cursor);
  t.same(pages.map((p) => p.length), [2, 2, 1]);
  t.same(pages.flat().map((i) => i.id), [...unmatched].reverse(), 'every unmatched one once, newest first');
  t.ok(pages.flat().every((i) => i.kind === 'unmatched' && i.problem === null));

  const since = (await app.inject({ url: '/v1/callbacks?kind=unmatched&since=2026-11-22T13:00:00Z' })).json() as Page;
  t.same(since.items.map((i) => i.id), [unmatched[4], unmatched[3]], 'since: received at or after');

  const both = (await app.inject({ url: '/v1/callbacks?limit=3' })).json() as Page;
  t.same(both.items.map((i) => [i.kind, i.receivedAt]), [
    ['unmatched', '2026-11-22T14:15:00.000Z'],
    ['unmatched', '2026-11-22T13:15:00.000Z'],
    ['unmatched', '2026-11-22T12:15:00.000Z'],
  ]);
  const rest = (await app.inject({ url: `/v1/callbacks?limit=10&cursor=${both.nextCursor}` })).json() as Page;
  t.same(rest.items.map((i) => i.kind), ['unmatched', 'invalid', 'unmatched', 'invalid'], 'without kind: both, merged newest first');

  for (const bad of ['kind=matched', 'limit=0', 'limit=201', 'cursor=forged.AAAAAAAAAAAAAAAAAAAAAA', 'since=soon']) {
    const res = await app.inject({ url: `/v1/callbacks?${bad}` });
    t.equal(res.statusCode, 400, bad);
    t.equal(res.json().error, 'validation_failed');
  }
});

t.test('the query allowlist and keys guard the callbacks list', async (t) => {
  const { app } = await buildTestApp(t, { env: { QUERY_API_KEYS: KEY }, database });
  t.equal((await app.inject({ url: '/v1/callbacks' })).statusCode, 401);
  t.equal((await app.inject({ url: '/v1/callbacks', headers: { authorization: `Bearer ${KEY}` } })).statusCode, 200);
  const outside = await app.inject({ url: '/v1/callbacks', remoteAddress: '198.51.100.7', headers: { authorization: `Bearer ${KEY}` } });
  t.equal(outside.statusCode, 403);
});

t.test("a raw body's CPF with four or more separators, or in Arabic-Indic digits, is masked in the list", async (t) => {
  const { app } = await buildTestApp(t, { database });
  const rawBody = `{"customerUuid":"c-8","cpf":"529....982....247....25","doc":"${inScript('52998224725', DIGIT_ZEROS.arabicIndic)}"}`;
  await insertStray(database.db, 'invalid', '2026-12-01T10:00:00Z', { rawBody, customerUuid: 'c-8', error: 'cpf: expected 11 digits' });
  const page = (await app.inject({ url: '/v1/callbacks?kind=invalid&since=2026-12-01T00:00:00Z' })).json() as Page;
  t.same(page.items.map((i) => i.rawBody), ['{"customerUuid":"c-8","cpf":"***....***....***....**","doc":"***********"}']);
});
