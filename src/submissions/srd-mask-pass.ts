import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { keepRunningPass, passById } from '../db/maintenance-pass.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import type { Srd } from '../provider/schemas.js';
import { maskSrdText } from './stored-form.js';

/**
 * Its rows in maintenance_passes (migration 0024), one per table it reads by id. The names change
 * when the free-text rule (cpf.ts) comes to read a CPF it let through before, so that every stored
 * row is read once more under it. Migration 0015 masked srd text under the rule of its day (ASCII
 * digits apart by `.`, `-` or a space); since then the rule has come to read escapes, other scripts'
 * digits, groups 3-3-3-2 and invisible characters, and the door masks them, but what was stored
 * before each of those steps was never read again. `srd_cpfs_requests` and `srd_cpfs_events` read
 * them before escapes of other scripts' digits counted as digits (`&#1637;`, `%D9%A5`; 2026-11-29).
 */
export const SRD_MASK_PASSES = { requests: 'srd_cpfs_requests_2', events: 'srd_cpfs_events_2' } as const;
const BATCH = 2000;
/**
 * Whether an srd's address text may hold a CPF: every digit the free-text rule reads is an ASCII
 * digit, a character past ASCII, an escape written with ASCII digits (`%35`, `\u0035`, `&#53;`) or
 * an HTML reference (`&#xaea;`, Gujarati 4, holds none: its `&#` counts as one), so text with fewer
 * than 11 such characters holds none. Decided by the database, so that most rows' srd (an address
 * written with a few digits) is never sent here.
 */
const MAY_HOLD_CPF = (address: string) =>
  sql<boolean>`length(regexp_replace(replace((${sql.raw(address)})::text, '&#', '0'), '[\\x01-\\x2f\\x3a-\\x7f]+', '', 'g')) >= 11`;

/** Runs the pass now and hourly until it is over (db/maintenance-pass.ts). */
export function keepMaskingSrd(deps: {
  db: Kysely<Tables>;
  now: () => Date;
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>;
  signal: AbortSignal;
}): { settled: () => Promise<void> } {
  return keepRunningPass({
    run: (signal) => maskStoredSrd(deps.db, deps.now, signal),
    did: 'CPFs in srd text an earlier version stored are now masked',
    failed: 'could not mask the CPFs in srd text stored by an earlier version; the next run goes on',
    log: deps.log,
    signal: deps.signal,
  });
}

export interface SrdMaskPass {
  /** Rows rewritten in each table. */
  requests: number;
  events: number;
}

/**
 * Masks, as a submit now masks it before storing (submissions/stored-form.ts), the CPFs that srd's
 * text fields kept in clear in requests stored by an earlier version and in the copies their events
 * carry (`data.srd`). Every row ever, each table read once by id (db/maintenance-pass.ts,
 * passById). Undefined when both tables' passes are over.
 */
export async function maskStoredSrd(db: Kysely<Tables>, now: () => Date, signal: AbortSignal): Promise<SrdMaskPass | undefined> {
  const requests = await passById({
    db,
    name: SRD_MASK_PASSES.requests,
    now,
    signal,
    batch: BATCH,
    read: (through) =>
      db
        .selectFrom('underwriting_requests')
        .select(['id', sql<Srd | null>`case when ${MAY_HOLD_CPF("srd -> 'address'")} then srd end`.as('srd'), 'submitted_at as written_at'])
        .where('id', '>', through)
        .orderBy('id')
        .limit(BATCH)
        .execute(),
    rewrite: (rows) => rewriteChanged(rows, (changed) => rewriteRequests(db, changed)),
  });
  if (signal.aborted) return { requests: requests ?? 0, events: 0 };
  const events = await passById({
    db,
    name: SRD_MASK_PASSES.events,
    now,
    signal,
    batch: BATCH,
    read: (through) =>
      db
        .selectFrom('events')
        .select(['id', sql<Srd | null>`case when ${MAY_HOLD_CPF("data -> 'srd' -> 'address'")} then data -> 'srd' end`.as('srd'), 'created_at as written_at'])
        .where('id', '>', through)
        .orderBy('id')
        .limit(BATCH)
        .execute(),
    rewrite: (rows) => rewriteChanged(rows, (changed) => rewriteEvents(db, changed)),
  });
  if (requests === undefined && events === undefined) return undefined;
  return { requests: requests ?? 0, events: events ?? 0 };
}

interface Changed {
  id: number;
  /** The srd as read: a row whose srd changed since is left alone. */
  before: unknown;
  after: Srd;
}

/** The rows whose srd holds a CPF (the others, and those the database left out, as they are), written by `write`; how many were. */
async function rewriteChanged(rows: ReadonlyArray<{ id: number; srd: Srd | null }>, write: (changed: Changed[]) => Promise<number>): Promise<number> {
  const changed: Changed[] = [];
  for (const row of rows) {
    const masked = row.srd ? maskSrdText(row.srd) : row.srd;
    if (masked && masked !== row.srd) changed.push({ id: Number(row.id), before: row.srd, after: masked });
  }
  return changed.length === 0 ? 0 : write(changed);
}

// Both rewrites name the rows by primary key besides the join: a join alone was planned as a scan of
// every event while the table was tiny or never analysed (a hash join with the batch).
async function rewriteRequests(db: Kysely<Tables>, changed: readonly Changed[]): Promise<number> {
  const result = await sql`update underwriting_requests r set srd = v.after
    from (select unnest(${changed.map((c) => c.id)}::bigint[]) as id, unnest(${changed.map((c) => JSON.stringify(c.before))}::jsonb[]) as before,
                 unnest(${changed.map((c) => JSON.stringify(c.after))}::jsonb[]) as after) v
    where r.id = any(${changed.map((c) => c.id)}::bigint[]) and r.id = v.id and r.srd = v.before`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

async function rewriteEvents(db: Kysely<Tables>, changed: readonly Changed[]): Promise<number> {
  const result = await sql`update events e set data = jsonb_set(e.data, '{srd}', v.after)
    from (select unnest(${changed.map((c) => c.id)}::bigint[]) as id, unnest(${changed.map((c) => JSON.stringify(c.before))}::jsonb[]) as before,
                 unnest(${changed.map((c) => JSON.stringify(c.after))}::jsonb[]) as after) v
    where e.id = any(${changed.map((c) => c.id)}::bigint[]) and e.id = v.id and e.data -> 'srd' = v.before`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** The pass's statements as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'mask_stored_srd', run: (db) => maskStoredSrd(db, () => new Date(0), new AbortController().signal) },
  { name: 'mask_stored_srd_requests', run: (db) => rewriteRequests(db, [{ id: 1, before: {}, after: { grossIncome: 1 } }]) },
  { name: 'mask_stored_srd_events', run: (db) => rewriteEvents(db, [{ id: 1, before: {}, after: { grossIncome: 1 } }]) },
];
