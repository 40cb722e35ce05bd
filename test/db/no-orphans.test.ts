import { type Kysely, sql } from 'kysely';
import t from 'tap';
import { formatCpf } from '../../src/cpf.js';
import type { Tables } from '../../src/db/types.js';
import { expireOverdue } from '../../src/requests/expiry.js';
import { purgePass } from '../../src/retention/sweep.js';
import { postCallback, resultBody } from '../callbacks/fixtures.js';
import { cpfFrom } from '../helpers/cpf.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { adminApp, post } from '../personal-data/fixtures.js';
import { insertRequest } from '../queries/fixtures.js';

// Migration 0027 dropped three of the foreign keys the callback statement had checked on every
// result (requests <-> callbacks, events -> requests), and with them the cascade from a request to
// its events. What deletes rows (erasure, retention) deletes every dependant itself. This runs the
// lifecycle through the routes and passes that write and delete (callbacks matched, duplicate,
// unmatched and invalid; expiry; erasure by CPF; retention) and finds, after each step that
// deletes, no row referring to a row that is gone; and the same with the cascade from callbacks to
// events gone too (kept only for instances of the version before, during a rolling deploy).

/** Rows whose reference (a column once or still a foreign key) names a row that does not exist, by reference. */
async function orphans(db: Kysely<Tables>): Promise<Record<string, number>> {
  const { rows } = await sql<{ ref: string; n: number }>`
    select 'callbacks.request_id' as ref, count(*)::int as n from callbacks c
     where c.request_id is not null and not exists (select 1 from underwriting_requests r where r.id = c.request_id)
    union all
    select 'underwriting_requests.result_callback_id', count(*)::int from underwriting_requests r
     where r.result_callback_id is not null and not exists (select 1 from callbacks c where c.id = r.result_callback_id)
    union all
    select 'events.request_id', count(*)::int from events e
     where e.request_id is not null and not exists (select 1 from underwriting_requests r where r.id = e.request_id)
    union all
    select 'events.callback_id', count(*)::int from events e
     where e.callback_id is not null and not exists (select 1 from callbacks c where c.id = e.callback_id)
    union all
    select 'event_deliveries.event_id', count(*)::int from event_deliveries d
     where not exists (select 1 from events e where e.id = d.event_id)
    union all
    select 'idempotency_keys.request_id', count(*)::int from idempotency_keys k
     where k.request_id is not null and not exists (select 1 from underwriting_requests r where r.id = k.request_id)`.execute(db);
  return Object.fromEntries(rows.filter((r) => r.n > 0).map((r) => [r.ref, r.n]));
}

async function counts(db: Kysely<Tables>) {
  const { rows } = await sql<{ requests: number; callbacks: number; events: number }>`
    select (select count(*) from underwriting_requests)::int as requests, (select count(*) from callbacks)::int as callbacks,
           (select count(*) from events)::int as events`.execute(db);
  return rows[0]!;
}

for (const cascade of [true, false]) {
  t.test(`no row outlives what it refers to through the lifecycle (${ENGINE}${cascade ? '' : ', no cascade from callbacks to events'})`, async (t) => {
    const database = await freshDatabase(t);
    const { db } = database;
    if (!cascade) await sql`alter table events drop constraint events_callback_id_fkey`.execute(db);
    const { app } = await adminApp(t, { database });
    const subjectCpf = cpfFrom('386512097');
    const otherCpf = cpfFrom('204918375');

    // The subject: a request completed by its callback (sent twice: the second is a duplicate).
    await insertRequest(db, { customerUuid: 'orphans-subject', cpf: subjectCpf, status: 'submitted' });
    for (let i = 0; i < 2; i++) t.equal((await postCallback(app, resultBody('orphans-subject'))).statusCode, 200);
    // Another customer's result naming the subject's CPF in free text: unmatched, its event names that customer.
    const unmatched = await postCallback(app, { ...resultBody('orphans-someone-else'), note: `titular ${formatCpf(subjectCpf)}` });
    t.equal(unmatched.statusCode, 200, unmatched.body);
    // An invalid callback; a second customer whose request expires; a third whose request completes.
    t.equal((await postCallback(app, '{"customerUuid":"orphans-invalid"')).statusCode, 400);
    await insertRequest(db, { customerUuid: 'orphans-expires', cpf: otherCpf, status: 'submitted', submittedAt: '2026-01-01T10:00:00Z' });
    t.equal((await expireOverdue(db, new Date(), 600)).length, 1, 'one request expired, with its event');
    await insertRequest(db, { customerUuid: 'orphans-kept', cpf: otherCpf, status: 'submitted' });
    t.equal((await postCallback(app, resultBody('orphans-kept'))).statusCode, 200);
    t.same(await counts(db), { requests: 3, callbacks: 4, events: 4 }, 'what the lifecycle wrote (the duplicate wrote nothing)');
    t.same(await orphans(db), {}, 'nothing refers to a row that is gone');

    const erased = await post(app, '/v1/personal-data/erase', { cpf: subjectCpf });
    t.equal(erased.statusCode, 200, erased.body);
    t.same(
      erased.json().erased,
      { requests: 1, callbacks: 2, events: 2 },
      "the subject's request, its result and the unmatched callback that named its CPF, and both their events (the unmatched one names another customer)",
    );
    t.same(await orphans(db), {}, 'after erasure, nothing refers to a row that is gone');
    t.same(await counts(db), { requests: 2, callbacks: 2, events: 2 }, 'the others stay');

    const later = new Date(Date.now() + 90 * 24 * 3600_000);
    const purged = await purgePass(db, later, 30);
    t.same([purged.underwriting_requests, purged.callbacks, purged.events], [2, 2, 2], 'retention takes the rest');
    t.same(await orphans(db), {}, 'after retention, nothing refers to a row that is gone');
    t.same(await counts(db), { requests: 0, callbacks: 0, events: 0 });
  });
}
