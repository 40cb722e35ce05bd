import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { postCallback, resultBody, startedPlus } from '../callbacks/fixtures.js';
import { buildTestApp } from '../helpers/app.js';

// What the endpoint tests share: an instance with an admin key, and calls with or without it.

export const ADMIN_KEY = 'admin-key-0123456789abcdef';

/** An instance on `database` with ADMIN_API_KEYS set, ready. */
export async function adminGateway(t: Test, database: DatabaseHandle, env: Record<string, string> = {}) {
  // 5 s per attempt: tests assert first attempts delivered, and at 2 s a prompt answer read late on a
  // loaded host (two suites and a container build on 2 cores) was a timeout; a test of timeouts sets its own.
  const built = await buildTestApp(t, { database, env: { ADMIN_API_KEYS: ADMIN_KEY, EVENT_WEBHOOK_TIMEOUT_MS: '5000', ...env } });
  await built.app.ready();
  return built;
}

/** A call with the admin key (admin: false, without: the query routes' way). */
export function call(app: FastifyInstance, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, admin = true) {
  return app
    .inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
      headers: admin ? { authorization: `Bearer ${ADMIN_KEY}` } : {},
    })
    .then((res) => ({ status: res.statusCode, body: res.body === '' ? undefined : (res.json() as any), text: res.body }));
}

/** An unmatched callback: one callback.unmatched event of that customer. */
export const stray = (app: FastifyInstance, cust: string, seconds = 0) => postCallback(app, resultBody(cust, { started: startedPlus(seconds) }));
