import t from 'tap';
import { failedAttemptLevel, WARN_FAILING_AFTER_S } from '../../src/events/attempt-log.js';
import { buildTestApp } from '../helpers/app.js';
import { captureLogs } from '../helpers/logs.js';
import { customer, insertRequest, postCallback, resultBody } from '../callbacks/fixtures.js';
import { pushEnv, until, webhookSecret } from './fixtures.js';
import { startReceiver } from './receiver.js';

t.test('a failed attempt is logged at info while the delivery has failed for under a minute, then at warn', async (t) => {
  const queued = new Date('2026-01-01T00:00:00Z');
  const after = (s: number) => new Date(queued.getTime() + s * 1000);
  t.equal(WARN_FAILING_AFTER_S, 60);
  t.equal(failedAttemptLevel(queued, after(1)), 'info');
  t.equal(failedAttemptLevel(queued, after(59.9)), 'info');
  t.equal(failedAttemptLevel(queued, after(60)), 'warn');
  t.equal(failedAttemptLevel(queued, after(3600)), 'warn');
});

t.test('delivery lines carry the customerUuid: a failed attempt at info, a delivered one at debug', async (t) => {
  const receiver = await startReceiver(t, (_r, n) => (n === 1 ? 503 : 200));
  const logs = captureLogs('debug');
  const { app, database } = await buildTestApp(t, { env: pushEnv([receiver.url], webhookSecret()), logs });
  await app.ready();
  const cust = customer('logged');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  t.equal((await postCallback(app, resultBody(cust))).statusCode, 200);

  const delivered = await until(async () => logs.entries().find((e) => e.msg === 'event delivered'));
  t.match(delivered, { level: 'debug', customerUuid: cust, attempts: 2, status: 200 });
  t.match(logs.entries().find((e) => e.msg === 'event delivery failed; will retry'), { level: 'info', customerUuid: cust, attempts: 1, status: 503 });
  t.notOk(logs.entries().some((e) => e.msg === 'event delivered' && e.level !== 'debug'), 'a success is never above debug');
});
