// The console is a client of the gateway's HTTP API and nothing else: every path is relative to
// /console, so the page also works behind a proxy that mounts the gateway under a prefix.

const KEY_STORAGE = 'ugw.console.apiKey';
const TIMEOUT_MS = 15_000;

export function storedKey(): string | null {
  try {
    return sessionStorage.getItem(KEY_STORAGE);
  } catch {
    return null;
  }
}

export function storeKey(key: string | null): void {
  try {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    // Storage refused (private mode): the key lives for this page only.
  }
}

export type FailureKind =
  | 'unauthorized' // 401: the key is missing or wrong
  | 'missing' // 404 from a route this gateway does not have (yet)
  | 'not_found' // 404 for a thing the route does not know
  | 'invalid' // 400
  | 'unavailable' // 503: the database is unreachable
  | 'failed' // any other status
  | 'network'; // no answer at all

export type Outcome<T> = { ok: true; status: number; data: T } | { ok: false; status: number; kind: FailureKind; message: string };

type Listener = (kind: FailureKind | 'ok') => void;
const listeners = new Set<Listener>();
/** Told of every answer: the app asks for a key on a 401 and shows the gateway's state. */
export function onAnswer(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Outcome<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const key = storedKey();
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? null : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch {
    listeners.forEach((l) => l('network'));
    return { ok: false, status: 0, kind: 'network', message: 'the gateway did not answer' };
  }
  let json: unknown = null;
  try {
    json = await res.json();
  } catch {
    json = null;
  }
  if (res.ok) {
    listeners.forEach((l) => l('ok'));
    return { ok: true, status: res.status, data: json as T };
  }
  const error = json && typeof json === 'object' ? (json as { error?: unknown; message?: unknown }) : {};
  const message = typeof error.message === 'string' ? error.message : `HTTP ${res.status}`;
  const kind: FailureKind =
    res.status === 401
      ? 'unauthorized'
      : res.status === 404
        ? message.startsWith('no route') || error.error !== 'not_found'
          ? 'missing'
          : 'not_found'
        : res.status === 400
          ? 'invalid'
          : res.status === 503
            ? 'unavailable'
            : 'failed';
  listeners.forEach((l) => l(kind));
  return { ok: false, status: res.status, kind, message };
}

const query = (params: Record<string, string | number | undefined>): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
};

// ---- Shapes the page reads (the contract's; see README "Console") ----

export type Decision = 'approved' | 'declined' | 'no_score' | 'filtered';
export const DECISIONS: readonly Decision[] = ['approved', 'declined', 'filtered', 'no_score'];

export interface UnderwritingResult {
  customerUuid: string;
  started: string;
  finished: string;
  serviceType: string;
  response: { costSavingEnabled: boolean; score: number; riskBand: number; limit: number };
}

export interface RequestView {
  customerUuid: string;
  status: string;
  decision: Decision | null;
  cpfMasked: string;
  costSavingEnabled: boolean;
  srd: Record<string, unknown> | null;
  submittedAt: string;
  completedAt: string | null;
  upstreamStatus: number | null;
  result: UnderwritingResult | null;
}

export interface CustomerView extends RequestView {
  history: RequestView[];
  unmatched: { receivedAt: string; result: UnderwritingResult | null }[];
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
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
  type: string;
  timestamp: string;
  data: unknown;
  deliveries: Delivery[];
}

export interface CallbackView {
  id: string | number;
  customerUuid: string | null;
  receivedAt: string;
  kind: 'unmatched' | 'invalid';
  problem: string | null;
  rawBody: string;
}

export interface Bucket {
  start: number; // ms since the epoch
  submitted: number | null;
  completed: number | null;
  expired: number | null;
  submitFailed: number | null;
  decisions: Record<Decision, number | null>;
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface Present {
  pending: number | null;
  oldestPendingAgeS: number | null;
  unmatched24h: number | null;
  invalid24h: number | null;
  eventsPending: number | null;
  eventsDead: number | null;
  token: { configured: boolean; expiresAt: string | null; renewAt: string | null } | null;
}

export interface Stats {
  buckets: Bucket[];
  now: Present;
}

// ---- Reading /v1/stats: one place that knows its field names ----

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {});
/** The first of the named fields that holds a finite number (the stats route's names, then their snake_case). */
const num = (o: Json, ...names: string[]): number | null => {
  for (const n of names) {
    const v = o[n];
    if (typeof v === 'number' && Number.isFinite(v)) return v;
  }
  return null;
};
const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export function readStats(body: unknown): Stats {
  const root = obj(body);
  const buckets = (Array.isArray(root.buckets) ? root.buckets : []).flatMap((raw): Bucket[] => {
    const b = obj(raw);
    const start = Date.parse(text(b.start) ?? text(b.bucketStart) ?? '');
    if (Number.isNaN(start)) return [];
    const decided = obj(b.decisions);
    const turnaround = obj(b.turnaroundMs ?? b.turnaround_ms);
    return [
      {
        start,
        submitted: num(b, 'submitted'),
        completed: num(b, 'completed'),
        expired: num(b, 'expired'),
        submitFailed: num(b, 'submitFailed', 'submit_failed'),
        decisions: {
          approved: num(decided, 'approved') ?? num(b, 'approved'),
          declined: num(decided, 'declined') ?? num(b, 'declined'),
          filtered: num(decided, 'filtered') ?? num(b, 'filtered'),
          no_score: num(decided, 'no_score', 'noScore') ?? num(b, 'no_score', 'noScore'),
        },
        p50Ms: num(turnaround, 'p50') ?? num(b, 'turnaroundP50Ms', 'turnaround_p50_ms'),
        p95Ms: num(turnaround, 'p95') ?? num(b, 'turnaroundP95Ms', 'turnaround_p95_ms'),
      },
    ];
  });
  buckets.sort((a, b) => a.start - b.start);
  const now = obj(root.now);
  const events = obj(now.events);
  const token = obj(now.token ?? now.tokenClient);
  return {
    buckets,
    now: {
      pending: num(now, 'pending'),
      oldestPendingAgeS: num(now, 'oldestPendingAgeS', 'oldest_pending_age_s'),
      unmatched24h: num(now, 'unmatched24h', 'unmatched_24h'),
      invalid24h: num(now, 'invalid24h', 'invalid_24h'),
      eventsPending: num(events, 'pending') ?? num(now, 'eventsPending', 'events_pending'),
      eventsDead: num(events, 'dead') ?? num(now, 'eventsDead', 'events_dead'),
      token:
        typeof token.configured === 'boolean'
          ? { configured: token.configured, expiresAt: text(token.expiresAt), renewAt: text(token.renewAt) }
          : null,
    },
  };
}

// ---- The calls ----

export type Range = { since: string; until: string; bucket: 'hour' | 'day' };

export async function getStats(range: Range): Promise<Outcome<Stats>> {
  const out = await call<unknown>('GET', `v1/stats${query(range)}`);
  return out.ok ? { ...out, data: readStats(out.data) } : out;
}

export const getReady = () => call<{ status: string }>('GET', 'readyz');

export const getCustomer = (customerUuid: string) =>
  call<CustomerView>('GET', `v1/underwritings/${encodeURIComponent(customerUuid)}`);

/** The newest requests; also how the page learns, on a 401, that it needs a key. */
export const listRecent = (limit: number) => call<Page<RequestView>>('GET', `v1/underwritings${query({ limit })}`);

/** The CPF travels in the body, never in a URL. */
export const lookupCpf = (cpf: string, cursor?: string) =>
  call<Page<RequestView>>('POST', 'v1/underwritings/lookup', cursor ? { cpf, cursor } : { cpf });

export const listEvents = (params: { customerUuid?: string; after?: string; limit?: number; status?: string }) =>
  call<Page<EventView>>('GET', `v1/events${query(params)}`);

export const listCallbacks = (kind: 'unmatched' | 'invalid', cursor?: string) =>
  call<Page<CallbackView>>('GET', `v1/callbacks${query({ kind, limit: 50, cursor })}`);

export const getEvent = (id: string) => call<EventView>('GET', `v1/events/${encodeURIComponent(id)}`);

export const redeliver = (id: string) => call<unknown>('POST', `v1/events/${encodeURIComponent(id)}/redeliver`, {});

export const redeliverDead = () => call<{ queued?: number }>('POST', 'v1/events/redeliver', { status: 'dead' });

const SCAN_PAGES = 20;

/**
 * Events with a dead delivery: asks the feed for status=dead; a feed without that filter (400)
 * is read page by page (at most 20 of 500) and filtered here.
 */
export async function listDeadEvents(): Promise<Outcome<EventView[]>> {
  const filtered = await listEvents({ status: 'dead', limit: 500 });
  if (filtered.ok) return { ...filtered, data: filtered.data.items.filter(isDead) };
  if (filtered.kind !== 'invalid') return filtered;
  const dead: EventView[] = [];
  let after: string | undefined;
  for (let i = 0; i < SCAN_PAGES; i++) {
    const page = await listEvents({ limit: 500, after });
    if (!page.ok) return page;
    dead.push(...page.data.items.filter(isDead));
    if (!page.data.nextCursor || page.data.items.length === 0) break;
    after = page.data.nextCursor;
  }
  return { ok: true, status: 200, data: dead };
}

const isDead = (e: EventView) => (e.deliveries ?? []).some((d) => d.status === 'dead');
