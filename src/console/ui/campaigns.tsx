import { useEffect, useState } from 'preact/hooks';
import {
  type Answer,
  type CampaignCounts,
  type CampaignSummary,
  type CampaignView,
  cancelCampaign,
  downloadResults,
  getCampaign,
  listCampaigns,
  resultsPath,
  storedKey,
} from './api.js';
import { count, DASH, duration, when } from './format.js';
import { Failure, TableHead } from './parts.js';

const LIST_COLUMNS = ['Campaign', 'Created', 'Status', 'Lines queued', 'Lines rejected', 'Source'];
const DECISION_NAMES = ['approved', 'declined', 'filtered', 'no_score'] as const;
/** How often a running campaign's progress is read while its page is open. */
const POLL_MS = 3000;

/** Requests past the queue and the provider: answered, failed, expired or cancelled. */
function settled(c: CampaignCounts): number {
  return c.completed + c.submit_failed + c.expired + c.cancelled;
}

function total(c: CampaignCounts): number {
  return settled(c) + c.queued + c.submitting + c.submitted;
}

/** The campaigns (GET /v1/campaigns), newest first; one opens its page below the list. */
export function Campaigns({ tick }: { tick: number }) {
  const [list, setList] = useState<Answer<{ items: CampaignSummary[]; nextCursor: string | null }> | null>(null);
  const [open, setOpen] = useState<string | null>(null);

  useEffect(() => {
    let current = true;
    void listCampaigns().then((out) => {
      if (current) setList(out);
    });
    return () => {
      current = false;
    };
  }, [tick]);

  return (
    <section class="panel" id="campaigns" data-testid="campaigns">
      <h2>Campaigns</h2>
      {!list && <p class="muted">Loading…</p>}
      {list && !list.ok && <Failure answer={list} what="campaigns" />}
      {list?.ok &&
        (list.data.items.length === 0 ? (
          <p class="muted">None yet: POST a file of submits to /v1/campaigns (NDJSON or CSV).</p>
        ) : (
          <table data-testid="campaign-list">
            <TableHead columns={LIST_COLUMNS} />
            <tbody>
              {list.data.items.map((c) => (
                <tr data-campaign={c.id}>
                  <td>
                    <button type="button" class="link" onClick={() => setOpen(c.id)}>
                      {c.id}
                    </button>
                  </td>
                  <td>{when(c.createdAt)}</td>
                  <td>
                    <span class={`status campaign-${c.status}`}>{c.status}</span>
                  </td>
                  <td>{count(c.accepted)}</td>
                  <td>{count(c.rejectedTotal)}</td>
                  <td>{c.source.toUpperCase()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
      {open && <CampaignPanel id={open} tick={tick} onClose={() => setOpen(null)} />}
    </section>
  );
}

/** One campaign: progress, rate and time left, decisions so far, rejected lines, its results and its cancel. */
export function CampaignPanel({ id, tick, onClose }: { id: string; tick: number; onClose: () => void }) {
  const [view, setView] = useState<Answer<CampaignView> | null>(null);
  const [again, setAgain] = useState(0);
  const [confirming, setConfirming] = useState(false);
  const [said, setSaid] = useState<string | null>(null);

  useEffect(() => {
    setView(null);
    setConfirming(false);
    setSaid(null);
  }, [id]);

  useEffect(() => {
    let current = true;
    void getCampaign(id).then((out) => {
      if (current) setView(out);
    });
    return () => {
      current = false;
    };
  }, [id, tick, again]);

  // While it runs, its progress is read every few seconds (the page's own refresh is slower).
  const running = view?.ok === true && view.data.status === 'running';
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(() => setAgain((n) => n + 1), POLL_MS);
    return () => clearTimeout(timer);
  }, [view]);

  const cancel = async () => {
    setConfirming(false);
    const out = await cancelCampaign(id);
    setSaid(out.ok ? `Cancelled: ${count(out.data.cancelled)} queued request${out.data.cancelled === 1 ? '' : 's'} will not be sent.` : `Cancel: ${out.message}`);
    setAgain((n) => n + 1);
  };
  const download = async (format: 'csv' | 'ndjson') => {
    const out = await downloadResults(id, format);
    if (!out.ok) setSaid(`Download: ${out.message}`);
  };

  const c = view?.ok ? view.data : undefined;
  const all = c ? total(c.counts) : 0;
  const done = c ? settled(c.counts) : 0;
  const percent = all === 0 ? 100 : Math.floor((100 * done) / all);
  return (
    <div class="campaign" data-testid="campaign" aria-label={`Campaign ${id}`}>
      <div class="panel-head">
        <h3>
          Campaign <code>{id}</code>
        </h3>
        <button type="button" class="secondary" onClick={onClose}>
          Close
        </button>
      </div>
      {said && (
        <p class="note" role="status" data-testid="campaign-said">
          {said}
        </p>
      )}
      {!view && <p class="muted">Loading…</p>}
      {view && !view.ok && (view.kind === 'not_found' ? <p class="note">No such campaign (purged, or never stored).</p> : <Failure answer={view} what="campaign" />)}
      {c && (
        <>
          <p>
            <span class={`status campaign-${c.status}`} data-testid="campaign-status">
              {c.status}
            </span>{' '}
            {c.source.toUpperCase()} uploaded {when(c.uploadedAt)} by <code>{c.createdBy}</code>
            {c.uploadError && <span class="problem">Upload failed: {c.uploadError}</span>}
          </p>
          <progress class="progress" max={Math.max(all, 1)} value={all === 0 ? 1 : done} aria-label="Settled requests" data-testid="campaign-progress" />
          <p data-testid="campaign-figures">
            {count(done)} of {count(all)} settled ({percent}%) · {count(c.counts.queued)} queued · {count(c.counts.submitting + c.counts.submitted)} with the provider ·{' '}
            {c.ratePerS} /s · {c.etaS === null ? `time left ${DASH}` : `time left ${duration(c.etaS)}`}
          </p>
          <table data-testid="campaign-counts">
            <TableHead columns={['Completed', ...DECISION_NAMES, 'Failed', 'Expired', 'Cancelled']} />
            <tbody>
              <tr>
                <td>{count(c.counts.completed)}</td>
                {DECISION_NAMES.map((d) => (
                  <td>{count(c.counts[d])}</td>
                ))}
                <td>{count(c.counts.submit_failed)}</td>
                <td>{count(c.counts.expired)}</td>
                <td>{count(c.counts.cancelled)}</td>
              </tr>
            </tbody>
          </table>
          <div class="campaign-actions">
            <ResultsLink id={id} format="csv" onDownload={download} /> <ResultsLink id={id} format="ndjson" onDownload={download} />{' '}
            {c.status === 'running' &&
              (confirming ? (
                <>
                  <button type="button" class="danger" onClick={cancel}>
                    Cancel {count(c.counts.queued)} queued requests
                  </button>{' '}
                  <button type="button" class="secondary" onClick={() => setConfirming(false)}>
                    Keep running
                  </button>
                </>
              ) : (
                <button type="button" class="secondary" onClick={() => setConfirming(true)}>
                  Cancel campaign…
                </button>
              ))}
          </div>
          <h3>Rejected lines ({count(c.rejectedTotal)})</h3>
          {c.rejectedTotal === 0 ? (
            <p class="muted">None.</p>
          ) : (
            <>
              {c.rejectedTotal > c.rejected.length && <p class="muted">The first {count(c.rejected.length)} are kept.</p>}
              <table data-testid="campaign-rejected">
                <TableHead columns={['Line', 'Field', 'Why']} />
                <tbody>
                  {c.rejected.flatMap((r) =>
                    r.issues.map((issue, i) => (
                      <tr>
                        <td>{i === 0 ? r.line : ''}</td>
                        <td>
                          <code>{issue.path || DASH}</code>
                        </td>
                        <td>{issue.message}</td>
                      </tr>
                    )),
                  )}
                </tbody>
              </table>
            </>
          )}
        </>
      )}
    </div>
  );
}

/** A link to the results file when no key is needed; with a key, a button that downloads it with the key. */
function ResultsLink({ id, format, onDownload }: { id: string; format: 'csv' | 'ndjson'; onDownload: (format: 'csv' | 'ndjson') => void }) {
  const label = `Download results (${format.toUpperCase()})`;
  if (storedKey() === null) {
    return (
      <a class="button-link" href={resultsPath(id, format)} download={`${id}-results.${format}`}>
        {label}
      </a>
    );
  }
  return (
    <button type="button" class="secondary" onClick={() => onDownload(format)}>
      {label}
    </button>
  );
}
