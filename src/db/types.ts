import type { ColumnType, Generated, Selectable } from 'kysely';

/** Written as a Date or ISO string, read back as a Date on both engines. */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type DefaultedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** jsonb: written as a JSON string (or object), read back parsed. */
type Json<T> = ColumnType<T, string | T, string | T>;

export const REQUEST_STATUSES = ['submitting', 'submitted', 'submit_failed', 'expired', 'completed'] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

export const DECISIONS = ['approved', 'declined', 'no_score', 'filtered'] as const;
export type Decision = (typeof DECISIONS)[number];

export const CALLBACK_OUTCOMES = ['matched', 'unmatched', 'invalid'] as const;
export type CallbackOutcome = (typeof CALLBACK_OUTCOMES)[number];

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
}

export interface CallbacksTable {
  id: Generated<number>;
  received_at: DefaultedTimestamp;
  peer: string | null;
  /** Exactly the bytes the provider sent, valid or not. */
  raw_body: Buffer | Uint8Array;
  outcome: CallbackOutcome;
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

export const AUDIT_ACTIONS = ['lookup', 'export', 'erase'] as const;
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

export interface DB {
  underwriting_requests: UnderwritingRequestsTable;
  callbacks: CallbacksTable;
  idempotency_keys: IdempotencyKeysTable;
  audit_log: AuditLogTable;
}

export type UnderwritingRequestRow = Selectable<UnderwritingRequestsTable>;
export type CallbackRow = Selectable<CallbacksTable>;
export type IdempotencyKeyRow = Selectable<IdempotencyKeysTable>;
