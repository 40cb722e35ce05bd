import type { FastifyReply, FastifyRequest } from 'fastify';
import { secretMatches } from '../access/guards.js';
import { unauthorized } from '../errors.js';

const BEARER = /^Bearer +([^\s]+) *$/i;

/** When QUERY_API_KEYS is set, an onRequest hook demanding `Authorization: Bearer <one of them>` (401). */
export function apiKeyGuard(keys: readonly string[]) {
  return async function requireApiKey(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (keys.length === 0) return;
    const presented = BEARER.exec(request.headers.authorization ?? '')?.[1];
    if (secretMatches(presented, keys)) return;
    void reply.header('www-authenticate', 'Bearer');
    throw unauthorized('a valid API key is required: Authorization: Bearer <key>');
  };
}
