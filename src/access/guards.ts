import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { errorBody, forbidden } from '../errors.js';
import { addressMatcher } from './addresses.js';

export type RouteGroup = 'submit' | 'callback' | 'query';

/**
 * An onRequest hook that refuses (403 forbidden) any client outside the allowlist, before the
 * body is read. request.ip is the TCP peer, or the X-Forwarded-For client when the peer is a
 * trusted proxy (Fastify's trustProxy, fed by TRUST_PROXY).
 */
export function allowlistGuard(group: RouteGroup, entries: readonly string[]): onRequestHookHandler {
  const allowed = addressMatcher(entries);
  return function guard(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    if (allowed(request.ip)) return done();
    request.log.warn({ group, client: request.ip, peer: request.socket.remoteAddress }, 'refused: address not in allowlist');
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
