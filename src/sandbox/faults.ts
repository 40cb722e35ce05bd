import type { Socket } from 'node:net';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { allowlistGuard } from '../access/guards.js';
import { errorSchema, validationErrorSchema } from '../http/errors.js';

/**
 * What the simulator does besides accepting: a rate limit (429 with Retry-After over it), 503s
 * (with Retry-After) before anything is run, and submits it receives and runs (the callback still
 * comes) but never answers. Set at start (SANDBOX_MAX_RPS, SANDBOX_FAIL_503_RATE,
 * SANDBOX_TIMEOUT_AFTER_RECEIVE_RATE, SANDBOX_RETRY_AFTER_S) or at run time (POST /_sandbox/faults).
 * It counts what arrives, per second and per customer (GET /_sandbox/stats), so that a test or the
 * bench can see the pace it was called at and whether a customer was submitted twice.
 */

export const faultsSchema = z.strictObject({
  maxRps: z.number().int().positive().nullable().describe('Calls per second (by the sandbox clock) above which it answers 429; null: no limit'),
  fail503Rate: z.number().min(0).max(1).describe('Share of calls answered 503 before anything is run'),
  timeoutAfterReceiveRate: z.number().min(0).max(1).describe('Share of accepted calls never answered (the callback still comes)'),
  retryAfterS: z.number().int().min(0).max(3600).describe('Retry-After of a 503; a 429 says the seconds to the next second'),
});
export type Faults = z.infer<typeof faultsSchema>;

export const NO_FAULTS: Faults = Object.freeze({ maxRps: null, fail503Rate: 0, timeoutAfterReceiveRate: 0, retryAfterS: 1 });

export const statsSchema = z.object({
  /** Calls that reached the underwriting route (auth and body valid), by what they were answered. */
  calls: z.object({ total: z.number(), accepted: z.number(), unanswered: z.number(), rateLimited: z.number(), unavailable: z.number() }),
  /** Calls that arrived in each second (Unix seconds, the sandbox's clock), refused ones included. */
  perSecond: z.record(z.string(), z.number()),
  /** Underwritings run (accepted or unanswered) per customerUuid: more than 1 is a customer submitted twice. */
  received: z.record(z.string(), z.number()),
});
export type SandboxStats = z.infer<typeof statsSchema>;

/** What to do with one call that passed auth and validation. */
export type Admission = { answer: 'accept' | 'hang' } | { answer: 429 | 503; retryAfterS: number };

export interface FaultState {
  faults(): Faults;
  set(faults: Partial<Faults>): Faults;
  admit(customerUuid: string, nowMs: number): Admission;
  /** Keeps a never-answered call's socket, destroyed when the sandbox closes. */
  hold(socket: Socket): void;
  stats(): SandboxStats;
  resetStats(): void;
  close(): void;
}

export function faultState(initial: Faults, random: () => number = Math.random): FaultState {
  let faults: Faults = { ...initial };
  let stats: SandboxStats;
  const held = new Set<Socket>();
  const reset = () => {
    stats = { calls: { total: 0, accepted: 0, unanswered: 0, rateLimited: 0, unavailable: 0 }, perSecond: {}, received: {} };
  };
  reset();
  return {
    faults: () => ({ ...faults }),
    set(change) {
      faults = { ...faults, ...change };
      return { ...faults };
    },
    admit(customerUuid, nowMs) {
      const second = String(Math.floor(nowMs / 1000));
      const inSecond = (stats.perSecond[second] = (stats.perSecond[second] ?? 0) + 1);
      stats.calls.total++;
      if (faults.maxRps !== null && inSecond > faults.maxRps) {
        stats.calls.rateLimited++;
        return { answer: 429, retryAfterS: 1 };
      }
      if (faults.fail503Rate > 0 && random() < faults.fail503Rate) {
        stats.calls.unavailable++;
        return { answer: 503, retryAfterS: faults.retryAfterS };
      }
      stats.received[customerUuid] = (stats.received[customerUuid] ?? 0) + 1;
      if (faults.timeoutAfterReceiveRate > 0 && random() < faults.timeoutAfterReceiveRate) {
        stats.calls.unanswered++;
        return { answer: 'hang' };
      }
      stats.calls.accepted++;
      return { answer: 'accept' };
    },
    hold(socket) {
      held.add(socket);
      socket.once('close', () => held.delete(socket));
    },
    stats: () => structuredClone(stats),
    resetStats: reset,
    close() {
      for (const socket of held) socket.destroy();
      held.clear();
    },
  };
}

/** POST /_sandbox/faults, GET /_sandbox/stats, DELETE /_sandbox/stats: the sandbox's own test controls, behind its allowlist. */
export const faultRoutes =
  (state: FaultState, allowedIps: string[]): FastifyPluginAsyncZod =>
  async (app) => {
    const guard = allowlistGuard('sandbox', allowedIps, 'sandbox: refused: address not in the allowlist');
    app.post(
      '/_sandbox/faults',
      {
        onRequest: guard,
        schema: { body: faultsSchema.partial(), response: { 200: faultsSchema, 400: validationErrorSchema, 403: errorSchema } },
      },
      async (request) => state.set(request.body),
    );
    app.get('/_sandbox/stats', { onRequest: guard, schema: { response: { 200: statsSchema, 403: errorSchema } } }, async () => state.stats());
    app.delete('/_sandbox/stats', { onRequest: guard, schema: { response: { 204: z.null(), 403: errorSchema } } }, async (_request, reply) => {
      state.resetStats();
      return reply.code(204).send(undefined as never);
    });
  };
