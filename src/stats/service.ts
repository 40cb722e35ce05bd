import type { Kysely } from 'kysely';
import type { z } from 'zod';
import { binMs } from '../aggregates/turnaround.js';
import type { Tables } from '../db/types.js';
import { validationFailed } from '../http/errors.js';
import { WINDOW_ORDER_MESSAGE } from '../http/query.js';
import type { TokenState } from '../provider/token-source.js';
import { cursorCodec } from '../http/cursor.js';
import { readStrayPage } from './callbacks.js';
import {
  type BucketView,
  DEFAULT_CALLBACK_PAGE,
  MAX_BUCKETS,
  type PresentView,
  type StatsQuery,
  type StatsView,
  type strayListQuery,
  type strayPageView,
} from './schemas.js';
import { BUCKET_MS, type BucketRow, readBuckets, readPresent } from './sql.js';

const DAY_MS = 24 * 3600_000;
const DEFAULT_SPAN_MS = { hour: DAY_MS, day: 30 * DAY_MS } as const;

export interface StatsDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** The token client's state as it is now (never the token). */
  token: () => TokenState;
  /** Signs the callbacks list's cursors (CPF_HASH_KEY, like the other lists). */
  cursorSecret: string;
  /** The keys of the endpoints this instance pushes to: their deliveries not written yet count as pending. */
  webhookKeys?: () => Promise<readonly string[]>;
}

/**
 * The instants an answer can say: years 0001-9999, what ISO 8601's four-digit years (and so the
 * response schema) and PostgreSQL both hold. An accepted since/until beyond them (9999-12-31 with a
 * negative offset, rounded up a bucket) is clamped to them.
 */
const FIRST_MS = Date.parse('0001-01-01T00:00:00Z');
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');

/** An instant's milliseconds rounded up: Date drops the digits past them, which put it past a bucket's start. */
const upToMs = (v: string) => Date.parse(v) + (/\.\d{3}\d*[1-9]/.test(v) ? 1 : 0);

/** [since, until) widened to whole buckets (UTC) within years 0001-9999, checked. */
export function statsRange(query: StatsQuery, now: Date): { since: Date; until: Date } {
  const width = BUCKET_MS[query.bucket];
  const within = (ms: number) => Math.min(Math.max(ms, FIRST_MS), LAST_MS);
  // The last bucket that still ends within year 9999; UTC midnights are whole multiples of a day.
  const untilMs = Math.min(Math.ceil(within(query.until ? upToMs(query.until) : now.getTime()) / width) * width, Math.floor(LAST_MS / width) * width);
  const sinceMs = Math.floor(within(query.since ? Date.parse(query.since) : untilMs - DEFAULT_SPAN_MS[query.bucket]) / width) * width;
  // The schema refuses a given since not before a given until; this catches a default until (now)
  // not after a given since, and a window emptied by year 9999's clamp.
  if (sinceMs >= untilMs) throw validationFailed([{ path: 'since', message: WINDOW_ORDER_MESSAGE }]);
  if ((untilMs - sinceMs) / width > MAX_BUCKETS) {
    throw validationFailed([{ path: 'since', message: `at most ${MAX_BUCKETS} buckets per answer: narrow the range or use bucket=day` }]);
  }
  return { since: new Date(sinceMs), until: new Date(untilMs) };
}

function bucketView(row: BucketRow): BucketView {
  const n = (v: number | string) => Number(v);
  return {
    start: row.start.toISOString(),
    submitted: n(row.submitted),
    completed: n(row.completed),
    expired: n(row.expired),
    submit_failed: n(row.submit_failed),
    pending: n(row.pending),
    decisions: { approved: n(row.approved), declined: n(row.declined), no_score: n(row.no_score), filtered: n(row.filtered) },
    turnaroundMs: {
      p50: row.p50_bin === null ? null : binMs(row.p50_bin),
      p95: row.p95_bin === null ? null : binMs(row.p95_bin),
    },
    unmatched: n(row.unmatched),
    invalid: n(row.invalid),
  };
}

export function statsService(deps: StatsDeps) {
  const cursors = cursorCodec(deps.cursorSecret);
  const ageS = (now: Date, then: Date | null) => (then === null ? null : Math.max(0, Math.floor((now.getTime() - then.getTime()) / 1000)));

  async function present(now: Date): Promise<PresentView> {
    const row = await readPresent(deps.db, new Date(now.getTime() - DAY_MS), await deps.webhookKeys?.());
    const token = deps.token();
    return {
      at: now.toISOString(),
      pending: Number(row.pending),
      oldestPendingAgeS: ageS(now, row.oldest_pending),
      unmatched24h: Number(row.unmatched),
      invalid24h: Number(row.invalid),
      events: {
        pending: Number(row.deliveries_pending),
        dead: Number(row.deliveries_dead),
        oldestPendingAgeS: ageS(now, row.oldest_delivery_pending),
      },
      token: {
        configured: token.configured,
        expiresAt: token.expiresAt ? token.expiresAt.toISOString() : null,
        renewAt: token.renewAt ? token.renewAt.toISOString() : null,
      },
    };
  }

  return {
    async read(query: StatsQuery): Promise<StatsView> {
      const now = deps.clock();
      const { since, until } = statsRange(query, now);
      const [rows, nowView] = await Promise.all([readBuckets(deps.db, since, until, query.bucket), present(now)]);
      return {
        bucket: query.bucket,
        since: since.toISOString(),
        until: until.toISOString(),
        buckets: rows.map(bucketView),
        now: nowView,
      };
    },

    /** Unmatched and invalid callbacks, newest first, raw bodies masked. */
    async strayCallbacks(query: z.infer<typeof strayListQuery>): Promise<z.infer<typeof strayPageView>> {
      const after = query.cursor === undefined ? undefined : cursors.decode(query.cursor);
      const page = await readStrayPage(deps.db, { kind: query.kind, since: query.since }, after, query.limit ?? DEFAULT_CALLBACK_PAGE);
      return { items: page.items, nextCursor: page.next ? cursors.encode(page.next) : null };
    },
  };
}
export type StatsService = ReturnType<typeof statsService>;
