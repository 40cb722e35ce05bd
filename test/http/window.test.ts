import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { instantBefore } from '../../src/http/query.js';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { dereference } from '../helpers/openapi.js';

// Every route that takes a window [since, until) refuses one whose since is not before its until:
// 400 validation_failed at since, the same on each, where it used to answer an empty page (or
// queue nothing) as if nothing had happened in it.

const ADMIN_KEY = 'admin-key-0123456789abcdef';
const NOW = new Date('2020-03-01T12:00:00Z');
const ORDER = { path: 'since', message: 'must be before until' };

type Window = { since?: string; until?: string };
type Answer = { status: number; body: any };

const inQuery = (method: 'GET', url: string, ok: number, headers: Record<string, string> = {}) => ({
  method,
  ok,
  send: async (app: FastifyInstance, w: Window): Promise<Answer> => {
    const res = await app.inject({ method, url: `${url}?${new URLSearchParams(w).toString()}`, headers });
    return { status: res.statusCode, body: res.json() };
  },
});

/** Each route (as the OpenAPI document names it) with since and until, and how to send it a window. */
const ROUTES = {
  'GET /v1/underwritings': inQuery('GET', '/v1/underwritings', 200),
  'GET /v1/audit': inQuery('GET', '/v1/audit', 200, { authorization: `Bearer ${ADMIN_KEY}` }),
  'GET /v1/stats': inQuery('GET', '/v1/stats', 200),
  'POST /v1/events/redeliver': {
    ok: 202,
    send: async (app: FastifyInstance, w: Window): Promise<Answer> => {
      const res = await app.inject({ method: 'POST', url: '/v1/events/redeliver', payload: { status: 'dead', ...w } });
      return { status: res.statusCode, body: res.json() };
    },
  },
} as const;

const REFUSED: Array<[string, Window]> = [
  ['swapped', { since: '2020-01-02T00:00:00Z', until: '2020-01-01T00:00:00Z' }],
  ['swapped within one hour', { since: '2020-01-01T00:45:00Z', until: '2020-01-01T00:15:00Z' }],
  ['equal', { since: '2020-01-01T00:30:00Z', until: '2020-01-01T00:30:00Z' }],
  ['equal, written with another offset and more digits', { since: '2020-01-01T01:00:00+01:00', until: '2020-01-01T00:00:00.000000Z' }],
  ['swapped past the millisecond', { since: '2020-01-01T00:00:00.000002Z', until: '2020-01-01T00:00:00.000001Z' }],
];

const ACCEPTED: Array<[string, Window]> = [
  ['a day', { since: '2020-01-01T00:00:00Z', until: '2020-01-02T00:00:00Z' }],
  ['one microsecond', { since: '2020-01-01T00:00:00.000001Z', until: '2020-01-01T00:00:00.000002Z' }],
  ['since alone', { since: '2020-03-01T00:00:00Z' }],
  ['until alone', { until: '2020-03-01T00:00:00Z' }],
  // One definition of an instant everywhere: redeliver took date-times only, where the others take a date too.
  ['dates', { since: '2020-01-01', until: '2020-01-02' }],
];

const database = await freshDatabase(t);

t.test('a window whose since is not before its until is 400 validation_failed at since, on every route that takes one', async (t) => {
  const { app } = await buildTestApp(t, { database, clock: () => NOW, env: { ADMIN_API_KEYS: ADMIN_KEY } });
  for (const [route, { send, ok }] of Object.entries(ROUTES)) {
    for (const [name, window] of REFUSED) {
      const res = await send(app, window);
      t.equal(res.status, 400, `${route}, ${name}`);
      t.equal(res.body.error, 'validation_failed', `${route}, ${name}`);
      t.same(res.body.issues, [ORDER], `${route}, ${name}: one issue, at since`);
    }
    for (const [name, window] of ACCEPTED) {
      const res = await send(app, window);
      t.equal(res.status, ok, `${route}, ${name}: ${res.status === ok ? '' : JSON.stringify(res.body)}`);
    }
    for (const since of ['0000-01-01T00:00:00Z', '2020-01-01T00:00:00+16:00']) {
      const refused = await send(app, { since });
      t.equal(refused.status, 400, `${route}: ${since} is no instant PostgreSQL can hold`);
    }
    // An invalid since says what is wrong with it, not that it is out of order as well.
    const invalid = await send(app, { since: 'yesterday', until: '2020-01-01T00:00:00Z' });
    t.equal(invalid.status, 400, `${route}, an invalid since`);
    t.ok(invalid.body.issues.length > 0 && invalid.body.issues.every((i: { path: string; message: string }) => i.path === 'since' && i.message !== ORDER.message), `${route}: ${JSON.stringify(invalid.body.issues)}`);
  }
});

t.test('the table above holds every documented route that takes both since and until', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const doc = (await app.inject({ url: '/docs/json' })).json();
  const windowed: string[] = [];
  for (const [path, item] of Object.entries(doc.paths) as Array<[string, Record<string, any>]>) {
    for (const [method, op] of Object.entries(item)) {
      const names = new Set<string>((op.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => p.name));
      const body = dereference(doc, op.requestBody?.content?.['application/json']?.schema ?? {});
      for (const name of Object.keys(body?.properties ?? {})) names.add(name);
      if (names.has('since') && names.has('until')) windowed.push(`${method.toUpperCase()} ${path}`);
    }
  }
  t.same(windowed.sort(), Object.keys(ROUTES).sort());
});

t.test('instants compare as instants: offsets count, and so do digits past the millisecond', (t) => {
  t.ok(instantBefore('2020-01-01T00:00:00Z', '2020-01-01T00:00:00.000001Z'));
  t.notOk(instantBefore('2020-01-01T00:00:00.000001Z', '2020-01-01T00:00:00Z'));
  t.ok(instantBefore('2020-01-01T00:00:00.00045Z', '2020-01-01T00:00:00.0005Z'));
  t.notOk(instantBefore('2020-01-01T00:00:00.00050Z', '2020-01-01T00:00:00.0005Z'), 'trailing zeros change nothing');
  t.notOk(instantBefore('2020-01-01T02:00:00+01:00', '2020-01-01T01:00:00Z'), 'the same instant');
  t.ok(instantBefore('2020-01-01T02:00:00+01:00', '2020-01-01T01:00:00.1Z'));
  t.ok(instantBefore('2020-01-01T10:00:00+15:59', '2019-12-31T19:00:00-15:59'));
  t.end();
});
