import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { keepRunningPass, PASS_GOES_ON_MS } from '../db/maintenance-pass.js';
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
 * before each of those steps was never read again.
 */
export const SRD_MASK_PASSES = { requests: 'srd_cpfs_requests', events: 'srd_cpfs_events' } as const;
const BATCH = 2000;
/**
 * Whether an srd's address text may hold a CPF: every digit the free-text rule reads is an ASCII
 * digit, a character past ASCII or an escape written with ASCII digits (`%35`, `\u0035`, `&#53;`),
 * so text with fewer than 11 characters that are ASCII digits or past ASCII holds none. Decided by
 * the database, so that most rows' srd (an address written with a few digits) is never sent here.
 */
const MAY_HOLD_CPF = (address: string) =>
  sql<boolean>`length(regexp_replace((${sql.raw(address)})::text, '[\\x01-\\x2f\\x3a-\\x7f]+', '', 'g')) >= 11`;
/** A row written longer ago than this is committed or never will be (statements time out in seconds). */
const SETTLED_MS = 60_000;

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
 * carry (`data.srd`). Every row ever, read once by id: each table's pass records how far it got, and
 * a later start goes on from there (rows an instance of the version before writes during a rolling
 * deploy; one written less than SETTLED_MS ago is masked but not counted as read, since ids are taken
 * before commit). Undefined when both are over (finished more than PASS_GOES_ON_MS ago). Stops
 * between batches once `signal` aborts.
 */
export async function maskStoredSrd(db: Kysely<Tables>, now: () => Date, signal: AbortSignal): Promise<SrdMaskPass | undefined> {
  const requests = await passOver(db, now, signal, SRD_MASK_PASSES.requests, async (through) => {
    const rows = await db
      .selectFrom('underwriting_requests')
      .select(['id', sql<Srd | null>`case when ${MAY_HOLD_CPF("srd -> 'address'")} then srd end`.as('srd'), 'submitted_at as written_at'])
      .where('id', '>', through)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    return { rows, rewrite: (changed) => rewriteRequests(db, changed) };
  });
  if (signal.aborted) return { requests: requests ?? 0, events: 0 };
  const events = await passOver(db, now, signal, SRD_MASK_PASSES.events, async (through) => {
    const rows = await db
      .selectFrom('events')
      .select(['id', sql<Srd | null>`case when ${MAY_HOLD_CPF("data -> 'srd' -> 'address'")} then data -> 'srd' end`.as('srd'), 'created_at as written_at'])
      .where('id', '>', through)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    return { rows, rewrite: (changed) => rewriteEvents(db, changed) };
  });
  if (requests === undefined && events === undefined) return undefined;
  return { requests: requests ?? 0, events: events ?? 0 };
}

interface Read {
  rows: Array<{ id: number; srd: unknown; written_at: Date }>;
  /** Writes the rows whose srd changed (their new srd, as read before: a row changed meanwhile is left alone); how many were. */
  rewrite: (changed: Array<{ id: number; before: unknown; after: Srd }>) => Promise<number>;
}

/** One table's pass: the rows after `through_id`, in batches; how many were rewritten, or undefined when it is over. */
async function passOver(db: Kysely<Tables>, now: () => Date, signal: AbortSignal, name: string, read: (through: number) => Promise<Read>): Promise<number | undefined> {
  await db.insertInto('maintenance_passes').values({ name }).onConflict((oc) => oc.column('name').doNothing()).execute();
  const pass = await db.selectFrom('maintenance_passes').select(['through_id', 'finished_at']).where('name', '=', name).executeTakeFirst();
  if (pass?.finished_at && now().getTime() - pass.finished_at.getTime() > PASS_GOES_ON_MS) return undefined;
  let rewritten = 0;
  let through = Number(pass?.through_id ?? 0);
  for (;;) {
    if (signal.aborted) return rewritten;
    const { rows, rewrite } = await read(through);
    if (rows.length === 0) break;
    const changed: Array<{ id: number; before: unknown; after: Srd }> = [];
    for (const row of rows) {
      const srd = row.srd as Srd | null;
      const masked = srd ? maskSrdText(srd) : srd;
      if (masked && masked !== srd) changed.push({ id: Number(row.id), before: srd, after: masked });
    }
    if (changed.length > 0) rewritten += await rewrite(changed);
    const settled = now().getTime() - SETTLED_MS;
    const young = rows.findIndex((r) => new Date(r.written_at).getTime() > settled);
    const passed = young === -1 ? rows : rows.slice(0, young);
    if (passed.length > 0) {
      through = Number(passed[passed.length - 1]!.id);
      await db.updateTable('maintenance_passes').set({ through_id: through }).where('name', '=', name).execute();
    }
    if (young !== -1 || rows.length < BATCH) break;
  }
  await sql`update maintenance_passes set finished_at = coalesce(finished_at, ${now()}) where name = ${name}`.execute(db);
  return rewritten;
}

async function rewriteRequests(db: Kysely<Tables>, changed: Array<{ id: number; before: unknown; after: Srd }>): Promise<number> {
  const result = await sql`update underwriting_requests r set srd = v.after
    from (select unnest(${changed.map((c) => c.id)}::bigint[]) as id, unnest(${changed.map((c) => JSON.stringify(c.before))}::jsonb[]) as before,
                 unnest(${changed.map((c) => JSON.stringify(c.after))}::jsonb[]) as after) v
    where r.id = v.id and r.srd = v.before`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

async function rewriteEvents(db: Kysely<Tables>, changed: Array<{ id: number; before: unknown; after: Srd }>): Promise<number> {
  const result = await sql`update events e set data = jsonb_set(e.data, '{srd}', v.after)
    from (select unnest(${changed.map((c) => c.id)}::bigint[]) as id, unnest(${changed.map((c) => JSON.stringify(c.before))}::jsonb[]) as before,
                 unnest(${changed.map((c) => JSON.stringify(c.after))}::jsonb[]) as after) v
    where e.id = v.id and e.data -> 'srd' = v.before`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** The pass's statements as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'mask_stored_srd', run: (db) => maskStoredSrd(db, () => new Date(0), new AbortController().signal) },
  { name: 'mask_stored_srd_requests', run: (db) => rewriteRequests(db, [{ id: 1, before: {}, after: { grossIncome: 1 } }]) },
  { name: 'mask_stored_srd_events', run: (db) => rewriteEvents(db, [{ id: 1, before: {}, after: { grossIncome: 1 } }]) },
];
