import type { Kysely } from 'kysely';
import { writtenAgainItemByItem } from '../db/group-commit.js';
import { CALLBACK_QUERY_TIMEOUT_MS } from '../db/handle.js';
import { runStatement } from '../db/run-statement.js';
import { defineStatement } from '../db/statements.js';
import type { Decision, Tables } from '../db/types.js';
import type { DeliveryHandoff } from '../events/handoff.js';
import { EVENT_TYPE, recordEventsSql, requestDataSql, unmatchedDataSql } from '../events/record.js';
import { batchSpanParent, begunParent, endedStatementSpan, originTraceparent, type SpanOrigin, whenBegun } from '../tracing/spans.js';

/** What is known about any callback the moment it arrives. */
export interface Arrival {
  receivedAt: Date;
  peer: string | null;
  /** The bytes received, as stored: every CPF in them masked (callbacks/kept-body.ts). */
  rawBody: Buffer;
  /** The keyed hashes of the CPFs masked in rawBody (none: undefined or empty); kept on a callback that completes no request. */
  cpfHashes?: readonly string[] | undefined;
  /** The callback's X-Request-Id: an unmatched callback's event carries it. */
  requestId?: string | undefined;
  /**
   * The callback's server span (tracing on); one that begins late (no traceparent came) is begun by
   * the statement that stores the callback: the child of the submit it completes, else a root.
   */
  trace?: SpanOrigin | undefined;
}

export interface ValidResult extends Arrival {
  customerUuid: string;
  /** ISO 8601 with a zone, as sent: PostgreSQL keeps microseconds a JS Date would drop. */
  started: string;
  finished: string;
  /** The body as jsonb text. */
  body: string;
  decision: Decision;
}

/** What recording one valid result came to: it completed a request, was stored unmatched, or was already stored. */
export type Recorded =
  | {
      disposition: 'matched';
      callbackId: number;
      requestId: number;
      submittedAt: Date;
      decision: Decision;
      /** Where the submit's trace continues (null when it was stored with tracing off). */
      submitTraceparent: string | null;
    }
  | { disposition: 'unmatched'; callbackId: number }
  | { disposition: 'duplicate' };

interface RecordedRow {
  n: number;
  id: number;
  request_id: number | null;
  submitted_at: Date | string | null;
  submit_traceparent: string | null;
}

/** What the callback statement needs besides the batch. */
export interface RecordOptions {
  /** CORRELATION_SKEW_S: a request qualifies when submitted no later than `started` plus this. */
  skewS: number;
  /** This instance's pushing (when it pushes): told once the batch's events are committed. */
  handoff?: DeliveryHandoff | undefined;
}

/**
 * Stores valid results, deduplicates and correlates them in ONE statement (one plan and one commit
 * for the whole batch, atomic): for each result, lock the newest request of its customer
 * still without a result and submitted no later than its `started` plus the skew, insert the
 * callback unless the same (customerUuid, started, finished) is already stored, complete the
 * request from what was inserted, and record the outcome event (completed or unmatched; the
 * delivery worker writes its deliveries afterwards, off this statement). Concurrent copies queue
 * on the request's row lock or on the unique index; exactly one inserts. A batch holds at most one result per customer, sorted by customer, so two
 * batches lock rows in the same order.
 * (The NOTIFY is sent after the commit, by the announcer: see channels/announcer.ts for why.)
 */
export const RECORD_RESULTS = defineStatement('record_results', `
    with input as (
      select * from json_to_recordset($1::json) as i(
        n int, customer_uuid text, received_at timestamptz, peer text, raw_body text, cpf_hashes text[],
        started timestamptz, finished timestamptz, body jsonb, decision text, x_request_id text, traceparent text)
    ),
    target as materialized (
      select i.n, t.id
      from input i
      cross join lateral (
        select r.id from underwriting_requests r
        where r.customer_uuid = i.customer_uuid and r.result_callback_id is null
          -- A late result of an older request never completes one submitted after its pipeline
          -- started. Served by underwriting_requests_awaiting_result: a customer's few entries,
          -- never a range of all requests submitted before started (docs/performance.md).
          and r.submitted_at <= i.started + make_interval(secs => $2::double precision)
          -- Never sent (still queued, or cancelled): no result can be its.
          and r.status not in ('queued', 'cancelled')
        order by r.id desc
        limit 1
        for update
      ) t
    ),
    inserted as (
      insert into callbacks
        (received_at, peer, raw_body, cpf_hashes, outcome, customer_uuid, started, finished, body, decision, request_id)
      select i.received_at, i.peer, decode(i.raw_body, 'base64'),
             -- A request's result is found through its request; the hashes find the others (migration 0026).
             case when t.id is null then i.cpf_hashes end,
             case when t.id is null then 'unmatched' else 'matched' end,
             i.customer_uuid, i.started, i.finished, i.body, i.decision, t.id
      from input i left join target t on t.n = i.n
      order by i.n
      on conflict (customer_uuid, started, finished) do nothing
      returning id, customer_uuid, request_id, received_at, decision, body
    ),
    completed as (
      update underwriting_requests r
      set status = 'completed', completed_at = x.received_at, updated_at = x.received_at,
          result_callback_id = x.id, decision = x.decision
      from inserted x
      -- The = any(array) is what the planner looks up by primary key; the join alone would
      -- (with json_to_recordset's guess of 100 rows) scan a table of tens of thousands.
      where r.id = any (array(select request_id from inserted where request_id is not null))
        and r.id = x.request_id
      returning r.id, r.submitted_at, r.customer_uuid, r.status, r.decision, r.cpf_masked,
                r.cost_saving_enabled, r.srd, r.completed_at, r.upstream_status, x.id as callback_id, x.body,
                r.traceparent, r.x_request_id
    ),
    event_source as (
      select '${EVENT_TYPE.completed}' as type, c.customer_uuid, c.completed_at as created_at,
             c.id as request_id, c.callback_id, ${requestDataSql('c', 'c.body')} as data,
             c.traceparent, c.x_request_id
      from completed c
      union all
      -- An unmatched callback's event carries the callback's own trace and request id.
      select '${EVENT_TYPE.unmatched}', x.customer_uuid, x.received_at, null::bigint, x.id, ${unmatchedDataSql('x')},
             i.traceparent, i.x_request_id
      from inserted x join input i on i.customer_uuid = x.customer_uuid where x.request_id is null
    ),
    ${recordEventsSql('event_source', { origin: true })}
    select i.n, x.id, x.request_id, c.submitted_at, c.traceparent as submit_traceparent
    from inserted x
    join input i on i.customer_uuid = x.customer_uuid
    left join completed c on c.id = x.request_id`);

/** The parameters of RECORD_RESULTS for one batch (already in the order it is written). */
export function recordResultsParameters(batch: readonly ValidResult[], options: Pick<RecordOptions, 'skewS'>): unknown[] {
  return [batchJson(batch), options.skewS];
}

/**
 * Records a batch of valid results, at most one per customer; answers in the batch's order.
 * Any failure fails the whole batch: nothing of it is stored.
 */
export async function recordResults(db: Kysely<Tables>, batch: readonly ValidResult[], options: RecordOptions): Promise<Recorded[]> {
  const ordered = batch.map((cb, index) => ({ cb, index })).sort((a, b) => (a.cb.customerUuid < b.cb.customerUuid ? -1 : 1));
  const customers = new Set(batch.map((cb) => cb.customerUuid));
  if (customers.size !== batch.length) throw new Error('a batch of results holds at most one per customer');
  // A prepared statement: parsed and planned once per connection (STATEMENT_PLANNED_ONCE: every
  // lookup by index, whatever the statistics were when it was planned), and so is the one foreign-key
  // check left on it, its event's callback (migration 0027 dropped the request's three: the request
  // it completes is locked by it, the rows that name it are its own).
  // Its span is made once it has run: the callbacks' spans begin only then, each as a child of the
  // submit it completed; it is a child of the first traced one, linked to the others' (one
  // statement stores them all).
  const startTime = batch.some((cb) => cb.trace) ? performance.now() : 0;
  let rows: RecordedRow[];
  try {
    rows = await runStatement<RecordedRow>(db, RECORD_RESULTS, recordResultsParameters(ordered.map((o) => o.cb), options), undefined, undefined, {
      queryTimeoutMs: CALLBACK_QUERY_TIMEOUT_MS,
      plannedOnce: true,
    });
  } catch (err) {
    // No late span begins here: the failure is told under a callback's span once that has begun.
    // A batch written again item by item (db/group-commit.ts) tells it under the first traced
    // callback's (each callback's own attempt follows, under its span); one that fails as a whole
    // (the database out of reach) under every traced callback's, whose answer it decided.
    const traced = batch.flatMap((cb) => (cb.trace ? [cb.trace] : []));
    const told = writtenAgainItemByItem(err, batch.length) ? traced.slice(0, 1) : traced;
    const times = { startTime, endTime: performance.now() };
    for (const origin of told) whenBegun(origin, (parent) => endedStatementSpan(parent, RECORD_RESULTS, undefined, times, { err }));
    throw err;
  }
  const recorded: Recorded[] = batch.map(() => ({ disposition: 'duplicate' }));
  for (const row of rows) {
    const { cb, index } = ordered[row.n]!;
    recorded[index] =
      row.request_id === null || row.submitted_at === null
        ? { disposition: 'unmatched', callbackId: row.id }
        : {
            disposition: 'matched',
            callbackId: row.id,
            requestId: row.request_id,
            submittedAt: new Date(row.submitted_at),
            decision: cb.decision,
            submitTraceparent: row.submit_traceparent,
          };
  }
  if (startTime !== 0) {
    const { parent, links } = batchSpanParent(
      batch.map((cb, i) => {
        const r = recorded[i]!;
        return begunParent(cb.trace, r.disposition === 'matched' ? r.submitTraceparent : null);
      }),
    );
    if (parent) endedStatementSpan(parent, RECORD_RESULTS, links, { startTime, endTime: performance.now() });
  }
  // Every stored callback recorded an event (completed or unmatched).
  if (rows.length > 0) options.handoff?.committed();
  return recorded;
}

/**
 * The batch as one JSON array for json_to_recordset. Each body is already JSON text (from
 * JSON.stringify) and goes in as it is, not re-escaped as a string; raw bytes go in as base64.
 */
export function batchJson(batch: readonly ValidResult[]): string {
  const rows = batch.map(
    (cb, n) =>
      `{"n":${n},"customer_uuid":${JSON.stringify(cb.customerUuid)},"received_at":"${cb.receivedAt.toISOString()}",` +
      `"peer":${JSON.stringify(cb.peer)},"raw_body":"${cb.rawBody.toString('base64')}",` +
      `"cpf_hashes":${cb.cpfHashes?.length ? JSON.stringify(cb.cpfHashes) : 'null'},` +
      `"started":${JSON.stringify(cb.started)},"finished":${JSON.stringify(cb.finished)},` +
      `"body":${cb.body},"decision":${JSON.stringify(cb.decision)},` +
      `"x_request_id":${JSON.stringify(cb.requestId ?? null)},"traceparent":${JSON.stringify(originTraceparent(cb.trace))}}`,
  );
  return `[${rows.join(',')}]`;
}
