import type { ColumnType, Generated, Selectable } from 'kysely';

/** Written as a Date or ISO string, read back as a Date on both engines. */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type DefaultedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** jsonb: written as a JSON string (or object), read back parsed. */
type Json<T> = ColumnType<T, string | T, string | T>;

export const REQUEST_STATUSES = ['queued', 'submitting', 'submitted', 'submit_failed', 'expired', 'completed', 'cancelled'] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

export const DECISIONS = ['approved', 'declined', 'no_score', 'filtered'] as const;
export type Decision = (typeof DECISIONS)[number];

/** What a stored callback is: the result of a request, a valid result no request awaited, or an invalid body. */
export const CALLBACK_KINDS = ['matched', 'unmatched', 'invalid'] as const;
export type CallbackKind = (typeof CALLBACK_KINDS)[number];
/** The callbacks that are no request's result. */
export type StrayCallbackKind = Exclude<CallbackKind, 'matched'>;

export interface UnderwritingRequestsTable {
  id: Generated<number>;
  customer_uuid: string;
  /** HMAC-SHA-256 of the CPF under CPF_HASH_KEY, hex; the CPF itself is never stored. */
  cpf_hash: string;
  cpf_masked: string;
  cost_saving_enabled: boolean;
  srd: Json<Record<string, unknown>> | null;
  status: RequestStatus;
  upstream_status: number | null;
  /** A short excerpt of what the provider said when it refused, or why it could not be reached. */
  upstream_error: string | null;
  idempotency_key: string | null;
  submitted_at: DefaultedTimestamp;
  updated_at: DefaultedTimestamp;
  completed_at: Timestamp | null;
  result_callback_id: number | null;
  decision: Decision | null;
  /** W3C traceparent of the submit's server span (tracing on), where its callback and deliveries link. */
  traceparent: string | null;
  /** The submit's X-Request-Id (given or generated): sent to the provider and on the pushed events. */
  x_request_id: string | null;
  /** When a queued submit (Prefer: respond-async) was queued; null for a synchronous one. */
  queued_at: Timestamp | null;
  /** The body to forward, sealed (submissions/seal.ts), only while `queued`; null once claimed, cancelled or never queued. */
  queued_body: Buffer | Uint8Array | null;
  /** Sends of a queued submit that the provider certainly did not receive (each returned it to the queue). */
  forward_attempts: ColumnType<number, number | undefined, number>;
  /** The campaign whose file held it (migration 0018); null for a single submit. */
  campaign_id: ColumnType<number | null, number | null | undefined, number | null>;
}

export const CAMPAIGN_STATUSES = ['running', 'done', 'cancelled'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
export const CAMPAIGN_SOURCES = ['ndjson', 'csv'] as const;
export type CampaignSource = (typeof CAMPAIGN_SOURCES)[number];

/** A file of submits uploaded at once (see migration 0018): counts and rejected lines by number, no personal data. */
export interface CampaignsTable {
  id: Generated<number>;
  /** cmp_ and 32 hex digits: the id the API shows. */
  public_id: string;
  created_at: DefaultedTimestamp;
  /** Each batch of the upload touches it (its heartbeat). */
  updated_at: DefaultedTimestamp;
  status: ColumnType<CampaignStatus, CampaignStatus | undefined, CampaignStatus>;
  source: CampaignSource;
  /** A key's fingerprint (key:…) or the peer (peer:…); never a key. */
  created_by: string;
  accepted: ColumnType<number, number | undefined, number>;
  rejected: ColumnType<number, number | undefined, number>;
  /** The first rejected lines, [{line, issues: [{path, message}]}]: never a line's content. */
  rejected_lines: Json<Array<{ line: number; issues: Array<{ path: string; message: string }> }>>;
  uploaded_at: Timestamp | null;
  upload_error: string | null;
  cancelled_at: Timestamp | null;
  /** The upload's Idempotency-Key (migration 0021), while it names the campaign; null once freed. */
  idempotency_key: string | null;
  /** SHA-256 (hex) of the file's bytes, once it was read whole. */
  body_digest: string | null;
}

export interface CallbacksTable {
  id: Generated<number>;
  received_at: DefaultedTimestamp;
  peer: string | null;
  /** The bytes the provider sent, valid or not, every CPF in them masked (callbacks/kept-body.ts). */
  raw_body: Buffer | Uint8Array;
  /** The keyed hashes (first CPF_HASH_KEY) of the CPFs masked in raw_body, on a callback that completes no request; null when none. */
  cpf_hashes: ColumnType<string[] | null, string[] | null | undefined, string[] | null>;
  /** The callback's kind: the column keeps its name, outcome (renaming it takes a migration). */
  outcome: CallbackKind;
  /** Why an invalid callback was refused. */
  error: string | null;
  customer_uuid: string | null;
  started: Timestamp | null;
  finished: Timestamp | null;
  body: Json<Record<string, unknown>> | null;
  decision: Decision | null;
  request_id: number | null;
}

export interface IdempotencyKeysTable {
  key: string;
  /** SHA-256 of the canonical request body. */
  body_hash: string;
  request_id: number | null;
  response_status: number | null;
  response_body: Json<Record<string, unknown>> | null;
  created_at: DefaultedTimestamp;
  expires_at: Timestamp;
}

export const AUDIT_ACTIONS = [
  'lookup',
  'export',
  'erase',
  'endpoint.create',
  'endpoint.update',
  'endpoint.delete',
  'endpoint.rotate_secret',
  'endpoint.replay',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditLogTable {
  id: Generated<number>;
  at: DefaultedTimestamp;
  action: AuditAction;
  /** A key's fingerprint (`key:…`) or, for lookups without keys, the peer (`peer:…`); never a key. */
  actor: string;
  /** A keyed hash of the CPF or customerUuid asked about; never either of them. */
  subject: string;
  counts: Json<Record<string, number>>;
}

export const EVENT_TYPES = [
  'underwriting.completed',
  'underwriting.submit_failed',
  'underwriting.expired',
  'callback.unmatched',
  'endpoint.disabled',
  'underwriting.queued',
  'underwriting.submitted',
  'underwriting.cancelled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const DELIVERY_STATUSES = ['pending', 'delivered', 'dead'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface EventsTable {
  id: Generated<number>;
  /** evt_ and 32 hex digits: the id the API and the webhook-id header show. */
  public_id: string;
  type: EventType;
  customer_uuid: string;
  created_at: Timestamp;
  /** xid8 of the writing transaction, as text; the feed's position with id. */
  tx_id: Generated<string>;
  request_id: number | null;
  callback_id: number | null;
  data: Json<Record<string, unknown>>;
  /** Copied from its request (or its unmatched callback): the trace each pushed attempt continues. */
  traceparent: string | null;
  /** Copied likewise: the X-Request-Id header of each pushed attempt. */
  x_request_id: string | null;
}

export interface EventDeliveriesTable {
  id: Generated<number>;
  event_id: number;
  customer_uuid: string;
  /** Fingerprint of the URL as configured (secrets included); never reversible. */
  url_key: string;
  /** The URL without userinfo and query values. */
  url: string;
  status: ColumnType<DeliveryStatus, DeliveryStatus | undefined, DeliveryStatus>;
  attempts: ColumnType<number, number | undefined, number>;
  queued_at: Timestamp;
  next_attempt_at: Timestamp;
  lease_until: Timestamp | null;
  lease_token: string | null;
  last_attempt_at: Timestamp | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: Timestamp | null;
}

/** How far each webhook target's deliveries have been written, in feed order. */
export interface EventDispatchTable {
  url_key: string;
  url: string;
  /** xid8, as text. */
  tx_id: string;
  event_id: number;
  updated_at: Timestamp;
}

export const ENDPOINT_STATUSES = ['active', 'paused', 'disabled'] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

/** A receiver of pushed events (see migration 0013). */
export interface EventEndpointsTable {
  /** ep_ and 32 hex digits. */
  id: string;
  /** What its deliveries and dispatch position are named by (event_deliveries.url_key). */
  key: string;
  managed: 'api' | 'config';
  /** As given, secrets included: used only to send, never logged or shown. Redacted for a configured one. */
  url: string;
  shown_url: string;
  description: string;
  types: string[] | null;
  rate_limit_per_s: number | null;
  status: EndpointStatus;
  disabled_reason: string | null;
  /** whsec_...: used only to sign, never logged or shown after it is created or rotated. */
  secret: string | null;
  previous_secret: string | null;
  previous_expires_at: Timestamp | null;
  failing_since: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** The second (Unix seconds) whose attempt slots rate_used counts, across every instance. */
  rate_window: ColumnType<string | null, number | null | undefined, number | null>;
  rate_used: ColumnType<number, number | undefined, number>;
  /** Attempts in flight to it at most, across every instance; null: no cap of its own. */
  max_in_flight: number | null;
  /** The slots each instance holds of max_in_flight: {"<holder>": {"n": slots, "until": instant}}. */
  in_flight: ColumnType<Record<string, { n: number; until: string }>, string | undefined, string>;
}

/** Purged rows, and closed hours' rows, folded per UTC hour: requests by the hour they were submitted, callbacks by arrival. */
export interface StatisticsHourlyTable {
  hour: Timestamp;
  submitted: ColumnType<number, number | undefined, number>;
  completed: ColumnType<number, number | undefined, number>;
  expired: ColumnType<number, number | undefined, number>;
  submit_failed: ColumnType<number, number | undefined, number>;
  approved: ColumnType<number, number | undefined, number>;
  declined: ColumnType<number, number | undefined, number>;
  no_score: ColumnType<number, number | undefined, number>;
  filtered: ColumnType<number, number | undefined, number>;
  unmatched: ColumnType<number, number | undefined, number>;
  invalid: ColumnType<number, number | undefined, number>;
  /** When the hour's live rows were added to its counts (closed, aggregates/closing.ts); null: still open. */
  closed_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** Requests submitted in the hour before this are in its counts, but for those in statistics_unfolded (closing.ts); null: none. */
  folded_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** Unmatched and invalid callbacks that arrived in the hour before this are in its counts; null: none. */
  stray_folded_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
}

/** Requests below their hour's watermark that awaited the provider when it passed them (migration 0028). */
export interface StatisticsUnfoldedTable {
  request_id: number;
  /** The hour whose watermark passed it. */
  hour: Timestamp;
}

/** Turnaround of purged completed requests: a log-scale histogram per UTC hour (see aggregates/turnaround.ts). */
export interface TurnaroundHourlyTable {
  hour: Timestamp;
  bin: number;
  requests: number;
}

/** The provider's pace, shared by every instance (one row, id 1; see provider/pacing.ts). */
export interface ProviderPacingTable {
  id: number;
  /** The Unix second whose call starts `used` counts (the next one once a call started in a second's tail). */
  window_s: ColumnType<string, number | undefined, number>;
  used: ColumnType<number, number | undefined, number>;
  /** While window_s is the second after a tail call's (migration 0023): that call's second's own count. */
  used_prev: ColumnType<number, number | undefined, number>;
  hold_until: ColumnType<Date, Date | string | undefined, Date | string>;
  failures: ColumnType<number, number | undefined, number>;
  open_until: Timestamp | null;
  probe_until: Timestamp | null;
}

/** One leased row per provider call in flight (slot < PROVIDER_MAX_IN_FLIGHT counts). */
export interface ProviderSlotsTable {
  slot: number;
  lease_until: ColumnType<Date, Date | string | undefined, Date | string>;
  holder: string | null;
}

/** Work done once over rows an earlier version wrote (migration 0024; see requests/key-digest-pass.ts). */
export interface MaintenancePassesTable {
  name: string;
  /** The highest row id the pass has read, for a table it reads by id. */
  through_id: ColumnType<string, number | undefined, number>;
  started_at: DefaultedTimestamp;
  /** When the pass first reached the end. */
  finished_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** Every table's column types, as Kysely sees them: `Kysely<Tables>`. */
export interface Tables {
  underwriting_requests: UnderwritingRequestsTable;
  callbacks: CallbacksTable;
  idempotency_keys: IdempotencyKeysTable;
  audit_log: AuditLogTable;
  events: EventsTable;
  event_deliveries: EventDeliveriesTable;
  event_dispatch: EventDispatchTable;
  event_endpoints: EventEndpointsTable;
  statistics_hourly: StatisticsHourlyTable;
  statistics_unfolded: StatisticsUnfoldedTable;
  turnaround_hourly: TurnaroundHourlyTable;
  provider_pacing: ProviderPacingTable;
  provider_slots: ProviderSlotsTable;
  campaigns: CampaignsTable;
  maintenance_passes: MaintenancePassesTable;
}

export type UnderwritingRequestRow = Selectable<UnderwritingRequestsTable>;
export type CallbackRow = Selectable<CallbacksTable>;
export type IdempotencyKeyRow = Selectable<IdempotencyKeysTable>;
