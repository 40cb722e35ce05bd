import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { Answer, Delivery, EventView, RequestView } from './api.js';
import { count, DASH, json, when } from './format.js';
import { maskCpfLike } from './mask.js';

/** Text the gateway stored as it came (bodies, results): shown on demand, CPF-like runs masked. */
export function Raw({ label, text }: { label: string; text: string }) {
  const [open, setOpen] = useState(false);
  return (
    <div class="raw">
      <button type="button" class="link" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? `Hide ${label}` : `View ${label}`}
      </button>
      {open && <pre class="raw-body">{maskCpfLike(text)}</pre>}
    </div>
  );
}

export const pretty = (value: unknown) => maskCpfLike(json(value));

/** What a failed read says in place of its data: quiet for a route this gateway does not have. */
export function Failure({ answer, what }: { answer: Answer<unknown>; what: string }) {
  if (answer.ok) return null;
  const text =
    answer.kind === 'missing'
      ? `${DASH} (${what}: not available on this gateway)`
      : answer.kind === 'unauthorized'
        ? `${DASH} (${what}: needs an API key)`
        : `${what}: ${answer.message}`;
  return <p class={`note note-${answer.kind}`}>{text}</p>;
}

export function DecisionBadge({ decision }: { decision: string | null }) {
  return decision ? <span class={`badge badge-${decision}`}>{decision}</span> : <span class="muted">{DASH}</span>;
}

function RequestRow({ request, onOpen }: { request: RequestView; onOpen?: (customerUuid: string) => void }) {
  const r = request.result?.response;
  return (
    <tr>
      <td>
        {onOpen ? (
          <button type="button" class="link" onClick={() => onOpen(request.customerUuid)}>
            {request.customerUuid}
          </button>
        ) : (
          request.customerUuid
        )}
      </td>
      <td>{when(request.submittedAt)}</td>
      <td>
        <span class={`status status-${request.status}`}>{request.status}</span>
      </td>
      <td>
        <DecisionBadge decision={request.decision} />
      </td>
      <td>{request.cpfMasked}</td>
      <td>{r ? count(r.score) : DASH}</td>
      <td>{r ? count(r.riskBand) : DASH}</td>
      <td>{r ? count(r.limit) : DASH}</td>
      <td>{when(request.completedAt)}</td>
      <td>{request.upstreamStatus ?? DASH}</td>
    </tr>
  );
}

/** A table's header row, a cell per column ('' for a column without a name, such as an action's). */
export function TableHead({ columns }: { columns: readonly string[] }) {
  return (
    <thead>
      <tr>
        {columns.map((column) => (
          <th>{column}</th>
        ))}
      </tr>
    </thead>
  );
}

const REQUEST_COLUMNS = ['customerUuid', 'Submitted', 'Status', 'Decision', 'CPF', 'Score', 'Risk band', 'Limit', 'Completed', 'Upstream'];
/** The columns of an EventRow without an action. */
export const EVENT_COLUMNS = ['Event', 'Type', 'Customer', 'At', 'Deliveries'];

/** Requests, a row each; with onOpen, a customerUuid opens its customer. */
export function RequestTable({
  requests,
  onOpen,
  testId,
}: {
  requests: RequestView[];
  onOpen?: (customerUuid: string) => void;
  testId?: string;
}) {
  return (
    <table data-testid={testId}>
      <TableHead columns={REQUEST_COLUMNS} />
      <tbody>
        {requests.map((r) => (
          <RequestRow request={r} onOpen={onOpen} />
        ))}
      </tbody>
    </table>
  );
}

export function Deliveries({ deliveries }: { deliveries: Delivery[] }) {
  if (!deliveries.length) return <span class="muted">no deliveries</span>;
  return (
    <ul class="deliveries">
      {deliveries.map((d) => (
        <li>
          <span class={`delivery delivery-${d.status}`}>{d.status}</span> {d.url} · {d.attempts} attempt{d.attempts === 1 ? '' : 's'}
          {d.lastAttemptAt ? ` · last ${when(d.lastAttemptAt)}` : ''}
          {d.lastStatus !== null ? ` · HTTP ${d.lastStatus}` : ''}
          {d.lastError ? ` · ${d.lastError}` : ''}
        </li>
      ))}
    </ul>
  );
}

export function EventRow({ event, action }: { event: EventView; action?: ComponentChildren }) {
  return (
    <tr data-event={event.id}>
      <td>
        <code>{event.id}</code>
      </td>
      <td>{event.type}</td>
      <td>{'customerUuid' in event.data ? event.data.customerUuid : event.data.endpointId}</td>
      <td>{when(event.timestamp)}</td>
      <td>
        <Deliveries deliveries={event.deliveries} />
        <Raw label="event data" text={json(event.data)} />
      </td>
      {action !== undefined && <td>{action}</td>}
    </tr>
  );
}
