import net from 'node:net';
import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { httpRequest } from '../helpers/http.js';
import { BATCH_LINES } from '../../src/campaigns/upload.js';
import { line, ndjson } from './fixtures.js';

// A client that closes its connection part-way through a campaign's file (FIN or RST mid-body) is
// its own failure: no "unhandled error" at error level, no 500, /readyz untouched
// (docs/readiness.md: "nothing logged at error level").

const { app, logs, database } = await buildTestApp(t);
const statuses: number[] = [];
let answered: (() => void) | undefined;
app.addHook('onSend', (request, reply, payload, done) => {
  if (request.url === '/v1/campaigns') {
    statuses.push(reply.statusCode);
    answered?.();
  }
  done(null, payload);
});
const url = await listen(app);
const { port } = new URL(url);

for (const how of ['fin', 'rst'] as const) {
  t.test(`a campaign upload cut off mid-body (${how})`, async (t) => {
    logs.lines.length = 0;
    statuses.length = 0;
    const answer = new Promise<void>((resolve) => (answered = resolve));
    await new Promise<void>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => {
        socket.write(
          'POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100000\r\n\r\n' +
            '{"customerUuid":"cut-1","cpf":"16180339805","costSavingEnabled":false}\n{"customerUu',
        );
        setTimeout(() => (how === 'fin' ? socket.end() : socket.resetAndDestroy()), 200);
      });
      socket.on('error', () => {});
      socket.resume();
      socket.on('close', () => resolve());
    });
    // The app finishes with the request: its answer (to nobody) is the event.
    await answer;
    const bad = logs.entries().filter((e) => e.level === 'error' || e.level === 50 || e.level === 'fatal' || e.level === 60);
    t.same(bad.map((e) => e.msg), [], 'nothing at error level');
    t.equal(statuses.length, 1, 'answered');
    t.ok(statuses[0]! >= 400 && statuses[0]! < 500, `answered as a client error (${statuses[0]})`);
    t.equal((await httpRequest(`${url}/readyz`)).status, 200, 'still ready');
  });
}

t.test("a campaign cut off after its first batch: its uploadError says the client left", async (t) => {
  // It said only 'the upload stopped' (found by the campaigns' hostile field test).
  statuses.length = 0;
  const answer = new Promise<void>((resolve) => (answered = resolve));
  const file = ndjson(Array.from({ length: BATCH_LINES + 1 }, (_, i) => line(`cut-batch-${i}`, 1)));
  await new Promise<void>((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => {
      socket.write(`POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: ${Buffer.byteLength(file) + 1000}\r\n\r\n${file}{"customerUu`);
      setTimeout(() => socket.end(), 200);
    });
    socket.on('error', () => {});
    socket.resume();
    socket.on('close', () => resolve());
  });
  await answer;
  const campaign = await database.db.selectFrom('campaigns').select(['status', 'upload_error']).orderBy('id', 'desc').executeTakeFirstOrThrow();
  t.equal(campaign.status, 'cancelled');
  t.equal(campaign.upload_error, 'the client closed the connection before the end of the file');
});
