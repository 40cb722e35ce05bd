import pino from 'pino';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { fixedEndpoints } from '../../src/events/endpoints/registry.js';
import { startDispatch } from '../../src/events/queue-sql.js';
import { startDeliveryWorker } from '../../src/events/worker.js';
import { recordResults } from '../../src/requests/complete.js';
import { customer, insertRequest, resultBody } from '../callbacks/fixtures.js';
import { freshDatabase } from '../helpers/database.js';
import { configuredTarget, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// What the callback statement records, this instance sends once it commits: the statement tells
// the worker, which writes the delivery (leased to itself) and sends it, with no poll and no
// notification standing between the two.

const database = await freshDatabase(t);
const { db } = database;

t.test("a callback's event is sent once its statement commits, with no poll and no notification", async (t) => {
  const receiver = await startReceiver(t);
  const target = configuredTarget(receiver.url);
  const secret = webhookSecret();
  // As the events plugin does before the instance records anything: the target gets what follows.
  await startDispatch(db, [target], new Date());
  const worker = startDeliveryWorker({
    db,
    endpoints: fixedEndpoints([target], secret),
    disableAfterS: 86_400,
    clock: () => new Date(),
    timeoutMs: 5000,
    horizonS: 3600,
    log: pino({ level: 'silent' }),
    // No claim after the one at start (which finds nothing) for far longer than the test.
    pollMs: 600_000,
  });
  t.teardown(() => worker.stop());

  const cust = customer('handoff');
  await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  const body = resultBody(cust);
  const json = JSON.stringify(body);
  const [recorded] = await recordResults(
    db,
    [{ receivedAt: new Date(), peer: null, rawBody: Buffer.from(json), customerUuid: cust, started: body.started, finished: body.finished, body: json, decision: 'approved' }],
    { skewS: 300, handoff: worker },
  );
  t.equal(recorded!.disposition, 'matched');

  // The timer is cleared once the race is decided: left running, it held the file open 10 s more.
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, 10_000, undefined)));
  const arrived = await Promise.race([receiver.count(1), gaveUp]).finally(() => clearTimeout(timer));
  t.ok(arrived, 'delivered without waiting for a poll');
  const got = arrived![0]!;
  const event = new Webhook(secret).verify(got.body, got.headers as Record<string, string>) as Record<string, any>;
  t.match(event, { type: 'underwriting.completed', data: { customerUuid: cust, status: 'completed', decision: 'approved', result: body } });
  t.match(event.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.same(Object.keys(event).sort(), ['data', 'id', 'timestamp', 'type']);

  // The stored delivery says delivered, at the first attempt, its lease released.
  const row = await until(async () => {
    const found = await db
      .selectFrom('event_deliveries')
      .select(['status', 'attempts', 'lease_token'])
      .where('customer_uuid', '=', cust)
      .executeTakeFirstOrThrow();
    return found.status === 'pending' ? undefined : found;
  });
  t.match(row, { status: 'delivered', attempts: 1, lease_token: null });
});
