import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config } from '../config/config.js';
import { partnerTokenSchema } from '../config/env.js';
import { AppError, errorBody, forbidden, unauthorized } from '../http/errors.js';
import { addressMatcher } from './addresses.js';

// Every access check of the gateway and of the sandbox: who may call a route, and with which secret.

export type RouteGroup = 'submit' | 'callback' | 'query' | 'sandbox';

const BEARER = /^Bearer +([^\s]+) *$/i;

/** The bearer token a request presents, if any. */
export function presentedBearer(request: FastifyRequest): string | undefined {
  return BEARER.exec(request.headers.authorization ?? '')?.[1];
}

/**
 * An onRequest hook that refuses (403 forbidden) any client outside the allowlist, before the
 * body is read. request.ip is the TCP peer, or the X-Forwarded-For client when the peer is a
 * trusted proxy (Fastify's trustProxy, fed by TRUST_PROXY).
 */
export function allowlistGuard(
  group: RouteGroup,
  entries: readonly string[],
  refusal = 'refused: address not in allowlist',
): onRequestHookHandler {
  const allowed = addressMatcher(entries);
  return function guard(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    if (allowed(request.ip)) return done();
    request.log.warn({ group, client: request.ip, peer: request.socket.remoteAddress }, refusal);
    void reply.code(403).send(errorBody(forbidden()));
  };
}

/** Compares a presented secret with the expected ones in constant time (lengths hidden by hashing). */
export function secretMatches(presented: string | undefined, expected: readonly string[]): boolean {
  if (presented === undefined) return false;
  const digest = createHash('sha256').update(presented).digest();
  let match = false;
  for (const candidate of expected) {
    // No early exit: every candidate is compared, so timing says nothing about which one matched.
    if (timingSafeEqual(digest, createHash('sha256').update(candidate).digest())) match = true;
  }
  return match;
}

/** When QUERY_API_KEYS is set, an onRequest hook demanding `Authorization: Bearer <one of them>` (401). */
export function apiKeyGuard(keys: readonly string[]) {
  return async function requireApiKey(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (keys.length === 0) return;
    if (secretMatches(presentedBearer(request), keys)) return;
    void reply.header('www-authenticate', 'Bearer');
    throw unauthorized('a valid API key is required: Authorization: Bearer <key>');
  };
}

const adminDisabled = () =>
  new AppError(403, 'forbidden', 'admin routes (personal data, audit, endpoints) are disabled: ADMIN_API_KEYS is not configured');

/**
 * An onRequest hook for the admin routes (personal data, audit, /v1/endpoints): 403 while
 * ADMIN_API_KEYS is unset (they are off), 401 without `Authorization: Bearer <one of them>`
 * (compared in constant time).
 */
export function adminKeyGuard(keys: readonly string[]) {
  return async function requireAdminKey(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (keys.length === 0) throw adminDisabled();
    if (secretMatches(presentedBearer(request), keys)) return;
    void reply.header('www-authenticate', 'Bearer');
    request.log.warn({ client: request.ip }, 'refused: missing or wrong admin key');
    throw unauthorized('a valid admin key is required: Authorization: Bearer <key>');
  };
}

/**
 * The checks of every route of a plugin, as onRequest hooks: the query allowlist (403), then a key.
 * `query`: one of QUERY_API_KEYS when it is set (401); `admin`: one of ADMIN_API_KEYS (403 while unset, 401).
 */
/** What a route plugin guarded by guardRoutes needs of the configuration: the query allowlist and the keys. */
export type RouteAccess = Pick<Config, 'queryAllowedIps' | 'queryApiKeys' | 'adminApiKeys'>;

export function guardRoutes(app: Pick<FastifyInstance, 'addHook'>, access: 'query' | 'admin', config: RouteAccess): void {
  app.addHook('onRequest', allowlistGuard('query', config.queryAllowedIps));
  app.addHook('onRequest', access === 'query' ? apiKeyGuard(config.queryApiKeys) : adminKeyGuard(config.adminApiKeys));
}

/** When CALLBACK_SECRET is set, ?token= must carry it (401); checked before the body is read. */
export function callbackTokenGuard(secret: string | undefined): onRequestHookHandler {
  return function checkToken(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    if (secret === undefined) return done();
    const token = (request.query as Record<string, unknown>).token;
    if (secretMatches(typeof token === 'string' ? token : undefined, [secret])) return done();
    // Never the token itself: the logged URL is redacted by the logger, and nothing else names it.
    request.log.warn({ group: 'callback', client: request.ip, presented: token !== undefined }, 'refused: wrong or missing callback token');
    void reply.code(401).send(errorBody(unauthorized('missing or wrong callback token')));
  };
}

/** The sandbox's provider edge: X-Partner-Auth must be a well-formed partner token and the expected one (401). */
export function partnerTokenGuard(expected: string): onRequestHookHandler {
  return function checkPartnerToken(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    const presented = request.headers['x-partner-auth'];
    const token = typeof presented === 'string' ? presented : undefined;
    if (token && partnerTokenSchema.safeParse(token).success && secretMatches(token, [expected])) return done();
    request.log.warn('sandbox: refused: missing or wrong X-Partner-Auth');
    void reply.code(401).send(errorBody(unauthorized('missing or wrong X-Partner-Auth')));
  };
}
