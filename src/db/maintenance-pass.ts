import type { FastifyBaseLogger } from 'fastify';

/**
 * A finished pass goes on (at each start, and every PASS_EVERY_MS) for this long: an instance of the
 * version before still running during a rolling deploy writes rows the old way after the first new
 * instance's pass ended.
 */
export const PASS_GOES_ON_MS = 7 * 24 * 3600 * 1000;

/** How often an instance runs a pass again while it is not over. */
export const PASS_EVERY_MS = 3600_000;

/**
 * Runs a maintenance pass (migration 0024: work a new version does once over rows an earlier one
 * wrote) now and again every `everyMs` (unref'd: it never holds the process) until it is over (`run`
 * answers undefined) or `signal` aborts. What it did is logged when it did anything, a failure warned
 * about (the next run goes on). Returns what settles once the run in flight (if any) has ended:
 * closing awaits it after aborting, before the database closes under it. A run that fails because
 * the instance is closing is not warned about (its statement met a pool being closed).
 */
export function keepRunningPass<T extends object>(deps: {
  run: (signal: AbortSignal) => Promise<T | undefined>;
  /** The info line when a run did anything, and the warn line when one failed. */
  did: string;
  failed: string;
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>;
  signal: AbortSignal;
  everyMs?: number;
}): { settled: () => Promise<void> } {
  // One listener for every run (one per run would pile up: one an hour, for the pass's days).
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  deps.signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  const run = async (): Promise<void> => {
    try {
      const done = await deps.run(deps.signal);
      if (done === undefined) return;
      if (Object.values(done).some((n) => typeof n === 'number' && n > 0)) deps.log.info({ rewritten: done }, deps.did);
    } catch (err) {
      if (deps.signal.aborted) return;
      deps.log.warn({ err: { message: (err as Error).message } }, deps.failed);
    }
    if (deps.signal.aborted) return;
    timer = setTimeout(() => void (inFlight = run()), deps.everyMs ?? PASS_EVERY_MS);
    timer.unref();
  };
  inFlight = run();
  return { settled: () => inFlight };
}
