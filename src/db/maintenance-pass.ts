import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import type { Tables } from './types.js';

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

/**
 * A row written longer ago than this is committed or never will be (statements time out in
 * seconds): ids are taken before commit, so a row an instance of the version before wrote a moment
 * ago may commit, with a lower id, after a later one was read.
 */
export const SETTLED_MS = 60_000;

/**
 * One run of a pass that reads a table once by id, every row ever (migration 0024's through_id: how
 * far it got; a later start goes on from there, for the rows an instance of the version before
 * writes during a rolling deploy). `read` gives the rows after an id, in order, at most `batch`;
 * `rewrite` does what they need and says how many it rewrote. A row written less than SETTLED_MS
 * ago is rewritten but not counted as read: the next run reads it again. How many were rewritten,
 * or undefined when the pass is over (finished more than PASS_GOES_ON_MS ago). Stops between
 * batches once `signal` aborts.
 */
export async function passById<Row extends { id: number | string; written_at: Date | string }>(deps: {
  db: Kysely<Tables>;
  name: string;
  now: () => Date;
  signal: AbortSignal;
  batch: number;
  read: (through: number) => Promise<Row[]>;
  rewrite: (rows: Row[]) => Promise<number>;
}): Promise<number | undefined> {
  const { db, name, now } = deps;
  await db.insertInto('maintenance_passes').values({ name }).onConflict((oc) => oc.column('name').doNothing()).execute();
  const pass = await db.selectFrom('maintenance_passes').select(['through_id', 'finished_at']).where('name', '=', name).executeTakeFirst();
  if (pass?.finished_at && now().getTime() - pass.finished_at.getTime() > PASS_GOES_ON_MS) return undefined;
  let rewritten = 0;
  let through = Number(pass?.through_id ?? 0);
  for (;;) {
    if (deps.signal.aborted) return rewritten;
    const rows = await deps.read(through);
    if (rows.length === 0) break;
    rewritten += await deps.rewrite(rows);
    const settled = now().getTime() - SETTLED_MS;
    const young = rows.findIndex((r) => new Date(r.written_at).getTime() > settled);
    const passed = young === -1 ? rows : rows.slice(0, young);
    if (passed.length > 0) {
      through = Number(passed[passed.length - 1]!.id);
      await db.updateTable('maintenance_passes').set({ through_id: through }).where('name', '=', name).execute();
    }
    if (young !== -1 || rows.length < deps.batch) break;
  }
  await sql`update maintenance_passes set finished_at = coalesce(finished_at, ${now()}) where name = ${name}`.execute(db);
  return rewritten;
}
