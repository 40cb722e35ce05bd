import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import t from 'tap';
import { formatCpf, hashCpf } from '../../src/cpf.js';
import { buildTestApp, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { ADMIN_KEY, adminApp, get, post, SECOND_ADMIN_KEY, seedSubject } from './fixtures.js';

const QUERY_KEY = 'query-key-0123456789abcdef';
const fingerprint = (key: string) => `key:${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;

t.test('lookups, exports and erasures are audited with a key fingerprint and a keyed subject, no personal data', async (t) => {
  const database = await freshDatabase(t);
  let now = new Date('2026-03-01T12:00:00Z');
  const clock = () => now;
  const { app } = await adminApp(t, { database, clock, env: { QUERY_API_KEYS: QUERY_KEY } });
  const cpf = '39053344705';
  await seedSubject(database.db, 'audit-1', cpf);

  const lookup = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf }, headers: { authorization: `Bearer ${QUERY_KEY}` } });
  t.equal(lookup.statusCode, 200);
  now = new Date('2026-03-01T12:01:00Z');
  t.equal((await post(app, '/v1/personal-data/export', { cpf })).statusCode, 200);
  now = new Date('2026-03-01T12:02:00Z');
  t.equal((await post(app, '/v1/personal-data/export', { customerUuid: 'audit-1' }, SECOND_ADMIN_KEY)).statusCode, 200);
  now = new Date('2026-03-01T12:03:00Z');
  t.equal((await post(app, '/v1/personal-data/erase', { cpf })).statusCode, 200);

  const res = await get(app, '/v1/audit');
  t.equal(res.statusCode, 200);
  const { items, nextCursor } = res.json();
  t.equal(nextCursor, null);
  t.same(
    items.map((e: { at: string; action: string; actor: string }) => [e.at, e.action, e.actor]),
    [
      ['2026-03-01T12:03:00.000Z', 'erase', fingerprint(ADMIN_KEY)],
      ['2026-03-01T12:02:00.000Z', 'export', fingerprint(SECOND_ADMIN_KEY)],
      ['2026-03-01T12:01:00.000Z', 'export', fingerprint(ADMIN_KEY)],
      ['2026-03-01T12:00:00.000Z', 'lookup', fingerprint(QUERY_KEY)],
    ],
    'newest first, each naming the key used',
  );
  const [erase, byUuid, byCpf, looked] = items;
  t.same(looked.counts, { requests: 2 });
  t.same(byCpf.counts, { requests: 2, callbacks: 2 });
  t.same(erase.counts, { requests: 2, callbacks: 3, events: 0, idempotencyKeys: 1 });
  t.match(looked.subject, /^cpf:[0-9a-f]{32}$/);
  t.equal(byCpf.subject, looked.subject, 'one CPF, one subject');
  t.equal(erase.subject, looked.subject);
  t.match(byUuid.subject, /^customer:[0-9a-f]{32}$/);

  const text = res.body;
  for (const secret of [cpf, formatCpf(cpf), 'audit-1', hashCpf(cpf, TEST_CPF_HASH_KEY), ADMIN_KEY, SECOND_ADMIN_KEY, QUERY_KEY]) {
    t.notOk(text.includes(secret), `the trail never holds ${secret}`);
  }
});

t.test('a lookup without query keys names the peer; the audit filters by action and time and pages by cursor', async (t) => {
  const database = await freshDatabase(t);
  let now = new Date('2026-04-01T00:00:00Z');
  const { app } = await adminApp(t, { database, clock: () => now });
  for (let i = 0; i < 5; i++) {
    now = new Date(Date.UTC(2026, 3, 1, 0, i));
    t.equal((await post(app, '/v1/underwritings/lookup', { cpf: '52998224725' }, null)).statusCode, 200);
  }
  now = new Date('2026-04-01T01:00:00Z');
  await post(app, '/v1/personal-data/export', { customerUuid: 'nobody-here' });

  const page1 = (await get(app, '/v1/audit?action=lookup&limit=2')).json();
  t.equal(page1.items.length, 2);
  t.match(page1.items[0], { action: 'lookup', actor: 'peer:127.0.0.1', at: '2026-04-01T00:04:00.000Z', counts: { requests: 0 } });
  const page2 = (await get(app, `/v1/audit?action=lookup&limit=2&cursor=${encodeURIComponent(page1.nextCursor)}`)).json();
  const page3 = (await get(app, `/v1/audit?action=lookup&limit=2&cursor=${encodeURIComponent(page2.nextCursor)}`)).json();
  t.same(
    [...page1.items, ...page2.items, ...page3.items].map((e: { at: string }) => e.at.slice(11, 16)),
    ['00:04', '00:03', '00:02', '00:01', '00:00'],
  );
  t.equal(page3.nextCursor, null);

  const exports = (await get(app, '/v1/audit?action=export')).json();
  t.same(exports.items.map((e: { counts: unknown }) => e.counts), [{ requests: 0, callbacks: 0 }]);
  const window = (await get(app, '/v1/audit?since=2026-04-01T00:01:00Z&until=2026-04-01T00:03:00Z')).json();
  t.same(window.items.map((e: { at: string }) => e.at.slice(11, 16)), ['00:02', '00:01'], 'since inclusive, until exclusive');

  const forged = await get(app, '/v1/audit?cursor=abc.def');
  t.equal(forged.statusCode, 400);
  const unknownAction = await get(app, '/v1/audit?action=purge');
  t.equal(unknownAction.statusCode, 400);
});

t.test('a lookup that cannot be audited is not answered', async (t) => {
  const database = await freshDatabase(t);
  const { app } = await buildTestApp(t, { database });
  await sql`alter table audit_log add constraint audit_closed check (false) not valid`.execute(database.db);
  const res = await post(app, '/v1/underwritings/lookup', { cpf: '52998224725' }, null);
  t.equal(res.statusCode, 500);
  t.notOk(res.body.includes('items'), 'no requests leave without their audit entry');
});
