import { useEffect, useState } from 'preact/hooks';
import { type Answer, type CustomerView, type EventView, getCustomer, listEvents, type Page, type RequestView } from './api.js';
import { DASH, when } from './format.js';
import { EVENT_COLUMNS, EventRow, Failure, pretty, Raw, RequestTable, TableHead } from './parts.js';

/** One customer: its requests (newest first) with results, its unmatched callbacks and its events with their deliveries. */
export function CustomerPanel({ customerUuid, tick, onClose }: { customerUuid: string; tick: number; onClose: () => void }) {
  const [view, setView] = useState<Answer<CustomerView> | null>(null);
  const [events, setEvents] = useState<Answer<Page<EventView>> | null>(null);

  useEffect(() => {
    setView(null);
    setEvents(null);
  }, [customerUuid]);

  useEffect(() => {
    let current = true;
    void Promise.all([getCustomer(customerUuid), listEvents({ customerUuid, limit: 100 })]).then(([v, e]) => {
      if (!current) return;
      setView(v);
      setEvents(e);
    });
    return () => {
      current = false;
    };
  }, [customerUuid, tick]);

  const requests: RequestView[] = view?.ok ? [view.data, ...view.data.history] : [];
  return (
    <section class="panel customer" data-testid="customer" aria-label={`Customer ${customerUuid}`}>
      <div class="panel-head">
        <h2>
          Customer <code>{customerUuid}</code>
        </h2>
        <button type="button" class="secondary" onClick={onClose}>
          Close
        </button>
      </div>
      {!view && <p class="muted">Loading…</p>}
      {view && !view.ok && (view.kind === 'not_found' ? <p class="note">No request for this customerUuid.</p> : <Failure answer={view} what="customer" />)}
      {view?.ok && (
        <>
          <h3>Requests</h3>
          <RequestTable requests={requests} testId="customer-requests" />
          {requests.map((r, i) => (
            <div class="detail">
              <span class="muted">
                {i === 0 ? 'Newest request' : 'Earlier request'}, submitted {when(r.submittedAt)}:
              </span>
              {r.result ? <Raw label="result" text={pretty(r.result)} /> : <span class="muted"> no result yet</span>}
              {r.srd && <Raw label="reported income and address (srd)" text={pretty(r.srd)} />}
            </div>
          ))}
          <h3>Unmatched callbacks</h3>
          {view.data.unmatched.length === 0 ? (
            <p class="muted">None.</p>
          ) : (
            <ul class="plain">
              {view.data.unmatched.map((u) => (
                <li>
                  received {when(u.receivedAt)} <Raw label="body" text={u.result ? pretty(u.result) : DASH} />
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      <h3>Events</h3>
      {events && !events.ok && <Failure answer={events} what="events" />}
      {events?.ok &&
        (events.data.items.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <table data-testid="customer-events">
            <TableHead columns={EVENT_COLUMNS} />
            <tbody>
              {events.data.items.map((e) => (
                <EventRow event={e} />
              ))}
            </tbody>
          </table>
        ))}
    </section>
  );
}
