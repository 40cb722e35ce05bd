import { type Kysely, sql } from 'kysely';
import { runStatement } from '../db/run-statement.js';
import { defineStatement } from '../db/statements.js';
import { inIndexOrder } from '../db/plan-guards.js';
import { compileOnly, type SqlSnapshot } from '../db/statements.js';
import type { Decision, RequestStatus, Tables } from '../db/types.js';
import type { Position } from '../http/cursor.js';
import { selectRequestsWithResult } from '../requests/read.js';
import type { RequestView } from '../requests/schemas.js';
import type { CustomerView, UnmatchedView } from './schemas.js';
import { buildRequestView, buildResult, type Json, type RequestRow } from './views.js';

/** One customer's answer carries at most this many older requests and unmatched callbacks. */
export const HISTORY_LIMIT = 100;
export const UNMATCHED_LIMIT = 100;

/** submitted_at as UTC text with microseconds: a JS Date would drop them and break keyset paging. */
const POSITION_T = sql<string>`to_char(r.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

interface CustomerRow extends Omit<RequestRow, 'customer_uuid' | 'submitted_at'> {
  /** The customer's place in the batch read (1-based). */
  n: number;
  kind: 'request' | 'unmatched';
  id: number;
  customer_uuid: string | null;
  submitted_at: Date | null;
  received_at: Date | null;
}

/**
 * Everything about some customers in one round trip: for each, its requests (newest first, via the
 * customer index) and its unmatched callbacks (via callbacks_unmatched), each customer's read on its
 * own (lateral, by index: never a join over every customer's rows). Rows carry the customer's place
 * in `customers` (n, from 1).
 */
export function customerQuery(customers: readonly string[]) {
  return sql<CustomerRow>`
    select k.n::int as n, x.*
      from unnest(${customers}::text[]) with ordinality as k(customer_uuid, n)
     cross join lateral (
      (select 'request' as kind, r.id, r.customer_uuid, r.status, r.decision, r.cpf_masked,
              r.cost_saving_enabled, r.srd, r.submitted_at, r.completed_at, r.upstream_status,
              -- Per request, by primary key: a join let the planner, without statistics, hash
              -- every callback stored to find a customer's few results.
              (select c.body from callbacks c where c.id = r.result_callback_id) as result,
              null::timestamptz as received_at
         from underwriting_requests r
        where r.customer_uuid = k.customer_uuid
        order by r.id desc
        limit ${HISTORY_LIMIT + 1})
      union all
      (select 'unmatched', u.id, null::text, null::text, null::text, null::text,
              null::boolean, null::jsonb, null::timestamptz, null::timestamptz, null::integer,
              u.body, u.received_at
         from callbacks u
        where u.customer_uuid = k.customer_uuid and u.outcome = 'unmatched'
        order by u.id desc
        limit ${UNMATCHED_LIMIT})
     ) x`;
}

/** customerQuery as a prepared statement: its UNION ALL took longer to plan than to run. */
const READ_CUSTOMER = defineStatement('read_customer', customerQuery([]).compile(compileOnly).sql);

/**
 * Reads customers in one statement (the GETs that arrive together: queries/service.ts), each
 * answered in the order asked; undefined for one with no request.
 */
export async function readCustomers(db: Kysely<Tables>, customers: readonly string[]): Promise<Array<CustomerView | undefined>> {
  // customerQuery's parameters, in its order.
  const rows = await runStatement<CustomerRow>(db, READ_CUSTOMER, [customers, HISTORY_LIMIT + 1, UNMATCHED_LIMIT]);
  const byCustomer = customers.map((): CustomerRow[] => []);
  for (const row of rows) byCustomer[Number(row.n) - 1]!.push(row);
  return byCustomer.map(customerView);
}

const byNewest = (a: CustomerRow, b: CustomerRow) => b.id - a.id;

function customerView(rows: CustomerRow[]): CustomerView | undefined {
  const requests = rows.filter((r) => r.kind === 'request').sort(byNewest);
  const [newest, ...older] = requests.map((r) => buildRequestView(r as RequestRow));
  if (!newest) return undefined;
  const unmatched: UnmatchedView[] = rows
    .filter((r) => r.kind === 'unmatched')
    .sort(byNewest)
    .map((r) => ({
      receivedAt: (r.received_at as Date).toISOString(),
      result: buildResult(r.result as Json),
    }));
  return { ...newest, history: older, unmatched };
}

export interface ListFilter {
  status?: RequestStatus | undefined;
  decision?: Decision | undefined;
  /** Inclusive lower bound on submitted_at. */
  since?: string | undefined;
  /** Exclusive upper bound on submitted_at. */
  until?: string | undefined;
  /** The CPF's hash under every configured key: rows hashed under an older key match too. */
  cpfHashes?: string[] | undefined;
}

/**
 * One page, newest first, by keyset: (submitted_at, id) strictly after the cursor position. Each
 * filter has an index that yields this order directly (list, status_list, decision_list, cpf_list).
 *
 * In the list (no CPF), a status or decision filter is `= any(array[...])` and leads the order:
 * written as `=`, it made the column a constant the planner dropped from the order, and it walked
 * underwriting_requests_list newest first, filtering, whenever it believed the value common (a
 * page of completed requests behind a campaign still waiting read every waiting row). Leading the
 * order, only the filter's own index yields it. readPage forbids sorting (every page, lookups too),
 * which without statistics read every match through a bitmap (or ANDed with the list's) and sorted
 * (docs/performance.md).
 */
export function listInIndexOrder(filter: ListFilter): boolean {
  return filter.cpfHashes === undefined;
}

export function pageQuery(db: Kysely<Tables>, filter: ListFilter, after: Position | undefined, limit: number) {
  const leading = !listInIndexOrder(filter) ? undefined : filter.status !== undefined ? 'status' : filter.decision !== undefined ? 'decision' : undefined;
  return selectRequestsWithResult(db)
    .select(POSITION_T.as('position_t'))
    .$if(filter.status !== undefined, (q) =>
      leading === 'status' ? q.where(sql<boolean>`r.status = any(${[filter.status!]}::text[])`) : q.where('r.status', '=', filter.status!),
    )
    .$if(filter.decision !== undefined, (q) =>
      leading === 'decision' ? q.where(sql<boolean>`r.decision = any(${[filter.decision!]}::text[])`) : q.where('r.decision', '=', filter.decision!),
    )
    .$if(filter.cpfHashes !== undefined, (q) =>
      // One key (no rotation under way) keeps the plain equality the cpf_list index serves in order.
      filter.cpfHashes!.length === 1 ? q.where('r.cpf_hash', '=', filter.cpfHashes![0]!) : q.where('r.cpf_hash', 'in', filter.cpfHashes!),
    )
    .$if(filter.since !== undefined, (q) => q.where(sql<boolean>`r.submitted_at >= ${filter.since}::timestamptz`))
    .$if(filter.until !== undefined, (q) => q.where(sql<boolean>`r.submitted_at < ${filter.until}::timestamptz`))
    .$if(after !== undefined, (q) =>
      q.where(sql<boolean>`(r.submitted_at, r.id) < (${after!.t}::timestamptz, ${after!.id}::bigint)`),
    )
    .$if(leading !== undefined, (q) => q.orderBy(`r.${leading!}`))
    .orderBy('r.submitted_at', 'desc')
    .orderBy('r.id', 'desc')
    .limit(limit + 1);
}

export interface Page {
  items: RequestView[];
  /** Where the next page starts; undefined on the last page. */
  next: Position | undefined;
}

export async function readPage(
  db: Kysely<Tables>,
  filter: ListFilter,
  after: Position | undefined,
  limit: number,
): Promise<Page> {
  // One row more than asked tells whether another page exists, without a count.
  const read = (f: ListFilter) => inIndexOrder(db, (q) => pageQuery(q, f, after, limit).execute());
  // Under several keys (a rotation), a page per key merged: `cpf_hash in (...)` needs a sort, and the
  // planner, unable to read cpf_list in order, walked the whole list filtering (docs/performance.md).
  const keys = filter.cpfHashes ?? [];
  const rows =
    keys.length > 1
      ? (await Promise.all(keys.map((key) => read({ ...filter, cpfHashes: [key] }))))
          .flat()
          .sort((a, b) => (a.position_t === b.position_t ? b.id - a.id : a.position_t < b.position_t ? 1 : -1))
          .slice(0, limit + 1)
      : await read(filter);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map((r) => buildRequestView(r as RequestRow)),
    next: rows.length > limit && last ? { t: last.position_t, id: last.id } : undefined,
  };
}

/** The page query as `npm run sql:snapshot` writes it (docs/layout.md): unfiltered, and with every filter. */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'read_page', run: (db) => readPage(db, {}, undefined, 50) },
  {
    name: 'read_page_filtered',
    run: (db) =>
      readPage(
        db,
        { status: 'completed', decision: 'approved', since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z', cpfHashes: ['h1', 'h2'] },
        { t: '2026-01-01T12:00:00.000000Z', id: 1 },
        50,
      ),
  },
];
