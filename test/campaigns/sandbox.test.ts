import { once } from 'node:events';
import net from 'node:net';
import { sql } from 'kysely';
import t from 'tap';
import { SANDBOX_DEFAULT_CPFS, SANDBOX_DEFAULT_PARTNER_TOKEN } from '../../src/sandbox/config.js';
import { buildTestApp } from '../helpers/app.js';
import { until } from '../helpers/until.js';
import { startSandbox } from '../sandbox/helpers.js';
import { CSV, cpfOf, get, upload } from './fixtures.js';

// End to end: a CSV campaign forwarded by the queue's forwarder to the sandbox provider, whose
// callbacks come back through the gateway's callback route; progress and results read back.

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

t.test('a campaign goes through the sandbox: every line forwarded once, completed by its callback, results by decision', async (t) => {
  const port = await freePort();
  const sandbox = await startSandbox(t, { SANDBOX_CALLBACK_URL: `http://127.0.0.1:${port}/v1/callbacks/underwriting`, SANDBOX_DELAY_MS: '50' });
  const { app, database } = await buildTestApp(t, {
    // A loaded machine (PGlite, the sandbox and the gateway in one process) answers slowly: no timeout stands in for a failure.
    env: { PROVIDER_BASE_URL: sandbox.base, PARTNER_TOKEN: SANDBOX_DEFAULT_PARTNER_TOKEN, UPSTREAM_TIMEOUT_MS: '15000' },
  });
  await app.listen({ host: '127.0.0.1', port });

  const rows = [
    'customerUuid,cpf,costSavingEnabled,srd.grossIncome',
    `sbx-approve,${SANDBOX_DEFAULT_CPFS.approve},false,9000`,
    `sbx-decline,${SANDBOX_DEFAULT_CPFS.standardReject},false,1200`,
    `sbx-filter,${SANDBOX_DEFAULT_CPFS.costSavingReject},true,`,
    ...Array.from({ length: 20 }, (_, i) => `sbx-${i},${cpfOf(800 + i)},false,3000`),
    'sbx-bad,123,false,1',
  ];
  const res = await upload(app, `${rows.join('\r\n')}\r\n`, CSV);
  t.equal(res.statusCode, 202, res.body);
  t.match(res.json(), { accepted: 23, rejectedTotal: 1, rejected: [{ line: 25 }] });
  const id = res.json().id;

  const done = await until(
    async () => {
      const view = (await get(app, `/v1/campaigns/${id}`)).json();
      return view.status === 'done' && view;
    },
    60_000,
    'the campaign done',
  );
  const { rows: failures } = await sql<{ upstream_error: string }>`select distinct upstream_error from underwriting_requests where status = 'submit_failed'`.execute(database.db);
  t.same(failures, [], 'no forward failed');
  t.match(done.counts, { queued: 0, submitting: 0, submitted: 0, completed: 23 });
  // The three scenario CPFs decide as configured; the others by the sandbox's own derivation.
  t.ok(done.counts.approved >= 1 && done.counts.declined >= 1 && done.counts.filtered >= 1, JSON.stringify(done.counts));
  t.equal(done.counts.approved + done.counts.declined + done.counts.filtered + done.counts.no_score, 23);

  const results = (await get(app, `/v1/campaigns/${id}/results`, { accept: 'application/x-ndjson' })).body.trimEnd().split('\n').map((l) => JSON.parse(l));
  t.equal(results.length, 23);
  t.match(results.slice(0, 3), [
    { customerUuid: 'sbx-approve', status: 'completed', decision: 'approved' },
    { customerUuid: 'sbx-decline', status: 'completed', decision: 'declined', limit: 0 },
    { customerUuid: 'sbx-filter', status: 'completed', decision: 'filtered', score: -1 },
  ]);
  const received = sandbox.logs.entries().filter((e) => e.msg === 'sandbox: underwriting accepted');
  const perCustomer = new Map<string, number>();
  for (const e of received) perCustomer.set(e.customerUuid, (perCustomer.get(e.customerUuid) ?? 0) + 1);
  t.equal(perCustomer.size, 23, 'every accepted line reached the sandbox');
  t.ok([...perCustomer.values()].every((n) => n === 1), 'no customer submitted twice at the sandbox');
});
