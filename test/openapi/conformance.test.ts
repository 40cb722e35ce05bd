import net from 'node:net';
import t from 'tap';
import { resultBody } from '../callbacks/fixtures.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { responseChecker } from '../helpers/openapi.js';
import { databaseBehindRelay } from '../helpers/relay.js';
import { CPF, validRequest } from '../submissions/fixtures.js';

// Every status the server answers before (or around) a route is documented for every operation,
// and the answer matches the document. Node writes 400, 408 and 431 straight to the socket (no
// hook sees them), so they are read off a real connection here and checked against /docs/json;
// the others go through Fastify, where buildTestApp's check sees them as well.

const ADMIN_KEY = 'admin-key-conformance-0123456789';
const { app, database } = await buildTestApp(t, {
  env: { ADMIN_API_KEYS: ADMIN_KEY },
  serverTimeouts: { headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 50 },
});
const base = await listen(app);
// The same with the default timeouts, for the refusals that are not timeouts: with a 300 ms headers
// timeout, a host that held the event loop that long ran the timeout check before reading the bytes,
// and a malformed header line was answered 408 (CI's PGlite run, GET /v1/underwritings).
const { app: patient } = await buildTestApp(t, { database, env: { ADMIN_API_KEYS: ADMIN_KEY } });
const patientBase = await listen(patient);
const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
const checker = responseChecker(doc);

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
/** Each kind of {id}'s shape, by path. */
const ID_PREFIXES: Array<[string, string]> = [
  ['/v1/endpoints', 'ep_'],
  ['/v1/campaigns', 'cmp_'],
];
const operations: Array<{ path: string; method: string; route: string; url: string; op: any }> = Object.entries(doc.paths as Record<string, any>).flatMap(
  ([path, item]) =>
    Object.entries(item as Record<string, any>)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({
        path,
        method: method.toUpperCase(),
        route: path.replace(/\{(\w+)\}/g, ':$1'),
        url: path.replace('{customerUuid}', 'conformance-1').replace('{id}', `${ID_PREFIXES.find(([p]) => path.startsWith(p))?.[1] ?? 'evt_'}${'0'.repeat(32)}`),
        op,
      })),
);

/** Writes raw bytes on a fresh connection and resolves with what the server wrote before closing it. */
function raw(bytes: string, at = base): Promise<{ status: number; contentType: string | undefined; body: string }> {
  const { hostname, port } = new URL(at);
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = net.connect({ host: hostname, port: Number(port) }, () => socket.write(bytes));
    socket.on('data', (d: Buffer) => void (answer += d.toString('utf8')));
    socket.on('error', () => {});
    socket.on('close', () => {
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      if (!status) return reject(new Error(`no HTTP answer: ${JSON.stringify(answer.slice(0, 200))}`));
      resolve({ status, contentType: /^content-type: (.*)$/im.exec(head)?.[1]?.trim(), body });
    });
  });
}

const headers = (o: (typeof operations)[number]) =>
  `Host: conformance\r\nAuthorization: Bearer ${o.op.security?.some((s: object) => 'adminKey' in s) ? ADMIN_KEY : 'none'}\r\n`;

t.ok(operations.length >= 15, `${operations.length} operations`);

for (const o of operations) {
  t.test(`${o.method} ${o.path}: the refusals before any route runs are documented and answered as documented`, async (t) => {
    const cases: Array<{ expect: number; bytes: string; what: string; at: string }> = [
      { expect: 400, what: 'a malformed header line', bytes: `${o.method} ${o.url} HTTP/1.1\r\n${headers(o)}Not A Header\r\n\r\n`, at: patientBase },
      { expect: 408, what: 'headers that never end', bytes: `${o.method} ${o.url} HTTP/1.1\r\n${headers(o)}`, at: base },
      { expect: 431, what: 'headers over 16 KiB', bytes: `${o.method} ${o.url} HTTP/1.1\r\n${headers(o)}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`, at: patientBase },
    ];
    for (const c of cases) {
      const answer = await raw(c.bytes, c.at);
      t.equal(answer.status, c.expect, `${c.what}: ${c.expect}`);
      t.same(checker.check({ method: o.method, route: o.route, ...answer }), [], `${c.what}: the answer matches the document`);
    }

    if (o.path.includes('{')) {
      const long = o.path.replace(/\{\w+\}/, 'x'.repeat(300)).replace(/\{\w+\}/g, 'y');
      const res = await app.inject({ method: o.method as 'GET', url: long, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      t.equal(res.statusCode, 414, 'a path parameter over 256 characters: 414');
      t.same(checker.check({ method: o.method, route: o.route, status: res.statusCode, contentType: res.headers['content-type'] as string, body: res.body }), []);
    }

    if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(o.method)) {
      const authorization = `Bearer ${ADMIN_KEY}`;
      const tooLarge = await app.inject({ method: o.method as 'POST', url: o.url, headers: { authorization, 'content-type': 'application/json' }, payload: `{"x":"${'a'.repeat(70_000)}"}` });
      // The campaigns' upload takes only its files' types: a JSON body is refused by its type (415), not its size.
      if (o.op.operationId === 'createCampaign') t.equal(tooLarge.statusCode, 415, 'a JSON body over 64 KiB: 415, by its type');
      else t.equal(tooLarge.statusCode, 413, 'a body over 64 KiB: 413');
      const plain = await app.inject({ method: o.method as 'POST', url: o.url, headers: { authorization, 'content-type': 'text/plain' }, payload: '{}' });
      // The callback route keeps any body as bytes: there, and only there, no 415.
      if (o.op.responses['415']) t.equal(plain.statusCode, 415, 'a body that is not JSON: 415');
      else t.not(plain.statusCode, 415, 'no 415 where none is documented');
    }

    for (const status of ['400', '408', '431', '500']) t.ok(o.op.responses[status], `${status} is documented`);
  });
}

t.test('every error answer is the shared error body: no inline error schemas', async (t) => {
  for (const o of operations) {
    for (const [status, response] of Object.entries(o.op.responses as Record<string, any>)) {
      if (Number(status) < 400) continue;
      const schema = response.content?.['application/json']?.schema;
      const ref: string | undefined = schema?.$ref ?? schema?.allOf?.[0]?.$ref;
      t.match(ref, /^#\/components\/schemas\/(ErrorBody|ValidationErrorBody|UpstreamErrorBody)$/, `${o.method} ${o.path} ${status} references a named error body`);
    }
  }
});

// The guards' and the database's answers, route by route: every operation documenting 401, 403 or
// 503 is driven to it (buildTestApp checks each answer against the document as it leaves).

const QUERY_KEY = 'query-key-conformance-0123456789';
const CALLBACK_SECRET = 'callback-secret-conformance-0123';
/** A valid request for each operation that needs a body or parameters, so that only the guard or the database decides. */
const BODIES: Record<string, unknown> = {
  submitUnderwriting: validRequest({ customerUuid: 'conformance-1' }),
  receiveUnderwritingCallback: resultBody('conformance-1'),
  lookupUnderwritings: { cpf: CPF },
  exportPersonalData: { customerUuid: 'conformance-1' },
  erasePersonalData: { customerUuid: 'conformance-1' },
  redeliverDeadEvents: { status: 'dead' },
  createEndpoint: { url: 'http://127.0.0.1:9/conformance' },
  updateEndpoint: { description: 'conformance' },
  rotateEndpointSecret: {},
  replayToEndpoint: { since: '2026-01-01T00:00:00Z' },
  createCampaign: `${JSON.stringify(validRequest({ customerUuid: 'conformance-2' }))}\n`,
};
/** The content type of a body that is not JSON. */
const CONTENT_TYPES: Record<string, string> = { createCampaign: 'application/x-ndjson' };
const credentials = (o: (typeof operations)[number]): Record<string, string> => {
  const admin = o.op.security?.some((s: object) => 'adminKey' in s);
  return { authorization: `Bearer ${admin ? ADMIN_KEY : QUERY_KEY}` };
};
const withToken = (o: (typeof operations)[number]) => (o.op.operationId === 'receiveUnderwritingCallback' ? `${o.url}?token=${CALLBACK_SECRET}` : o.url);
const guardedEnv = { ADMIN_API_KEYS: ADMIN_KEY, QUERY_API_KEYS: QUERY_KEY, CALLBACK_SECRET };

t.test('every operation documenting 401 answers it without credentials, as documented', async (t) => {
  const guarded = await buildTestApp(t, { env: guardedEnv });
  const documented = operations.filter((o) => o.op.responses['401']);
  t.ok(documented.length >= 13, `${documented.length} operations`);
  for (const o of documented) {
    const res = await guarded.app.inject({ method: o.method as 'GET', url: o.url, ...(BODIES[o.op.operationId] ? { payload: BODIES[o.op.operationId] as object } : {}) });
    t.equal(res.statusCode, 401, `${o.method} ${o.path}`);
  }
});

t.test('every operation documenting 403 answers it to a peer outside its allowlist, as documented', async (t) => {
  const guarded = await buildTestApp(t, { env: guardedEnv });
  const url = await listen(guarded.app);
  const documented = operations.filter((o) => o.op.responses['403']);
  t.ok(documented.length >= 14, `${documented.length} operations`);
  for (const o of documented) {
    const body = BODIES[o.op.operationId];
    const res = await httpRequest(`${url}${withToken(o)}`, { method: o.method, headers: credentials(o), localAddress: '127.0.0.2', ...(body ? { body } : {}) });
    t.equal(res.status, 403, `${o.method} ${o.path} from 127.0.0.2`);
  }
});

if (SERVER_URL) {
  t.test('every operation documenting 503 answers it while the database is unreachable, as documented', async (t) => {
    const { database, relay } = await databaseBehindRelay(t);
    const guarded = await buildTestApp(t, { database, env: guardedEnv });
    const documented = operations.filter((o) => o.op.responses['503']);
    t.ok(documented.length >= 15, `${documented.length} operations`);
    relay.cut();
    for (const o of documented) {
      const body = BODIES[o.op.operationId];
      const type = CONTENT_TYPES[o.op.operationId];
      const res = await guarded.app.inject({ method: o.method as 'GET', url: withToken(o), headers: { ...credentials(o), ...(type ? { 'content-type': type } : {}) }, ...(body ? { payload: body as object } : {}) });
      t.equal(res.statusCode, 503, `${o.method} ${o.path}: ${res.body.slice(0, 100)}`);
    }
    relay.restore();
  });
}
