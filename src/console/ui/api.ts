// The console is a client of the gateway's HTTP API and nothing else: every path is relative to
// /console, so the page also works behind a proxy that mounts the gateway under a prefix.

import type { CallbackView, CampaignCancelled, CampaignPage, CampaignView, Decision, EndpointList, EndpointView, EventView, Stats } from './shapes.js';

export type { Bucket, CallbackView, CampaignCounts, CampaignSummary, CampaignView, Decision, Delivery, EndpointView, EventView, Present, Stats } from './shapes.js';

const KEY_STORAGE = 'ugw.console.apiKey';
/** The endpoints section's key (ADMIN_API_KEYS): another key than the query routes'. */
const ADMIN_KEY_STORAGE = 'ugw.console.adminKey';

export function storedAdminKey(): string | null {
  try {
    return sessionStorage.getItem(ADMIN_KEY_STORAGE);
  } catch {
    return null;
  }
}

export function storeAdminKey(key: string | null): void {
  try {
    if (key) sessionStorage.setItem(ADMIN_KEY_STORAGE, key);
    else sessionStorage.removeItem(ADMIN_KEY_STORAGE);
  } catch {
    // Storage refused (private mode): the key lives for this page only.
  }
}
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

/** The gateway's answer to one call: its data, or why there is none. */
export type Answer<T> = { ok: true; status: number; data: T } | { ok: false; status: number; kind: FailureKind; message: string };

type Listener = (kind: FailureKind | 'ok') => void;
const everyone = new Set<Listener>();
/** Told of every answer: the app asks for a key on a 401 and shows the gateway's state. */
export function onAnswer(listener: Listener): () => void {
  everyone.add(listener);
  return () => everyone.delete(listener);
}

async function call<T>(method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown, admin = false): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const key = admin ? storedAdminKey() : storedKey();
  // An admin route's 401 is about the admin key: the query key's form is not asked for.
  const listeners = admin ? new Set<Listener>() : everyone;
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

// ---- Shapes the page reads (the contract's; see docs/console.md) ----

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
  submittedAt: string | null;
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

// The answers of /v1/stats, /v1/callbacks and /v1/events: see shapes.ts.
// ---- The calls ----

export type Range = { since: string; until: string; bucket: 'hour' | 'day' };

export const getStats = (range: Range) => call<Stats>('GET', `v1/stats${query(range)}`);

export const getReady = () => call<{ status: string }>('GET', 'readyz');

export const getCustomer = (customerUuid: string) =>
  call<CustomerView>('GET', `v1/underwritings/${encodeURIComponent(customerUuid)}`);

/** The newest requests; also how the page learns, on a 401, that it needs a key. */
export const listRecent = (limit: number) => call<Page<RequestView>>('GET', `v1/underwritings${query({ limit })}`);

/** The CPF travels in the body, never in a URL. */
export const lookupCpf = (cpf: string, cursor?: string) =>
  call<Page<RequestView>>('POST', 'v1/underwritings/lookup', cursor ? { cpf, cursor } : { cpf });

export const listEvents = (params: { customerUuid?: string; after?: string; limit?: number }) =>
  call<Page<EventView>>('GET', `v1/events${query(params)}`);

export const listCallbacks = (kind: 'unmatched' | 'invalid', cursor?: string) =>
  call<Page<CallbackView>>('GET', `v1/callbacks${query({ kind, limit: 50, cursor })}`);

export const getEvent = (id: string) => call<EventView>('GET', `v1/events/${encodeURIComponent(id)}`);

export const redeliver = (id: string) => call<{ queued: number }>('POST', `v1/events/${encodeURIComponent(id)}/redeliver`, {});

export const redeliverDead = () => call<{ queued: number }>('POST', 'v1/events/redeliver', { status: 'dead' });

/** One endpoint's dead deliveries queued again (an events route: the query key, not the admin key). */
export const redeliverDeadTo = (endpointId: string) => call<{ queued: number }>('POST', 'v1/events/redeliver', { status: 'dead', endpointId });

/** The feed's largest page, and how many of them one look at the dead events reads at most. */
const FEED_PAGE = 500;
export const SCAN_PAGES = 20;

export interface DeadScan {
  events: EventView[];
  /** Events read from the feed. */
  scanned: number;
  /** The scan stopped at SCAN_PAGES pages with more events unread: some dead ones may be missing. */
  cut: boolean;
}

/**
 * Events with a dead delivery. GET /v1/events has no delivery-status filter, so the feed is read
 * page by page (oldest first) and filtered here: it stops once it has found as many dead
 * deliveries as /v1/stats counts (`expectedDead`, when known), at the end of the feed, or after
 * SCAN_PAGES pages of FEED_PAGE, which it reports as cut.
 */
export async function listDeadEvents(expectedDead?: number): Promise<Answer<DeadScan>> {
  const events: EventView[] = [];
  let found = 0;
  let scanned = 0;
  let after: string | undefined;
  if (expectedDead === 0) return { ok: true, status: 200, data: { events, scanned, cut: false } };
  for (let page = 0; page < SCAN_PAGES; page++) {
    const out = await listEvents({ limit: FEED_PAGE, after });
    if (!out.ok) return out;
    const { items, nextCursor } = out.data;
    scanned += items.length;
    for (const e of items) {
      const dead = e.deliveries.filter((d) => d.status === 'dead').length;
      if (dead > 0) events.push(e);
      found += dead;
    }
    const done = items.length < FEED_PAGE || nextCursor === null || nextCursor === after;
    if (done || (expectedDead !== undefined && found >= expectedDead)) {
      return { ok: true, status: 200, data: { events, scanned, cut: false } };
    }
    after = nextCursor;
  }
  return { ok: true, status: 200, data: { events, scanned, cut: true } };
}

// ---- Endpoints (admin key) ----

export const listEndpoints = () => call<EndpointList>('GET', 'v1/endpoints', undefined, true);

export const setEndpointStatus = (id: string, status: 'active' | 'paused') =>
  call<EndpointView>('PATCH', `v1/endpoints/${encodeURIComponent(id)}`, { status }, true);

export const rotateEndpointSecret = (id: string) =>
  call<{ secret: string }>('POST', `v1/endpoints/${encodeURIComponent(id)}/rotate-secret`, {}, true);

export const replayToEndpoint = (id: string, since: string) =>
  call<{ queued: number }>('POST', `v1/endpoints/${encodeURIComponent(id)}/replay`, { since }, true);

// ---- Campaigns (the submit allowlist, and the query key when set) ----

export const listCampaigns = (cursor?: string) => call<CampaignPage>('GET', `v1/campaigns${query({ limit: 20, cursor })}`);

export const getCampaign = (id: string) => call<CampaignView>('GET', `v1/campaigns/${encodeURIComponent(id)}`);

export const cancelCampaign = (id: string) => call<CampaignCancelled>('POST', `v1/campaigns/${encodeURIComponent(id)}/cancel`);

/** Where a campaign's results are downloaded from (relative to /console). */
export const resultsPath = (id: string, format: 'csv' | 'ndjson') => `v1/campaigns/${encodeURIComponent(id)}/results?format=${format}`;

/**
 * Downloads a campaign's results with the key as a bearer token (a plain link cannot carry it):
 * read into a Blob, then saved under its file name. Without a key the page links to the file instead.
 */
export async function downloadResults(id: string, format: 'csv' | 'ndjson'): Promise<Answer<null>> {
  const key = storedKey();
  let res: Response;
  try {
    res = await fetch(resultsPath(id, format), {
      headers: key ? { authorization: `Bearer ${key}` } : {},
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
    });
  } catch {
    return { ok: false, status: 0, kind: 'network', message: 'the gateway did not answer' };
  }
  if (!res.ok) return { ok: false, status: res.status, kind: res.status === 401 ? 'unauthorized' : 'failed', message: `HTTP ${res.status}` };
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = `${id}-results.${format}`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return { ok: true, status: 200, data: null };
}
