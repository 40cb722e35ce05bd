import { type Kysely, sql } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { StrayCallbackKind, Tables } from '../db/types.js';
import type { Position } from '../http/cursor.js';
import { maskCpfLike } from './mask.js';
import type { StrayCallbackView } from './schemas.js';

interface StrayRow {
  id: number;
  customer_uuid: string | null;
  received_at: Date;
  /** The callback's kind (the column callbacks.outcome). */
  outcome: StrayCallbackKind;
  error: string | null;
  raw_body: Uint8Array;
  position_t: string;
}

export interface StrayFilter {
  /** Unset: both kinds. */
  kind?: StrayCallbackKind | undefined;
  /** Inclusive lower bound on received_at. */
  since?: string | undefined;
}

/** One kind's newest-first page, by keyset on (received_at, id) through callbacks_stray. */
function strayKindQuery(kind: StrayCallbackKind, filter: StrayFilter, after: Position | undefined, limit: number) {
  return sql<StrayRow>`
    select c.id, c.customer_uuid, c.received_at, c.outcome, c.error, c.raw_body,
           to_char(c.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_t
      from callbacks c
     where c.outcome = ${kind}
       ${filter.since === undefined ? sql`` : sql`and c.received_at >= ${filter.since}::timestamptz`}
       ${after === undefined ? sql`` : sql`and (c.received_at, c.id) < (${after.t}::timestamptz, ${after.id}::bigint)`}
     order by c.received_at desc, c.id desc
     limit ${limit}`;
}

export function strayPageQuery(filter: StrayFilter, after: Position | undefined, limit: number) {
  if (filter.kind !== undefined) return strayKindQuery(filter.kind, filter, after, limit + 1);
  // Both kinds: each read in index order, then merged.
  return sql<StrayRow>`
    select * from (
      (${strayKindQuery('unmatched', filter, after, limit + 1)})
      union all
      (${strayKindQuery('invalid', filter, after, limit + 1)})
    ) s
    order by s.received_at desc, s.id desc
    limit ${limit + 1}`;
}

export interface StrayPage {
  items: StrayCallbackView[];
  next: Position | undefined;
}

/** The raw bytes as UTF-8 text (bad sequences become U+FFFD), CPF-like digit runs masked. */
export function rawBodyView(bytes: Uint8Array): string {
  return maskCpfLike(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
}

export async function readStrayPage(db: Kysely<Tables>, filter: StrayFilter, after: Position | undefined, limit: number): Promise<StrayPage> {
  const { rows } = await strayPageQuery(filter, after, limit).execute(db);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map((r) => ({
      id: Number(r.id),
      customerUuid: r.customer_uuid,
      receivedAt: r.received_at.toISOString(),
      kind: r.outcome,
      problem: r.outcome === 'invalid' ? (r.error ?? 'invalid') : null,
      rawBody: rawBodyView(r.raw_body),
    })),
    next: rows.length > limit && last ? { t: last.position_t, id: Number(last.id) } : undefined,
  };
}

const AFTER: Position = { t: '2026-01-01T12:00:00.000000Z', id: 1 };

/** The stray callbacks' page as `npm run sql:snapshot` writes it (docs/layout.md): both kinds and one, unfiltered and filtered. */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'read_stray_page', run: (db) => readStrayPage(db, {}, undefined, 50) },
  { name: 'read_stray_page_filtered', run: (db) => readStrayPage(db, { since: '2026-01-01T00:00:00Z' }, AFTER, 50) },
  { name: 'read_stray_page_of_kind', run: (db) => readStrayPage(db, { kind: 'invalid' }, undefined, 50) },
  { name: 'read_stray_page_of_kind_filtered', run: (db) => readStrayPage(db, { kind: 'invalid', since: '2026-01-01T00:00:00Z' }, AFTER, 50) },
];
