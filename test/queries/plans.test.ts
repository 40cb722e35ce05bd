import { CompiledQuery, sql } from 'kysely';
import t from 'tap';
import { feedHorizon } from '../../src/events/feed-sql.js';
import { CLAIM_DELIVERIES, DISPATCH_DELIVERIES } from '../../src/events/queue-sql.js';
import { RECORD_RESULTS, recordResultsParameters } from '../../src/requests/complete.js';
import { hashCpf } from '../../src/cpf.js';
import { EXPIRE_BATCH, expireBatchParameters } from '../../src/requests/expiry.js';
import { customerQuery, pageQuery } from '../../src/queries/sql.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { plan } from '../helpers/plan.js';
import { CPF } from './fixtures.js';

// The planner is PostgreSQL's on both engines (PGlite is PostgreSQL compiled to WASM).
t.test('every read uses its index on a table of 20k requests, never a sequential scan', async (t) => {
  const database = await freshDatabase(t);
  const db = database.db;
  const cpfHash = hashCpf(CPF, TEST_CPF_HASH_KEY);
  // 20k requests over 2k customers and 1k CPFs, mostly completed, a few still waiting.
  await sql`
    insert into underwriting_requests
      (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, decision, submitted_at)
    select 'cust-' || (g % 2000), case when g % 1000 = 0 then ${cpfHash} else 'hash-' || (g % 1000) end,
           '***.000.000-**', false,
           case when g > 19990 then 'submitted' when g % 10 = 0 then 'submit_failed' when g % 7 = 0 then 'expired' else 'completed' end,
           case when g > 19990 or g % 10 = 0 or g % 7 = 0 then null
                else (array['approved','declined','no_score','filtered'])[1 + g % 4] end,
           timestamptz '2026-01-01' + g * interval '1 minute'
      from generate_series(1, 20000) as g`.execute(db);
  // Their callbacks: one per answered request, plus 500 that matched nothing.
  await sql`
    insert into callbacks (raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
    select '\\x7b7d'::bytea, 'matched', customer_uuid, submitted_at, submitted_at + interval '1 second', '{}'::jsonb, decision, id
      from underwriting_requests where decision is not null`.execute(db);
  await sql`update underwriting_requests r set result_callback_id = c.id from callbacks c where c.request_id = r.id`.execute(db);
  await sql`
    insert into callbacks (raw_body, outcome, customer_uuid, started, finished, body)
    select '\\x7b7d'::bytea, 'unmatched', 'cust-' || g, timestamptz '2027-01-01' + g * interval '1 second',
           timestamptz '2027-01-01' + g * interval '1 second', '{}'::jsonb
      from generate_series(1, 500) as g`.execute(db);
  await sql`analyze underwriting_requests`.execute(db);
  await sql`analyze callbacks`.execute(db);
  const after = { t: '2026-01-10T00:00:00.000000Z', id: 12000 };

  const reads: Array<[string, CompiledQuery]> = [
    ['one customer', customerQuery(['cust-42']).compile(db)],
    ['list', pageQuery(db, {}, undefined, 50).compile()],
    ['list, next page', pageQuery(db, {}, after, 50).compile()],
    ['list by status', pageQuery(db, { status: 'completed' }, after, 50).compile()],
    ['list by decision', pageQuery(db, { decision: 'approved' }, after, 50).compile()],
    ['list since/until', pageQuery(db, { since: '2026-01-05T00:00:00Z', until: '2026-01-06T00:00:00Z' }, undefined, 50).compile()],
    ['lookup by CPF', pageQuery(db, { cpfHashes: [cpfHash] }, undefined, 50).compile()],
    ['lookup by CPF, next page', pageQuery(db, { cpfHashes: [cpfHash] }, after, 50).compile()],
    ['lookup by CPF under two keys', pageQuery(db, { cpfHashes: [cpfHash, 'f'.repeat(64)] }, undefined, 50).compile()],
  ];
  for (const [name, query] of reads) {
    const text = await plan(db, query);
    t.notMatch(text, /Seq Scan on (underwriting_requests|callbacks)/, `${name}: no sequential scan\n${text}`);
    t.match(text, /(Index|Index Only|Bitmap Index) Scan( Backward)? (using|on) underwriting_requests_\w+/, `${name}: an index of underwriting_requests`);
  }

  const keyset = await plan(db, pageQuery(db, { status: 'completed' }, after, 50).compile());
  t.match(keyset, /(Index|Recheck) Cond: .*ROW\((r\.)?submitted_at, (r\.)?id\) </, 'the cursor position is an index condition, not a filter');
  t.match(await plan(db, pageQuery(db, { decision: 'approved' }, undefined, 50).compile()), /underwriting_requests_decision_list/);
  t.match(await plan(db, pageQuery(db, { cpfHashes: [cpfHash] }, undefined, 50).compile()), /underwriting_requests_cpf_list/);
  t.match(await plan(db, pageQuery(db, { cpfHashes: [cpfHash, 'f'.repeat(64)] }, undefined, 50).compile()), /underwriting_requests_cpf_list/);
  t.match(await plan(db, customerQuery(['cust-42']).compile(db)), /underwriting_requests_customer/);
  t.match(await plan(db, customerQuery(['cust-42']).compile(db)), /callbacks_unmatched/);
  t.match(await plan(db, CompiledQuery.raw(EXPIRE_BATCH.submitted.text, expireBatchParameters(new Date('2026-02-01T00:00:00Z'), 3600))), /underwriting_requests_waiting/, 'the sweep reads only what is waiting');

});

t.test('the callback write finds and completes requests by index, whatever it guesses of the batch', async (t) => {
  // Narrow rows make a scan look cheap; json_to_recordset's fixed guess of 100 rows per batch
  // would then tip a plain join into scanning the whole table on every write.
  const database = await freshDatabase(t);
  const db = database.db;
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status)
    select 'cust-' || g, 'h', 'm', false, case when g % 3 = 0 then 'submitted' else 'expired' end
      from generate_series(1, 20000) as g`.execute(db);
  await sql`analyze underwriting_requests`.execute(db);
  const results = ['cust-3', 'cust-1991', 'cust-nobody'].map((customerUuid) => ({
    receivedAt: new Date('2026-02-01T00:00:00Z'),
    peer: '127.0.0.1',
    rawBody: Buffer.from('{}'),
    customerUuid,
    started: '2026-02-01T00:00:00Z',
    finished: '2026-02-01T00:00:01Z',
    body: '{}',
    decision: 'approved' as const,
  }));
  const write = await plan(db, CompiledQuery.raw(RECORD_RESULTS.text, recordResultsParameters(results, { skewS: 300 })));
  t.notMatch(write, /Seq Scan on (underwriting_requests|callbacks)/, `no sequential scan\n${write}`);
  t.match(write, /Index Scan using underwriting_requests_awaiting_result/, 'the waiting request is found by customer');
  t.match(write, /Index Scan using underwriting_requests_pkey/, 'the completed request is updated by primary key');
  t.notMatch(write, /event_deliveries/, 'the callback statement writes no delivery');
});

t.test('the callback write finds the waiting request by customer on tables never analysed', async (t) => {
  // A server without autovacuum never analyses them. With no statistics, the planner once ANDed
  // every waiting request's NULL result_callback_id entry with the customer's: work growing with
  // the table, on every callback.
  const database = await freshDatabase(t);
  const db = database.db;
  // Nor may autovacuum analyse it meanwhile, on a server where it is on.
  await sql`alter table underwriting_requests set (autovacuum_enabled = off)`.execute(db);
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status)
    select 'cust-' || g, 'h', 'm', false, 'submitted' from generate_series(1, 20000) as g`.execute(db);
  const result = {
    receivedAt: new Date('2026-02-01T00:00:00Z'),
    peer: '127.0.0.1',
    rawBody: Buffer.from('{}'),
    customerUuid: 'cust-42',
    started: '2099-02-01T00:00:00Z',
    finished: '2099-02-01T00:00:01Z',
    body: '{}',
    decision: 'approved' as const,
  };
  const write = await plan(db, CompiledQuery.raw(RECORD_RESULTS.text, recordResultsParameters([result], { skewS: 300 })));
  t.notMatch(write, /BitmapAnd|underwriting_requests_result|Seq Scan on underwriting_requests/, `no scan of every waiting request\n${write}`);
  t.match(write, /Index Scan using underwriting_requests_awaiting_result/, 'the waiting request is found among its customer\'s entries without a result');
});

t.test('a claim of event deliveries walks the due index and stops at its limit, whatever the backlog', async (t) => {
  const database = await freshDatabase(t);
  const db = database.db;
  // 20,000 delivered and a few pending when last analysed; then a burst left a backlog of 6,000
  // (the statistics lag behind: autoanalyze runs later, or never on a server without autovacuum).
  const deliveries = (from: number, to: number, status: string) => sql`
    with e as (
      insert into events (public_id, type, customer_uuid, created_at, data)
      select 'evt_' || g, 'callback.unmatched', 'cust-' || g, timestamptz '2026-01-01' + g * interval '1 second', '{}'::jsonb
        from generate_series(${from}::int, ${to}::int) as g
      returning id, customer_uuid, created_at
    )
    insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, status)
    select id, customer_uuid, 'k', 'http://127.0.0.1/', created_at, created_at, ${status} from e`.execute(db);
  await deliveries(1, 20000, 'delivered');
  await deliveries(20001, 20010, 'pending');
  await sql`analyze event_deliveries`.execute(db);
  await deliveries(20011, 26010, 'pending');
  const claim = await plan(db, CompiledQuery.raw(CLAIM_DELIVERIES.text, [new Date('2027-01-01'), ['k'], 64, 15, 'token']));
  t.match(claim, /Index Scan using event_deliveries_due/, claim);
  t.notMatch(claim, /Sort/, 'no sort of the whole backlog');
});

t.test("a dispatch of new events' deliveries walks the feed index from the target's position and stops at its limit", async (t) => {
  const database = await freshDatabase(t);
  const db = database.db;
  // 20,000 events already dispatched, then a backlog of 6,000 the statistics have not seen.
  const events = (from: number, to: number) => sql`
    insert into events (public_id, type, customer_uuid, created_at, data)
    select 'evt_' || g, 'callback.unmatched', 'cust-' || g, timestamptz '2026-01-01' + g * interval '1 second', '{}'::jsonb
      from generate_series(${from}::int, ${to}::int) as g`.execute(db);
  await events(1, 20000);
  await sql`insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
            select 'k', 'http://127.0.0.1/', max(tx_id), max(id), now() from events`.execute(db);
  await sql`analyze events`.execute(db);
  await sql`analyze event_dispatch`.execute(db);
  await events(20001, 26000);
  const dispatch = await plan(
    db,
    CompiledQuery.raw(DISPATCH_DELIVERIES.text, [['k'], ['http://127.0.0.1/'], 64, 'token', new Date('2027-01-01'), new Date('2027-01-01'), await feedHorizon(db), [null]]),
  );
  t.match(dispatch, /Index Scan using events_feed on events/, dispatch);
  t.notMatch(dispatch, /Seq Scan on events/, 'no sequential scan of the events');
  t.match(dispatch, /Limit/, 'stops at its limit');
});
