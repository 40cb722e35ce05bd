import type { FastifyBaseLogger } from 'fastify';
import { isStorageUnavailable } from '../db/storage-errors.js';

export interface Periodic {
  /** Runs one pass now (or joins the one running); never throws. */
  run(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A background pass every intervalMs on this instance, one at a time. A failed pass is logged
 * ("<name> failed", or a warning "<name> skipped: database unavailable") and only loses itself:
 * the next one takes the same rows again.
 */
export function startPeriodic(name: string, intervalMs: number, log: FastifyBaseLogger, pass: () => Promise<void>): Periodic {
  let running: Promise<void> | undefined;
  const run = () => {
    running ??= (async () => {
      try {
        await pass();
      } catch (err) {
        if (isStorageUnavailable(err)) log.warn({ err: { message: (err as Error).message } }, `${name} skipped: database unavailable`);
        else log.error({ err }, `${name} failed`);
      } finally {
        running = undefined;
      }
    })();
    return running;
  };
  const timer = setInterval(() => void run(), intervalMs);
  timer.unref();
  return {
    run,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
