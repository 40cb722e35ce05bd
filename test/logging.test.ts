import t from 'tap';
import { redactUrl } from '../src/logger.js';
import { buildTestApp, TEST_PARTNER_TOKEN } from './helpers/app.js';
import { captureLogs } from './helpers/logs.js';

const CPF = '52998224725';
const BEARER = 'eyJhbGciOiJIUzI1NiJ9.secret-bearer-value.sig';

t.test('pino redacts secrets and CPFs at any depth', async (t) => {
  const logs = captureLogs();
  logs.logger.info({ cpf: CPF, body: { cpf: CPF, srd: { nested: { cpf: CPF } } }, partnerToken: TEST_PARTNER_TOKEN }, 'x');
  logs.logger.info({ config: { clientSecret: 'client-secret-value', callbackSecret: 'callback-secret-value' } }, 'y');
  logs.logger.info({ headers: { authorization: `Bearer ${BEARER}`, 'x-partner-auth': TEST_PARTNER_TOKEN } }, 'z');
  const text = logs.text();
  for (const secret of [CPF, TEST_PARTNER_TOKEN, BEARER, 'client-secret-value', 'callback-secret-value']) {
    t.notMatch(text, secret, 'never written');
  }
  t.match(text, /\[redacted\]/);
});

t.test('query-string secrets are redacted from logged URLs', async (t) => {
  t.equal(redactUrl('/v1/callbacks/underwriting?token=abc&x=1'), '/v1/callbacks/underwriting?token=[redacted]&x=1');
  t.equal(redactUrl('/a?x=1&api_key=zzz'), '/a?x=1&api_key=[redacted]');
  t.equal(redactUrl('/plain'), '/plain');
});

t.test('request logs carry ids but no header secrets or query tokens', async (t) => {
  const { app, logs } = await buildTestApp(t);
  await app.inject({
    method: 'GET',
    url: '/healthz?token=query-secret-value',
    headers: { authorization: `Bearer ${BEARER}`, 'x-partner-auth': TEST_PARTNER_TOKEN, 'x-request-id': 'req-abc-1' },
  });
  const text = logs.text();
  t.notMatch(text, 'query-secret-value');
  t.notMatch(text, BEARER);
  t.notMatch(text, TEST_PARTNER_TOKEN);
  const completed = logs.entries().find((e) => e.msg === 'request completed');
  t.match(completed, { reqId: 'req-abc-1' }, 'a sane caller request id is kept');
});

t.test("every line a request's logger writes carries its id, and no other line does", async (t) => {
  const { app, logs } = await buildTestApp(t);
  app.get('/log-probe', async (request) => {
    request.log.child({ step: 'inner' }).warn('from a child of the request logger');
    return { ok: true };
  });
  await app.inject({ method: 'GET', url: '/log-probe', headers: { 'x-request-id': 'req-probe-1' } });
  app.log.warn('from the application logger');
  const entries = logs.entries();
  t.match(entries.find((e) => e.msg === 'incoming request'), { reqId: 'req-probe-1' });
  t.match(entries.find((e) => e.msg === 'from a child of the request logger'), { reqId: 'req-probe-1', step: 'inner' });
  t.match(entries.find((e) => e.msg === 'request completed'), { reqId: 'req-probe-1' });
  t.notOk('reqId' in entries.find((e) => e.msg === 'from the application logger')!, 'the application logger has no request');
  t.equal(entries.filter((e) => e.reqId === 'req-probe-1').length, 3);
});
