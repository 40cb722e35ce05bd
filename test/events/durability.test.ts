import t from 'tap';
import { openDatabase } from '../../src/db/database.js';
import { buildTestApp, gatewayProcessEnv } from '../helpers/app.js';
import { freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { startProcess } from '../helpers/process.js';
import { databaseBehindRelay } from '../helpers/relay.js';
import { CALLBACK_URL, customer, insertRequest, postCallback, resultBody } from '../callbacks/fixtures.js';
import { pushEnv, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// Both need a real PostgreSQL server: one to cut the connection to, one that outlives a killed process.
if (SERVER_URL) {
  t.test('after kill -9 under callback load, every acknowledged callback has its event delivered', async (t) => {
    const receiver = await startReceiver(t);
    const secret = webhookSecret();
    const url = await freshDatabaseUrl(t);
    const env = { ...gatewayProcessEnv(url), ...pushEnv([receiver.url], secret) };
    const first = startProcess(t, env);
    const base = await first.listening();
    const database = await openDatabase({ databaseUrl: url, dataDir: 'unused' });
    t.teardown(() => database.close());
    const customers = Array.from({ length: 300 }, () => customer('crash'));
    for (const c of customers) await insertRequest(database.db, { customerUuid: c, status: 'submitted' });

    const acknowledged: string[] = [];
    let killed = false;
    await Promise.all(
      customers.map(async (c) => {
        try {
          const res = await httpRequest(`${base}${CALLBACK_URL}`, { body: resultBody(c) });
          if (res.status === 200) acknowledged.push(c);
          if (acknowledged.length >= 40 && !killed) {
            killed = true;
            first.child.kill('SIGKILL');
          }
        } catch {
          /* cut off by the kill */
        }
      }),
    );
    t.equal((await first.exited).signal, 'SIGKILL');
    t.ok(acknowledged.length >= 40, `${acknowledged.length} acknowledged before the kill`);

    // Another instance takes over what the dead one had leased, once its short lease runs out.
    const second = startProcess(t, env);
    await second.listening();
    const wanted = new Set(acknowledged);
    await receiver.waitFor(() => {
      const got = new Set(receiver.received.filter((r) => r.json.type === 'underwriting.completed').map((r) => r.json.data.customerUuid));
      return [...wanted].every((c) => got.has(c));
    });
    t.pass(`every one of the ${wanted.size} acknowledged callbacks had its event delivered`);
    const [events, stored] = await Promise.all([
      database.db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
      database.db.selectFrom('callbacks').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    t.equal(Number(events.n), Number(stored.n), 'one event per stored callback, none without');
    t.notMatch([...first.stdout, ...second.stdout].join('\n'), secret.slice(6), 'the webhook secret is never logged');
  });

  t.test('a database outage during delivery loses nothing: outcomes and pending deliveries are retried once it is back', async (t) => {
    const { database, relay } = await databaseBehindRelay(t);
    let cutAt = 0;
    const receiver = await startReceiver(t, (_r, n) => {
      if (n === 1) {
        relay.cut();
        cutAt = Date.now();
      }
      return 200;
    });
    const { app, logs } = await buildTestApp(t, { database, env: pushEnv([receiver.url], webhookSecret()) });
    await app.ready();
    const [a, b] = [customer('outage-a'), customer('outage-b')];
    await insertRequest(database.db, { customerUuid: a, status: 'submitted' });
    await postCallback(app, resultBody(a));
    await receiver.count(1);
    // Down: the outcome of the first cannot be written, and a callback cannot be stored either.
    t.equal((await postCallback(app, resultBody(b))).statusCode, 503);
    await until(async () => (logs.text().includes('could not record event delivery outcomes') ? true : undefined));
    relay.restore();
    t.ok(cutAt > 0);
    t.equal((await postCallback(app, resultBody(b))).statusCode, 200, 'stored once the database is back');
    const delivered = await until(async () => {
      const rows = await database.db.selectFrom('event_deliveries').select(['customer_uuid', 'status']).execute();
      return rows.length === 2 && rows.every((r) => r.status === 'delivered') ? rows : undefined;
    });
    t.same(new Set(delivered.map((r) => r.customer_uuid)), new Set([a, b]));
    const got = receiver.received.map((r) => r.json.data.customerUuid);
    t.ok(got.includes(a) && got.includes(b), 'both reached the receiver');
  });
}
