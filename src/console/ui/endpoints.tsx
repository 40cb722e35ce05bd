import { useEffect, useState } from 'preact/hooks';
import {
  type Answer,
  type EndpointView,
  listEndpoints,
  redeliverDeadTo,
  replayToEndpoint,
  rotateEndpointSecret,
  setEndpointStatus,
  storeAdminKey,
  storedAdminKey,
} from './api.js';
import { DASH, when } from './format.js';
import { Failure, TableHead } from './parts.js';

const COLUMNS = ['Endpoint', 'Status', 'Delivered', 'Failed', 'Dead', 'Success', 'Last attempt', ''];

/** Delivered among the deliveries that are settled or have failed at least once. */
function successRate(e: EndpointView): string {
  const tried = e.stats.delivered + e.stats.failed + e.stats.dead;
  return tried === 0 ? DASH : `${Math.round((100 * e.stats.delivered) / tried)}%`;
}

/**
 * The receivers of pushed events (/v1/endpoints): health, last attempts, success rate, why one
 * is disabled; pause or resume, redeliver its dead deliveries (POST /v1/events/redeliver, with the
 * query key), rotate its secret (shown once, here), replay from a time. These
 * routes need an admin key (ADMIN_API_KEYS), asked for here and kept in this tab's session only.
 */
export function Endpoints({ tick }: { tick: number }) {
  const [hasKey, setHasKey] = useState(storedAdminKey() !== null);
  const [list, setList] = useState<Answer<{ items: EndpointView[] }> | null>(null);
  const [said, setSaid] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null);
  const [again, setAgain] = useState(0);
  // The key is asked for only once the operator opens the section: most visitors hold no admin key.
  const [asking, setAsking] = useState(false);

  useEffect(() => {
    if (!hasKey) return;
    let current = true;
    void listEndpoints().then((out) => {
      if (current) setList(out);
    });
    return () => {
      current = false;
    };
  }, [tick, hasKey, again]);

  const refused = list !== null && !list.ok && list.kind === 'unauthorized';
  if (!hasKey || refused) {
    return (
      <section class="panel" id="endpoints" data-testid="endpoints">
        <h2>Endpoints</h2>
        {!asking && !refused ? (
          <button type="button" class="secondary" onClick={() => setAsking(true)}>
            Manage endpoints (admin key)
          </button>
        ) : (
        <AdminKeyForm
          retry={refused}
          onKey={(key) => {
            storeAdminKey(key);
            setList(null);
            setHasKey(true);
            setAgain((n) => n + 1);
          }}
        />
        )}
      </section>
    );
  }

  const act = async (what: string, run: () => Promise<Answer<unknown>>, done: (data: any) => string) => {
    const out = await run();
    setSaid(out.ok ? done(out.data) : `${what}: ${out.message}`);
    setAgain((n) => n + 1);
  };

  return (
    <section class="panel" id="endpoints" data-testid="endpoints">
      <div class="panel-head">
        <h2>Endpoints</h2>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            storeAdminKey(null);
            setHasKey(false);
            setList(null);
          }}
        >
          Forget admin key
        </button>
      </div>
      {said && (
        <p class="note" role="status" data-testid="endpoints-said">
          {said}
        </p>
      )}
      {secret && (
        <p class="note" data-testid="new-secret">
          New secret of {secret.id}, shown only now: <code>{secret.secret}</code> (the previous one keeps signing for a day).
        </p>
      )}
      {!list && <p class="muted">Loading…</p>}
      {list && !list.ok && <Failure answer={list} what="endpoints" />}
      {list?.ok &&
        (list.data.items.length === 0 ? (
          <p class="muted">None: set EVENT_WEBHOOK_URLS or POST /v1/endpoints.</p>
        ) : (
          <table>
            <TableHead columns={COLUMNS} />
            <tbody>
              {list.data.items.map((e) => (
                <tr data-endpoint={e.id}>
                  <td>
                    <code>{e.url}</code>
                    <div class="muted">
                      {e.managed === 'config' ? 'EVENT_WEBHOOK_URLS' : e.description || e.id}
                      {e.types ? ` · ${e.types.join(', ')}` : ''}
                      {e.rateLimitPerS ? ` · ${e.rateLimitPerS}/s` : ''}
                      {e.maxInFlight ? ` · at most ${e.maxInFlight} in flight` : ''}
                    </div>
                  </td>
                  <td class={`endpoint-${e.status}`}>
                    {e.status}
                    {e.disabledReason && <div class="muted">{e.disabledReason}</div>}
                  </td>
                  <td>{e.stats.delivered}</td>
                  <td>{e.stats.failed}</td>
                  <td>{e.stats.dead}</td>
                  <td>{successRate(e)}</td>
                  <td>
                    {e.stats.lastAttemptAt ? when(e.stats.lastAttemptAt) : DASH}
                    {e.stats.lastStatus !== null && <div class="muted">HTTP {e.stats.lastStatus}</div>}
                  </td>
                  <td>
                    <EndpointActions endpoint={e} act={act} onSecret={(s) => setSecret({ id: e.id, secret: s })} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
    </section>
  );
}

function EndpointActions({
  endpoint: e,
  act,
  onSecret,
}: {
  endpoint: EndpointView;
  act: (what: string, run: () => Promise<Answer<unknown>>, done: (data: any) => string) => Promise<void>;
  onSecret: (secret: string) => void;
}) {
  const [since, setSince] = useState('');
  const resume = e.status !== 'active';
  return (
    <div class="endpoint-actions">
      <button
        type="button"
        onClick={() => act(resume ? 'Resume' : 'Pause', () => setEndpointStatus(e.id, resume ? 'active' : 'paused'), () => `${e.url} ${resume ? 'resumed' : 'paused'}.`)}
      >
        {resume ? 'Resume' : 'Pause'}
      </button>{' '}
      {e.stats.dead > 0 && (
        <button
          type="button"
          class="secondary"
          onClick={() =>
            act('Redeliver dead', () => redeliverDeadTo(e.id), (data: { queued: number }) => `${data.queued} dead deliver${data.queued === 1 ? 'y' : 'ies'} queued again for ${e.url}.`)
          }
        >
          Redeliver dead
        </button>
      )}{' '}
      {e.managed === 'api' && (
        <button
          type="button"
          class="secondary"
          onClick={() =>
            act('Rotate secret', () => rotateEndpointSecret(e.id), (data: { secret: string }) => {
              onSecret(data.secret);
              return `${e.url}: secret rotated.`;
            })
          }
        >
          Rotate secret
        </button>
      )}
      <form
        onSubmit={(ev) => {
          ev.preventDefault();
          const at = new Date(since);
          if (!Number.isNaN(at.getTime())) {
            void act('Replay', () => replayToEndpoint(e.id, at.toISOString()), (data: { queued: number }) => `${data.queued} event${data.queued === 1 ? '' : 's'} queued for ${e.url}.`);
          }
        }}
      >
        <label>
          Replay since <input type="datetime-local" name="since" value={since} onInput={(ev) => setSince((ev.currentTarget as HTMLInputElement).value)} />
        </label>{' '}
        <button type="submit" class="secondary">
          Replay
        </button>
      </form>
    </div>
  );
}

function AdminKeyForm({ onKey, retry }: { onKey: (key: string) => void; retry: boolean }) {
  const [key, setKey] = useState('');
  return (
    <form
      class="keyform"
      onSubmit={(ev) => {
        ev.preventDefault();
        if (key.trim()) onKey(key.trim());
      }}
    >
      <p>
        {retry ? 'The gateway refused that admin key. ' : ''}Endpoints are managed with an admin key (<code>ADMIN_API_KEYS</code>), kept in
        this tab's session storage only and sent as <code>Authorization: Bearer</code>.
      </p>
      <label>
        Admin key{' '}
        <input type="password" name="admin-key" autocomplete="off" value={key} onInput={(ev) => setKey((ev.currentTarget as HTMLInputElement).value)} />
      </label>{' '}
      <button type="submit">Use admin key</button>
    </form>
  );
}
