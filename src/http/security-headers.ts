import type { FastifyInstance } from 'fastify';
import type { FastifyHelmetOptions } from '@fastify/helmet';
import { createRequire } from 'node:module';

// Security headers computed ONCE, at start, by helmet itself from @fastify/helmet's options, and
// set on every answer by one plain hook. @fastify/helmet applied globally builds a new helmet
// middleware (every header's options parsed, the CSP included) on every request, costing more CPU
// than these headers alone (bench/investigations/helmet-cost.ts; figures in docs/performance-history.md).

/** The options of @fastify/helmet's registration: the one source of the headers. */
export type SecurityHeaderOptions = FastifyHelmetOptions;

// The very helmet @fastify/helmet itself calls (its own dependency, same version), not a copy.
const helmetOfThePlugin = createRequire(createRequire(import.meta.url).resolve('@fastify/helmet'))('helmet') as (
  options: object,
) => (req: unknown, res: unknown, next: (err?: unknown) => void) => void;

/**
 * The headers helmet sets with these options, by lowercase name, in helmet's order. (Header
 * removals, X-Powered-By, are nothing Fastify ever sets.) Options that depend on the request (CSP
 * nonces, a directive computed by a function) cannot be computed once and are refused.
 */
export function securityHeaders(options: SecurityHeaderOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  const res = {
    setHeader(name: string, value: string | number | readonly string[]) {
      headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
    },
    removeHeader() {},
    getHeader: () => undefined,
  };
  // @fastify/helmet's own options; helmet would refuse them.
  const { global: _global, enableCSPNonces, ...helmetOptions } = options;
  if (enableCSPNonces) throw new Error('per-request CSP nonces cannot be computed once: use @fastify/helmet on that route');
  const csp = helmetOptions.contentSecurityPolicy;
  const directives = typeof csp === 'object' && csp !== null ? Object.values(csp.directives ?? {}) : [];
  if (directives.flat().some((v) => typeof v === 'function')) {
    throw new Error('a CSP directive computed per request cannot be computed once: use @fastify/helmet on that route');
  }
  let failed: unknown;
  helmetOfThePlugin(helmetOptions)({ method: 'GET', url: '/', headers: {} }, res, (err) => (failed = err));
  if (failed) throw failed instanceof Error ? failed : new Error(String(failed));
  return Object.freeze(headers) as Record<string, string>;
}

/** Sets the precomputed headers on every answer (404s and errors included), before the route runs. */
export function addSecurityHeaders(app: FastifyInstance, options: SecurityHeaderOptions): void {
  const headers = securityHeaders(options);
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(headers);
    done();
  });
}
