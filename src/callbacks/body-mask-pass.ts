import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { findAndMaskCpfs } from '../cpf.js';
import { keepRunningPass, passById } from '../db/maintenance-pass.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { keptBody } from './kept-body.js';

/**
 * Its row in maintenance_passes (migration 0024). The name changes when the free-text rule
 * (cpf.ts) comes to read a CPF it let through before, so that every stored row is read once more
 * under it: `callback_body_cpfs` read them under the rule before invisible format characters
 * counted as separators (2026-11-28), `callback_body_cpfs_2` before escapes of other scripts'
 * digits counted as digits (`&#1637;`, `%D9%A5`; 2026-11-29), `callback_body_cpfs_3` before
 * JavaScript code point escapes (`\u{665}`) and HTML references without their `;` (`&#53`) did
 * (2026-12-03), `callback_body_cpfs_4` before Python's `\U0001d7d3`, JavaScript's `escape()`
 * (`%u0665`, `%uD835%uDFD3`) and code point escapes of surrogate halves (`\u{d835}\u{dfd3}`) did
 * (2026-12-03, later).
 */
export const BODY_MASK_PASS = 'callback_body_cpfs_5';
const BATCH = 500;

/** Runs the pass now and hourly until it is over (db/maintenance-pass.ts). */
export function keepMaskingBodies(deps: {
  db: Kysely<Tables>;
  cpfHash: (cpf: string) => string | readonly string[];
  now: () => Date;
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>;
  signal: AbortSignal;
}): { settled: () => Promise<void> } {
  return keepRunningPass({
    run: (signal) => maskStoredBodies(deps.db, deps.cpfHash, deps.now, signal),
    did: 'CPFs in callbacks an earlier version stored are now masked',
    failed: 'could not mask the CPFs in callbacks stored by an earlier version; the next run goes on',
    log: deps.log,
    signal: deps.signal,
  });
}

interface StoredBody {
  id: number;
  raw_body: Uint8Array;
  body: unknown;
  request_id: number | null;
  cpf_hashes: string[] | null;
}

/**
 * Masks the CPFs in callbacks that a version before 0026 stored in clear (their bytes, an invalid
 * one's jsonb copy), as the callback route now does before storing (callbacks/kept-body.ts), and
 * keeps their hashes under every CPF_HASH_KEY on those that complete no request. Every row ever,
 * read once by id (db/maintenance-pass.ts, passById). Undefined when the pass is over.
 */
export async function maskStoredBodies(
  db: Kysely<Tables>,
  cpfHash: (cpf: string) => string | readonly string[],
  now: () => Date,
  signal: AbortSignal,
): Promise<{ callbacks: number } | undefined> {
  const callbacks = await passById({
    db,
    name: BODY_MASK_PASS,
    now,
    signal,
    batch: BATCH,
    read: (through) =>
      db
        .selectFrom('callbacks')
        .select(['id', 'raw_body', 'body', 'request_id', 'cpf_hashes', 'received_at as written_at'])
        .where('id', '>', through)
        .orderBy('id')
        .limit(BATCH)
        .execute() as Promise<Array<StoredBody & { written_at: Date }>>,
    rewrite: async (rows) => {
      let rewritten = 0;
      for (const row of rows) if (await maskOne(db, row, cpfHash)) rewritten += 1;
      return rewritten;
    },
  });
  return callbacks === undefined ? undefined : { callbacks };
}

/** One callback masked in place, when its bytes or its jsonb copy held a CPF; true when it was rewritten. */
async function maskOne(db: Kysely<Tables>, row: StoredBody, cpfHash: (cpf: string) => string | readonly string[]): Promise<boolean> {
  const kept = keptBody(Buffer.from(row.raw_body));
  const json = row.body === null ? null : JSON.stringify(row.body);
  const maskedJson = json === null ? { text: null, cpfs: [] } : findAndMaskCpfs(json);
  const cpfs = [...new Set([...kept.cpfs, ...maskedJson.cpfs])];
  if (cpfs.length === 0) return false;
  // A CPF written as a number in the copy leaves no JSON once masked: the copy goes (the bytes stay, masked).
  let body: string | null = maskedJson.cpfs.length === 0 ? json : null;
  if (maskedJson.cpfs.length > 0) {
    try {
      body = JSON.stringify(JSON.parse(maskedJson.text!));
    } catch {
      body = null;
    }
  }
  const hashes = row.request_id === null ? [...new Set([...(row.cpf_hashes ?? []), ...cpfs.flatMap((cpf) => cpfHash(cpf))])] : row.cpf_hashes;
  // The row as read (its bytes unchanged since): a row erased or rewritten meanwhile is left alone.
  const result = await sql`update callbacks set raw_body = ${kept.bytes}, body = ${body}::jsonb, cpf_hashes = ${hashes}::text[]
    where id = ${row.id} and raw_body = ${Buffer.from(row.raw_body)}`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** The pass's statements as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'mask_stored_bodies', run: (db) => maskStoredBodies(db, (cpf) => cpf, () => new Date(0), new AbortController().signal) },
  {
    name: 'mask_stored_body',
    run: (db) => maskOne(db, { id: 1, raw_body: Buffer.from('52998224725'), body: null, request_id: null, cpf_hashes: null }, (cpf) => `h(${cpf.length})`),
  },
];
