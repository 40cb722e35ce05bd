import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { eraseStored } from '../../src/personal-data/sql.js';
import { resolveSubject } from '../../src/personal-data/subject.js';
import { INSERT_SUBMITTING, insertSubmittingParameters, MARK_SUBMITTED, markSubmittedParameters } from '../../src/requests/sql.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { analyseAll, deliverAll, FLAT, grow, inline, LARGE, measure, measureWork, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

const SRD = { grossIncome: 5000, occupation: 'SALARIED', address: { city: 'São Paulo', zipCode: '01000-000' } };

/** The submit's two statements for a new customer, as one submit's batch: its insert (measured) and, on a row committed beforehand, its update. */
async function submitPair(db: Kysely<Tables>, customer: string) {
  const now = new Date();
  const parameters = (c: string) =>
    insertSubmittingParameters([
      { customerUuid: c, cpfHash: `h-${c}`, cpfMasked: '***.456.789-**', costSavingEnabled: false, srd: SRD, idempotencyKey: undefined, now, traceparent: null, xRequestId: 'req-1' },
    ]);
  const insert = await db.connection().execute((conn) => measure(conn, inline(INSERT_SUBMITTING.text, parameters(customer))));
  const { rows } = await sql<{ id: number }>`${sql.raw(inline(INSERT_SUBMITTING.text, parameters(`${customer}-u`)))}`.execute(db);
  const accepted = markSubmittedParameters([{ id: Number(rows[0]!.id), upstreamStatus: 202, now, slot: undefined }]);
  const update = await db.connection().execute((conn) => measure(conn, inline(MARK_SUBMITTED.text, accepted)));
  return { insert, update, blocks: insert.blocks + update.blocks };
}

// PostgreSQL only: at these sizes a file takes past its time limit on PGlite (seen: over 480 s),
// and the plans that matter are the server's.
for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`a submit's insert and its update cost the same on a small and a large table (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    await grow(db, state, 's', SMALL);
    const small = await submitPair(db, 'new-s');
    await grow(db, state, 'l', LARGE);
    const large = await submitPair(db, 'new-l');
    for (const { insert, update } of [small, large]) {
      t.match(insert.plan, /Insert on underwriting_requests \(actual rows=1(\.00)? loops=1\)/, 'one row inserted', { plan: insert.plan });
      t.match(update.plan, /Update on underwriting_requests[\s\S]*Index Scan (using|on) underwriting_requests_pkey/, 'the update by primary key', { plan: update.plan });
      t.notMatch(`${insert.plan}\n${update.plan}`, /Seq Scan/, 'no scan', { plan: update.plan });
    }
    t.ok(large.blocks <= FLAT * small.blocks, `buffers per submit flat: ${small.blocks} at ${SMALL * 2} requests, ${large.blocks} at ${(SMALL + LARGE) * 2}`);
  });

  t.test(`an erasure reads and deletes its subject's rows by index and costs what it deletes (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    const erase = async (customerUuid: string) =>
      db.connection().execute(async (conn) => {
        const subject = await resolveSubject(conn, { customerUuid }, ['k']);
        let erased = {};
        const work = await measureWork(conn, async (tx) => {
          erased = await eraseStored(tx, subject);
        });
        return { ...work, erased };
      });
    // Most submits carry an idempotency key: its row lives for a day beside the request.
    const keyed = (prefix: string) => sql`
      insert into idempotency_keys (key, body_hash, request_id, response_status, response_body, created_at, expires_at)
      select 'key-' || id, md5(id::text), id, 202, '{}'::jsonb, submitted_at, submitted_at + interval '1 day'
        from underwriting_requests where customer_uuid like ${prefix + '%'}`.execute(db);
    await grow(db, state, 's', SMALL);
    await keyed('s');
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    // A customer with 4 requests (completed), their callbacks, events and deliveries.
    const subjectRows = async (customer: string) => {
      await grow(db, state, customer, 1);
      await keyed(customer);
      await sql`update underwriting_requests set status = 'expired' where customer_uuid = ${`${customer}0`} and status = 'submitted'`.execute(db);
      await deliverAll(db);
    };
    await subjectRows('subject-s');
    const small = await erase('subject-s0');
    await grow(db, state, 'l', LARGE);
    await keyed('l');
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    await subjectRows('subject-l');
    const large = await erase('subject-l0');
    for (const { seqScans, erased } of [small, large]) {
      t.same(seqScans, {}, 'no sequential scan of any table');
      t.match(erased, { requests: 2, callbacks: 1, events: 1, idempotencyKeys: 2 }, 'the subject erased');
    }
    t.ok(large.blocks <= FLAT * small.blocks, `buffers per erasure flat: ${small.blocks} at ${SMALL * 2} requests, ${large.blocks} at ${(SMALL + LARGE) * 2}`);
  });
}
