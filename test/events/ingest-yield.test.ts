import { sql } from 'kysely';
import pino from 'pino';
import t, { type Test } from 'tap';
import { recordEventsSql } from '../../src/events/record.js';
import { fixedEndpoints } from '../../src/events/endpoints/registry.js';
import { startDispatch } from '../../src/events/queue-sql.js';
import { startDeliveryWorker, TRICKLE_CLAIM } from '../../src/events/worker.js';
import { BUSY_LEVEL, type IngestLoad, ingestLoad } from '../../src/timing/ingest-load.js';
import { freshDatabase } from '../helpers/database.js';
import { configuredTarget, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// Answering the provider comes first: while this instance is busy with callbacks, the push goes
// out as a trickle, and the backlog follows at once when the burst is over.

const database = await freshDatabase(t);
const { db } = database;

/** Records `count` events for distinct customers, the target configured (their deliveries not written yet). */
async function recordEvents(prefix: string, count: number, target: ReturnType<typeof configuredTarget>): Promise<void> {
  await startDispatch(db, [target], new Date());
  await sql`
    with source as (
      select 'underwriting.completed' as type, ${prefix} || g as customer_uuid, now() as created_at,
             null::bigint as request_id, null::bigint as callback_id, jsonb_build_object('customerUuid', ${prefix} || g) as data
      from generate_series(1, ${count}::int) g
    ),
    ${sql.raw(recordEventsSql('source'))}
    select 1`.execute(db);
}

/** A worker pushing to the target under the given load, with no poll for far longer than a test: the only trickle is the one at start. */
function startWorker(t: Test, target: ReturnType<typeof configuredTarget>, load: IngestLoad, concurrency?: number) {
  const worker = startDeliveryWorker({
    db,
    endpoints: fixedEndpoints([target], webhookSecret()),
    disableAfterS: 86_400,
    clock: () => new Date(),
    timeoutMs: 5000,
    horizonS: 3600,
    log: pino({ level: 'silent' }),
    pollMs: 600_000,
    ...(concurrency === undefined ? {} : { concurrency }),
    ingest: load,
  });
  t.teardown(() => worker.stop());
  return worker;
}

/** True once no delivery is leased any more: the trickle's finished attempts are written. */
function noLeaseLeft(): Promise<boolean> {
  return until(async () => {
    const row = await db
      .selectFrom('event_deliveries')
      .select((eb) => [eb.fn.countAll<string>().as('leased')])
      .where('lease_token', 'is not', null)
      .executeTakeFirstOrThrow();
    return Number(row.leased) === 0 ? true : undefined;
  });
}

/** An ingest load on a clock the test steps. */
function steppedLoad() {
  let ms = 0;
  const load = ingestLoad({ now: () => ms });
  return { load, step: (by: number) => (ms += by) };
}

t.test('the ingest load is busy while callbacks pile up, not for one at a time, and says when a burst is over', async (t) => {
  const { load, step } = steppedLoad();
  let idle = 0;
  load.onIdle(() => idle++);
  for (let i = 0; i < 200; i++) {
    const leave = load.enter();
    step(2);
    leave();
    step(1);
  }
  t.notOk(load.busy(), 'one callback at a time, however many');
  t.notOk(load.pressed(), 'nor pressed');
  const burst = Array.from({ length: 32 }, () => load.enter());
  t.notOk(load.busy(), 'a burst that has only just begun is not busy yet');
  step(300);
  t.notOk(load.busy(), 'nor after 300 ms: a hiccup is not a burst');
  t.ok(load.pressed(), 'but pressed already: what can wait (the push) waits');
  step(600);
  t.ok(load.busy(), `32 in hand for 900 ms is busy (from ${BUSY_LEVEL} on average, sustained)`);
  for (const leave of burst.slice(0, 10)) leave();
  burst[0]!(); // answering twice counts once
  step(200);
  t.ok(load.busy(), 'still busy with 22 in hand');
  for (const leave of burst) leave();
  t.ok(load.busy(), 'the average does not drop at once');
  step(200);
  t.notOk(load.busy(), 'idle once the burst has been answered for a while');
  t.notOk(load.pressed(), 'and no longer pressed');
  t.equal(idle, 1, 'told once as it stops being busy');
  load.enter()();
  step(200);
  t.notOk(load.busy());
  t.equal(idle, 1, 'not told again while it stays idle');
});

t.test('while callback ingest is busy only a trickle of deliveries goes out; the rest follows once it is idle', async (t) => {
  const receiver = await startReceiver(t);
  const target = configuredTarget(receiver.url);
  // Three times what may be in flight after the trickle: the backlog goes out batch after batch,
  // each as the one before it finishes, not one batch per poll.
  const concurrency = 32;
  const events = TRICKLE_CLAIM + 3 * concurrency;
  await recordEvents('yield-', events, target);

  const { load, step } = steppedLoad();
  const burst = Array.from({ length: 32 }, () => load.enter());
  step(300);
  load.busy();
  step(600);
  t.ok(load.busy(), 'busy from the start');
  startWorker(t, target, load, concurrency);

  await receiver.count(TRICKLE_CLAIM);
  t.ok(await noLeaseLeft());
  t.equal(receiver.received.length, TRICKLE_CLAIM, 'one trickle claim while busy, not the whole backlog');

  for (const leave of burst) leave();
  step(200);
  t.notOk(load.busy(), 'the burst is over'); // which tells the worker
  const all = await receiver.count(events);
  t.equal(new Set(all.map((r) => r.json.data.customerUuid)).size, events, 'every event delivered once ingest is idle');
});

t.test("the first moments of a burst already hold the push back; the next commit after them sends what waited", async (t) => {
  const receiver = await startReceiver(t);
  const target = configuredTarget(receiver.url);
  const events = TRICKLE_CLAIM * 3;
  await recordEvents('pressed-', events, target);

  const { load, step } = steppedLoad();
  const burst = Array.from({ length: 32 }, () => load.enter());
  step(300);
  t.ok(load.pressed() && !load.busy(), 'pressed, not busy yet');
  const worker = startWorker(t, target, load);

  await receiver.count(TRICKLE_CLAIM);
  t.ok(await noLeaseLeft());
  t.equal(receiver.received.filter((r) => r.json.data.customerUuid.startsWith('pressed-')).length, TRICKLE_CLAIM, 'one trickle while pressed');

  for (const leave of burst) leave();
  step(200);
  t.notOk(load.pressed(), 'the moment is over');
  worker.committed();
  const all = await receiver.waitFor(() => receiver.received.filter((r) => r.json.data.customerUuid.startsWith('pressed-')).length >= events);
  t.equal(new Set(all.filter((r) => r.json.data.customerUuid.startsWith('pressed-')).map((r) => r.json.data.customerUuid)).size, events, 'the rest goes with the next commit');
});
