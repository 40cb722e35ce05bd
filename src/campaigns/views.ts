import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import type { CampaignSummary, CampaignView, ResultLine } from './schemas.js';
import { type CampaignRow, type CountRow, countCampaign, type ListRow, markDone, providerPaused, type ResultRow, resultsPage } from './sql.js';

// A campaign's answers, built field by field from its rows (a new column never leaks into one).

/** The rate is measured over this window (or since the campaign began, when that is shorter). */
export const RATE_WINDOW_S = 60;
/** An upload whose batches and heartbeat (upload.ts) stopped touching its campaign this long ago died with its instance. */
export const UPLOAD_SILENT_MS = 5 * 60_000;
/** Rows read per page while the results are streamed. */
export const RESULTS_PAGE_ROWS = 1000;

type Counts = CampaignView['counts'];
const zeroCounts = (): Counts => ({
  queued: 0,
  submitting: 0,
  submitted: 0,
  completed: 0,
  submit_failed: 0,
  expired: 0,
  cancelled: 0,
  approved: 0,
  declined: 0,
  filtered: 0,
  no_score: 0,
});

/** The upload is over: read whole, failed, or silent past UPLOAD_SILENT_MS. */
const uploadOver = (row: Pick<CampaignRow, 'uploaded_at' | 'upload_error' | 'updated_at'>, now: Date) =>
  row.uploaded_at !== null || row.upload_error !== null || now.getTime() - row.updated_at.getTime() > UPLOAD_SILENT_MS;

function summaryOf(row: Omit<ListRow, 'open' | 'position_t'>, status: CampaignSummary['status']): CampaignSummary {
  return {
    id: row.public_id,
    createdAt: row.created_at.toISOString(),
    status,
    source: row.source,
    accepted: row.accepted,
    rejectedTotal: row.rejected,
    uploadedAt: row.uploaded_at ? row.uploaded_at.toISOString() : null,
    uploadError: row.upload_error,
  };
}

/** A list row's status: done once its upload is over and none of its requests is in flight. */
export function listItem(row: ListRow, now: Date): CampaignSummary {
  const status = row.status === 'running' && !row.open && uploadOver(row, now) ? 'done' : row.status;
  return summaryOf(row, status);
}

/** One campaign with its counts, rate and estimate, from one grouped query. Marks it done when it is. */
export async function campaignView(db: Kysely<Tables>, row: CampaignRow, now: Date): Promise<CampaignView> {
  const windowS = Math.max(1, Math.min(RATE_WINDOW_S, (now.getTime() - row.created_at.getTime()) / 1000));
  const groups: CountRow[] = await countCampaign(db, row.id, new Date(now.getTime() - windowS * 1000));
  const counts = zeroCounts();
  let recent = 0;
  for (const g of groups) {
    const n = Number(g.n);
    if (g.status in counts) counts[g.status as keyof Counts] += n;
    if (g.decision !== null) counts[g.decision] += n;
    recent += Number(g.recent);
  }
  const inFlight = counts.queued + counts.submitting + counts.submitted;
  let status = row.status;
  if (status === 'running' && inFlight === 0 && uploadOver(row, now)) {
    status = 'done';
    await markDone(db, row.id, now);
  }
  const ratePerS = Math.round((recent / windowS) * 100) / 100;
  const toForward = counts.queued + counts.submitting;
  // The last minute's rate goes on for a minute after forwarding stops: no estimate while it is stopped.
  const etaS = toForward === 0 ? 0 : ratePerS > 0 && !(await providerPaused(db)) ? Math.ceil(toForward / ratePerS) : null;
  return {
    ...summaryOf(row, status),
    createdBy: row.created_by,
    cancelledAt: row.cancelled_at ? row.cancelled_at.toISOString() : null,
    counts,
    ratePerS,
    etaS,
    rejected: row.rejected_lines,
  };
}

const numberOrNull = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export function resultLineOf(row: ResultRow): ResultLine {
  return {
    customerUuid: row.customer_uuid,
    status: row.status,
    decision: row.decision,
    score: numberOrNull(row.response?.score),
    riskBand: numberOrNull(row.response?.riskBand),
    limit: numberOrNull(row.response?.limit),
    cpfMasked: row.cpf_masked,
    completedAt: row.completed_at ? row.completed_at.toISOString() : null,
  };
}

/** A CSV field: quoted (RFC 4180) only when it holds a comma, a quote or a line break. */
function csvField(value: string | number | null): string {
  if (value === null) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export const csvHeader = (columns: readonly string[]) => `${columns.join(',')}\r\n`;
export const csvLine = (line: ResultLine, columns: readonly (keyof ResultLine)[]) => `${columns.map((c) => csvField(line[c])).join(',')}\r\n`;
export const ndjsonLine = (line: ResultLine) => `${JSON.stringify(line)}\n`;

/**
 * The campaign's results, page by page by keyset (RESULTS_PAGE_ROWS at a time, never all rows),
 * as text chunks: one per page. Its consumer's pace (a Readable's back-pressure) sets the reads'.
 */
export async function* resultChunks(db: Kysely<Tables>, id: number, format: (lines: ResultLine[]) => string): AsyncGenerator<string> {
  for (let after = 0; ; ) {
    const rows = await resultsPage(db, id, after, RESULTS_PAGE_ROWS);
    if (rows.length > 0) yield format(rows.map(resultLineOf));
    if (rows.length < RESULTS_PAGE_ROWS) return;
    after = rows.at(-1)!.id;
  }
}
