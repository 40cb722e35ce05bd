import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, unauthorized } from '../errors.js';
import { secretMatches } from './guards.js';

const BEARER = /^Bearer +([^\s]+) *$/i;

/** The bearer token a request presents, if any. */
export function presentedBearer(request: FastifyRequest): string | undefined {
  return BEARER.exec(request.headers.authorization ?? '')?.[1];
}

const adminDisabled = () =>
  new AppError(403, 'forbidden', 'personal-data and audit routes are disabled: ADMIN_API_KEYS is not configured');

/**
 * An onRequest hook for the personal-data and audit routes: 403 while ADMIN_API_KEYS is unset (they
 * are off), 401 without `Authorization: Bearer <one of them>` (compared in constant time).
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
