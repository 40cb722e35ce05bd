import { useEffect, useState } from 'preact/hooks';
import { type Answer, type CallbackView, type DeadScan, type EventView, getEvent, listCallbacks, listDeadEvents, redeliver, redeliverDead, SCAN_PAGES } from './api.js';
import { DASH, when } from './format.js';
import { EVENT_COLUMNS, EventRow, Failure, Raw, TableHead } from './parts.js';

type Tab = 'unmatched' | 'invalid' | 'dead';
const TABS: Record<Tab, string> = { unmatched: 'Unmatched callbacks', invalid: 'Invalid callbacks', dead: 'Dead events' };

/** `deadCount`: the dead deliveries /v1/stats counts, so the dead-event scan can stop once it has them all. */
export function Lists({ tick, deadCount, onOpen }: { tick: number; deadCount: number | undefined; onOpen: (customerUuid: string) => void }) {
  const [tab, setTab] = useState<Tab>('unmatched');
  return (
    <section class="panel">
      <div class="tabs" role="tablist">
        {(Object.keys(TABS) as Tab[]).map((t) => (
          <button type="button" role="tab" aria-selected={tab === t} class={tab === t ? 'tab tab-on' : 'tab'} onClick={() => setTab(t)}>
            {TABS[t]}
          </button>
        ))}
      </div>
      {tab === 'dead' ? <DeadEvents tick={tick} expected={deadCount} /> : <Callbacks key={tab} kind={tab} tick={tick} onOpen={onOpen} />}
    </section>
  );
}

/** Unmatched or invalid callbacks, newest first; the refresh re-reads the first page unless more were loaded. */
function Callbacks({ kind, tick, onOpen }: { kind: 'unmatched' | 'invalid'; tick: number; onOpen: (customerUuid: string) => void }) {
  const [items, setItems] = useState<CallbackView[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [failure, setFailure] = useState<Answer<unknown> | null>(null);
  const [pages, setPages] = useState(1);

  useEffect(() => {
    if (pages > 1) return;
    let current = true;
    void listCallbacks(kind).then((out) => {
      if (!current) return;
      setFailure(out.ok ? null : out);
      setItems(out.ok ? out.data.items : []);
      setNext(out.ok ? out.data.nextCursor : null);
    });
    return () => {
      current = false;
    };
  }, [kind, tick, pages]);

  const more = async () => {
    if (!next) return;
    const out = await listCallbacks(kind, next);
    if (!out.ok) return setFailure(out);
    setItems((old) => [...old, ...out.data.items]);
    setNext(out.data.nextCursor);
    setPages((n) => n + 1);
  };

  if (failure) return <Failure answer={failure} what={`${kind} callbacks`} />;
  return (
    <div data-testid={`callbacks-${kind}`}>
      {items.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <table>
          <TableHead columns={['Received', 'customerUuid', kind === 'invalid' ? 'Problem' : '', 'Raw body']} />
          <tbody>
            {items.map((c) => (
              <tr data-callback={String(c.id)}>
                <td>{when(c.receivedAt)}</td>
                <td>
                  {c.customerUuid ? (
                    <button type="button" class="link" onClick={() => onOpen(c.customerUuid as string)}>
                      {c.customerUuid}
                    </button>
                  ) : (
                    DASH
                  )}
                </td>
                <td>{c.problem ?? ''}</td>
                <td>
                  <Raw label="raw body" text={c.rawBody ?? ''} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next && (
        <button type="button" class="secondary" onClick={() => void more()}>
          Load more
        </button>
      )}
    </div>
  );
}

/** While a redelivered event still has a pending delivery, it is read this often. */
const FOLLOW_MS = 2_000;

/**
 * Events with a dead delivery, each with a redeliver button, and one button for all of them.
 * A redelivered event leaves the dead list; it stays in view, read again, until its deliveries settle.
 */
function DeadEvents({ tick, expected }: { tick: number; expected: number | undefined }) {
  const [dead, setDead] = useState<Answer<DeadScan> | null>(null);
  const [said, setSaid] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [again, setAgain] = useState(0);
  const [followed, setFollowed] = useState<string[]>([]);
  const [redelivered, setRedelivered] = useState<EventView[]>([]);

  useEffect(() => {
    let current = true;
    void listDeadEvents(expected).then((out) => current && setDead(out));
    void Promise.all(followed.map(getEvent)).then((outs) => {
      if (current) setRedelivered(outs.flatMap((o) => (o.ok ? [o.data] : [])));
    });
    return () => {
      current = false;
    };
  }, [tick, again, followed, expected]);

  const unsettled = redelivered.some((e) => e.deliveries.some((d) => d.status === 'pending'));
  useEffect(() => {
    if (!unsettled) return;
    const timer = setTimeout(() => setAgain((n) => n + 1), FOLLOW_MS);
    return () => clearTimeout(timer);
  }, [unsettled, redelivered]);

  const one = async (id: string) => {
    const out = await redeliver(id);
    setSaid(out.ok ? `Event ${id} queued for delivery again.` : `Event ${id}: ${out.message}`);
    if (out.ok) setFollowed((ids) => [id, ...ids.filter((x) => x !== id)].slice(0, 20));
    setAgain((n) => n + 1);
  };
  const all = async () => {
    setConfirming(false);
    const out = await redeliverDead();
    setSaid(out.ok ? `${out.data.queued} dead deliver${out.data.queued === 1 ? 'y' : 'ies'} queued again.` : `Redeliver: ${out.message}`);
    // The events in view are followed until their deliveries settle, as after one redeliver.
    if (out.ok && dead?.ok) {
      const ids = dead.data.events.map((e) => e.id);
      setFollowed((was) => [...ids, ...was.filter((x) => !ids.includes(x))].slice(0, 20));
    }
    setAgain((n) => n + 1);
  };

  if (!dead) return <p class="muted">Loading…</p>;
  if (!dead.ok) return <Failure answer={dead} what="dead events" />;
  return (
    <div data-testid="dead-events">
      <p class="muted">
        Why they died, per receiver: <a href="#endpoints">Endpoints</a> (health, pause, rotate secret, replay).
      </p>
      {said && (
        <p class="said" role="status">
          {said}
        </p>
      )}
      {dead.data.cut && (
        <p class="note" data-testid="dead-cut">
          The event feed has no delivery-status filter: this list comes from the oldest {dead.data.scanned} events ({SCAN_PAGES}{' '}
          pages) and may miss newer dead ones. Redeliver all still queues every dead delivery.
        </p>
      )}
      {dead.data.events.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <>
          <p>
            {confirming ? (
              <>
                <button type="button" class="danger" onClick={() => void all()}>
                  Yes, redeliver every dead delivery
                </button>{' '}
                <button type="button" class="secondary" onClick={() => setConfirming(false)}>
                  Cancel
                </button>
              </>
            ) : (
              <button type="button" onClick={() => setConfirming(true)}>
                Redeliver all dead events
              </button>
            )}
          </p>
          <table>
            <TableHead columns={[...EVENT_COLUMNS, '']} />
            <tbody>
              {dead.data.events.map((e) => (
                <EventRow
                  event={e}
                  action={
                    <button type="button" onClick={() => void one(e.id)}>
                      Redeliver
                    </button>
                  }
                />
              ))}
            </tbody>
          </table>
        </>
      )}
      {redelivered.length > 0 && (
        <>
          <h3>Redelivered</h3>
          <table data-testid="redelivered">
            <tbody>
              {redelivered.map((e) => (
                <EventRow event={e} />
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}
