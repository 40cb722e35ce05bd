import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { type ClosingPass, startClosing } from './closing.js';

/**
 * The statistics' closing pass (closing.ts) on every instance, from ready to close: they share the
 * work through the closing lock.
 */
export const statisticsClosing = (deps: { db: Kysely<Tables>; clock: () => Date }): FastifyPluginAsync =>
  // Not encapsulated: app.statisticsClosing is visible on the app.
  fp(async (app) => {
    let pass: ClosingPass | undefined;
    app.addHook('onReady', async () => {
      pass = startClosing({ ...deps, log: app.log });
    });
    app.addHook('onClose', async () => pass?.stop());
    // Tests (and an operator's tooling) may run a pass on demand.
    app.decorate('statisticsClosing', { run: async () => pass?.run() });
  });

declare module 'fastify' {
  interface FastifyInstance {
    statisticsClosing: { run(): Promise<void> };
  }
}
