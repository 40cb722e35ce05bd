// What the page reads from /v1/stats, /v1/events and /v1/callbacks: a mirror of the routes' zod
// schemas (src/stats/schemas.ts, src/events/schemas.ts), which the browser build cannot import
// (they reach src/db/types.ts, written for Node). src/console/shapes-check.ts makes the server's
// typecheck fail when a schema no longer gives what this file says.

export type Decision = 'approved' | 'declined' | 'no_score' | 'filtered';

export interface Bucket {
  /** ISO instant, UTC. */
  start: string;
  submitted: number;
  completed: number;
  expired: number;
  submit_failed: number;
  pending: number;
  decisions: Record<Decision, number>;
  turnaroundMs: { p50: number | null; p95: number | null };
  unmatched: number;
  invalid: number;
}

export interface Present {
  at: string;
  pending: number;
  oldestPendingAgeS: number | null;
  unmatched24h: number;
  invalid24h: number;
  events: { pending: number; dead: number; oldestPendingAgeS: number | null };
  token: { configured: boolean; expiresAt: string | null; renewAt: string | null };
}

export interface Stats {
  bucket: 'hour' | 'day';
  since: string;
  until: string;
  buckets: Bucket[];
  now: Present;
}

export interface Delivery {
  url: string;
  status: 'pending' | 'delivered' | 'dead';
  attempts: number;
  lastAttemptAt: string | null;
  lastStatus: number | null;
  lastError: string | null;
}

export interface EventView {
  id: string;
  type:
    | 'underwriting.queued'
    | 'underwriting.submitted'
    | 'underwriting.completed'
    | 'underwriting.submit_failed'
    | 'underwriting.expired'
    | 'underwriting.cancelled'
    | 'callback.unmatched'
    | 'endpoint.disabled';
  timestamp: string;
  /** A request's view, an unmatched callback's { customerUuid, receivedAt, result }, or a disabled endpoint's. */
  data: { customerUuid: string } | { endpointId: string };
  deliveries: Delivery[];
}

export interface CallbackView {
  id: number;
  customerUuid: string | null;
  receivedAt: string;
  kind: 'unmatched' | 'invalid';
  problem: string | null;
  rawBody: string;
}

export interface CallbackPage {
  items: CallbackView[];
  nextCursor: string | null;
}

export interface EventPage {
  items: EventView[];
  nextCursor: string | null;
}

export interface EndpointView {
  id: string;
  url: string;
  description: string;
  types: string[] | null;
  rateLimitPerS: number | null;
  maxInFlight: number | null;
  status: 'active' | 'paused' | 'disabled';
  disabledReason: string | null;
  createdAt: string;
  managed: 'api' | 'config';
  stats: { delivered: number; failed: number; dead: number; lastAttemptAt: string | null; lastStatus: number | null };
}

export interface EndpointList {
  items: EndpointView[];
}

export type CampaignStatus = 'running' | 'done' | 'cancelled';

export interface CampaignSummary {
  id: string;
  createdAt: string;
  status: CampaignStatus;
  source: 'ndjson' | 'csv';
  accepted: number;
  rejectedTotal: number;
  uploadedAt: string | null;
  uploadError: string | null;
}

export interface CampaignPage {
  items: CampaignSummary[];
  nextCursor: string | null;
}

export interface CampaignCounts {
  queued: number;
  submitting: number;
  submitted: number;
  completed: number;
  submit_failed: number;
  expired: number;
  cancelled: number;
  approved: number;
  declined: number;
  filtered: number;
  no_score: number;
}

export interface CampaignView extends CampaignSummary {
  createdBy: string;
  cancelledAt: string | null;
  counts: CampaignCounts;
  ratePerS: number;
  etaS: number | null;
  rejected: { line: number; issues: { path: string; message: string }[] }[];
}

export interface CampaignCancelled {
  id: string;
  status: 'cancelled';
  cancelled: number;
}
