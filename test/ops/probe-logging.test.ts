import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { captureLogs } from '../helpers/logs.js';

const PROBES = ['/healthz', '/readyz', '/metrics'];

t.test('probes write no info line; their request lines are debug', async (t) => {
  const logs = captureLogs('debug');
  const { app } = await buildTestApp(t, { logs });
  for (const url of PROBES) t.equal((await app.inject({ method: 'GET', url, headers: { 'x-request-id': `probe${url.replace('/', '-')}` } })).statusCode, 200, url);
  const ofProbes = logs.entries().filter((e) => typeof e.reqId === 'string' && e.reqId.startsWith('probe-'));
  t.equal(ofProbes.length, 2 * PROBES.length, 'incoming and completed, for each probe');
  t.same([...new Set(ofProbes.map((e) => e.level))], ['debug']);
});

t.test('other routes keep their request lines at info', async (t) => {
  const logs = captureLogs('info');
  const { app } = await buildTestApp(t, { logs });
  await app.inject({ method: 'GET', url: '/healthz' });
  await app.inject({ method: 'GET', url: '/v1/underwritings/nobody', headers: { 'x-request-id': 'query-1' } });
  t.same(
    logs.entries().filter((e) => e.reqId === 'query-1').map((e) => [e.level, e.msg]),
    [
      ['info', 'incoming request'],
      ['info', 'request completed'],
    ],
  );
  t.notOk(logs.entries().some((e) => (e.req as { url?: string } | undefined)?.url === '/healthz'), 'at info, nothing of the probe');
});
