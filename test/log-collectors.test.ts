import t from 'tap';
import { captureLogs } from './helpers/logs.js';
import { submitGateway, validRequest } from './submissions/fixtures.js';

t.test('JSON log lines carry time as ISO 8601 and level as its name', async (t) => {
  const logs = captureLogs('info');
  logs.logger.warn('a warning');
  logs.logger.error('an error');
  const [warning, error] = logs.entries();
  t.equal(warning!.level, 'warn');
  t.equal(error!.level, 'error');
  t.match(warning!.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.ok(Math.abs(Date.parse(warning!.time as string) - Date.now()) < 60_000, 'and it is now');
});

t.test('an accepted submit is logged at info with its customerUuid, never its CPF', async (t) => {
  const { submit, logs } = await submitGateway(t);
  const body = validRequest();
  t.equal((await submit(body)).statusCode, 202);
  t.match(logs.entries().find((e) => e.msg === 'submitted: the provider accepted the request'), {
    level: 'info',
    customerUuid: body.customerUuid,
    upstreamStatus: 202,
  });
  t.notMatch(logs.text(), body.cpf);
});
