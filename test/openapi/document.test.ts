import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { dereference, responseChecker, schemaValidator } from '../helpers/openapi.js';
import { insertRequest, distinctResult } from '../queries/fixtures.js';

// The document at /docs/json as validators and client generators read it. Every other test file
// also checks each answer it provokes against this document (test/helpers/openapi.ts).

const database = await freshDatabase(t);

async function documentOf() {
  const { app } = await buildTestApp(t, { database });
  const res = await app.inject({ method: 'GET', url: '/docs/json' });
  return res.json();
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

function operations(doc: any): Array<{ path: string; method: string; op: any }> {
  return Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ path, method, op })),
  );
}

function schemasOf(doc: any): any[] {
  const found: any[] = [];
  const walk = (node: any) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      if (typeof node.type === 'string' || node.nullable !== undefined || node.enum) found.push(node);
      Object.values(node).forEach(walk);
    }
  };
  walk(doc.paths);
  walk(doc.components?.schemas);
  return found;
}

t.test('every route follows the conventions: operationId, security, described answers (use operation() from src/http/openapi.ts)', async (t) => {
  const doc = await documentOf();
  const ids = new Set<string>();
  for (const { path, method, op } of operations(doc)) {
    const name = `${method.toUpperCase()} ${path}`;
    t.ok(op.operationId, `${name} has an operationId: spread operation('<id>', '<access>') into its schema`);
    t.notOk(ids.has(op.operationId), `${name}: operationId ${op.operationId} is unique`);
    ids.add(op.operationId);
    t.ok(Array.isArray(op.security), `${name} declares its security (operation('<id>', 'open' | 'query' | 'admin' | 'callback'))`);
    for (const requirement of op.security ?? []) {
      for (const scheme of Object.keys(requirement)) t.ok(doc.components.securitySchemes?.[scheme], `${name}: security scheme ${scheme} is defined`);
    }
    t.ok(op.tags?.length, `${name} has a tag`);
    for (const [status, response] of Object.entries(op.responses) as Array<[string, any]>) {
      t.not(response.description, 'Default Response', `${name} ${status} is described`);
    }
  }
  t.ok(ids.size >= 8, `${ids.size} operations`);
});

t.test('security schemes: bearer keys and the callback token, referenced by the routes that use them (Swagger UI shows Authorize)', async (t) => {
  const doc = await documentOf();
  t.match(doc.components.securitySchemes, {
    queryKey: { type: 'http', scheme: 'bearer' },
    callbackToken: { type: 'apiKey', in: 'query', name: 'token' },
  });
  t.same(doc.paths['/v1/underwritings/{customerUuid}'].get.security, [{ queryKey: [] }, {}], 'the key is required only when QUERY_API_KEYS is set');
  t.same(doc.paths['/v1/callbacks/underwriting'].post.security, [{ callbackToken: [] }, {}]);
  t.same(doc.paths['/healthz'].get.security, [], 'no credential');
  t.ok(doc.servers?.length, 'servers');
});

t.test('OpenAPI 3.1: null is a type (no 3.0 `nullable`), and a pending record (decision null) validates', async (t) => {
  const doc = await documentOf();
  t.equal(doc.openapi, '3.1.0');
  t.notMatch(JSON.stringify(doc), /"nullable"/, 'no OpenAPI 3.0 nullable keyword');
  const validator = schemaValidator(doc);
  const record = { $ref: '#/components/schemas/UnderwritingRecord' };
  const pending = {
    customerUuid: 'c-1', status: 'submitted', decision: null, cpfMasked: '***.982.247-**', costSavingEnabled: false,
    srd: null, submittedAt: '2026-01-01T00:00:00.000Z', completedAt: null, upstreamStatus: 202, result: null,
  };
  t.ok(validator.accepts(record, pending), 'null decision, srd, completedAt and result validate');
  t.notOk(validator.accepts(record, { ...pending, decision: 'maybe' }), 'a decision outside the enum does not');
  t.notOk(validator.accepts(record, { ...pending, cpfMasked: null }), 'null where the schema has no null does not');
});

t.test('numbers are numbers with real bounds: integer query parameters, no 2^53 examples', async (t) => {
  const doc = await documentOf();
  const params = (path: string, method: string) => Object.fromEntries(doc.paths[path][method].parameters.map((p: any) => [p.name, p.schema]));
  t.same(params('/v1/underwritings/{customerUuid}', 'get').wait, { type: 'integer', minimum: 0, maximum: 30 });
  t.same(params('/v1/underwritings', 'get').limit, { type: 'integer', minimum: 1, maximum: 500 });
  t.same(params('/v1/underwritings/lookup', 'post').limit, { type: 'integer', minimum: 1, maximum: 500 });
  t.same(params('/v1/events', 'get').limit, { type: 'integer', minimum: 1, maximum: 500 });
  t.same(params('/v1/events', 'get').wait, { type: 'integer', minimum: 0, maximum: 30 });
  t.same(params('/v1/callbacks', 'get').limit, { type: 'integer', minimum: 1, maximum: 200 });
  t.same(params('/v1/audit', 'get').limit, { type: 'integer', minimum: 1, maximum: 500 });
  // Every numeric-looking query parameter is an integer, never text a client would send as '10'.
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(item)) {
      for (const p of op.parameters ?? []) {
        if (['limit', 'wait'].includes(p.name)) t.equal(p.schema.type, 'integer', `${method.toUpperCase()} ${path} ?${p.name} is an integer`);
      }
    }
  }
  t.same(dereference(doc, doc.components.schemas.SubmitAccepted).properties.upstreamStatus, { type: 'integer', minimum: 100, maximum: 599 });
  for (const schema of schemasOf(doc)) {
    for (const bound of ['minimum', 'maximum']) {
      if (typeof schema[bound] === 'number') t.ok(Math.abs(schema[bound]) < 2 ** 52, `${bound} ${schema[bound]} is a real bound`);
    }
  }
});

t.test('every status a route answers is documented: the lookup 413 and 415, /metrics as Prometheus text', async (t) => {
  const doc = await documentOf();
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).sort();
  // 408 and 431 anywhere (Node's refusals), 414 where a path parameter is, 413 and 415 where a body is.
  t.same(statuses('/v1/underwritings/lookup', 'post'), ['200', '400', '401', '403', '408', '413', '415', '431', '500', '503']);
  t.same(statuses('/v1/underwritings', 'get'), ['200', '400', '401', '403', '408', '431', '500', '503']);
  t.same(statuses('/v1/underwritings/{customerUuid}', 'get'), ['200', '400', '401', '403', '404', '408', '414', '431', '500', '503']);
  t.same(statuses('/v1/callbacks/underwriting', 'post'), ['200', '400', '401', '403', '408', '413', '431', '500', '503'], 'the callback reads any content type: no 415');
  t.same(Object.keys(doc.paths['/metrics'].get.responses['200'].content), ['text/plain; version=0.0.4']);

  const { app } = await buildTestApp(t, { database });
  const tooLarge = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf: '1'.repeat(2_000_000) } });
  t.equal(tooLarge.statusCode, 413);
  const plain = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', headers: { 'content-type': 'text/plain' }, payload: '{"cpf":"52998224725"}' });
  t.equal(plain.statusCode, 415);
  const metrics = await app.inject({ method: 'GET', url: '/metrics' });
  t.match(metrics.headers['content-type'], /^text\/plain; version=0\.0\.4/);
});

t.test('the answers check: a pending record (decision null) validates; a wrong body or an undocumented status does not', async (t) => {
  const doc = await documentOf();
  const checker = responseChecker(doc);
  await insertRequest(database.db, { customerUuid: 'pending-1' });
  await insertRequest(database.db, { customerUuid: 'done-1', result: distinctResult('done-1', { score: 700, limit: 5000 }) });
  const { app } = await buildTestApp(t, { database });
  for (const customerUuid of ['pending-1', 'done-1']) {
    const res = await app.inject({ method: 'GET', url: `/v1/underwritings/${customerUuid}` });
    t.equal(res.statusCode, 200);
    const answer = { method: 'GET', route: '/v1/underwritings/:customerUuid', status: 200, contentType: res.headers['content-type'] as string, body: res.body };
    t.same(checker.check(answer), [], `${customerUuid} (decision ${res.json().decision}) matches the document`);
    if (customerUuid === 'pending-1') {
      t.equal(res.json().decision, null);
      t.match(checker.check({ ...answer, body: JSON.stringify({ ...res.json(), decision: 'maybe' }) }), [/\/decision /], 'a decision outside the enum is caught');
      t.match(checker.check({ ...answer, status: 418 }), [/does not document/], 'an undocumented status is caught');
      t.match(checker.check({ ...answer, contentType: 'text/html' }), [/as text\/html/], 'another content type is caught');
    }
  }
});

t.test('date parameters are documented as what the server accepts: a date-time with a zone, or a date', async (t) => {
  const doc = await documentOf();
  const { app } = await buildTestApp(t, { database });
  const checker = schemaValidator(doc);
  for (const [path, query] of [['/v1/underwritings', 'since'], ['/v1/underwritings', 'until'], ['/v1/audit', 'since'], ['/v1/stats', 'since'], ['/v1/callbacks', 'since']] as const) {
    const schema = doc.paths[path].get.parameters.find((p: any) => p.name === query).schema;
    for (const value of ['2026-11-23', '2026-11-23T01:02:03Z', '2026-11-23T01:02:03.123456-03:00']) {
      t.ok(checker.accepts(schema, value), `${path} ?${query}=${value} is documented as valid`);
      const res = await app.inject({ url: `${path}?${query}=${encodeURIComponent(value)}`, headers: path === '/v1/audit' ? { authorization: 'Bearer none' } : {} });
      if (path !== '/v1/audit') t.equal(res.statusCode, 200, `and the server takes it (${res.body.slice(0, 120)})`);
    }
    for (const value of ['23/11/2026', '2026-11-23T01:02:03']) {
      t.notOk(checker.accepts(schema, value), `${path} ?${query}=${value} is documented as invalid`);
      if (path !== '/v1/audit') t.equal((await app.inject({ url: `${path}?${query}=${encodeURIComponent(value)}` })).statusCode, 400, 'and the server refuses it');
    }
  }
});
