import { useEffect, useState } from 'preact/hooks';
import { type Answer, getReady, getStats, listRecent, onAnswer, type Page, type Range, type RequestView, type Stats, storedKey, storeKey } from './api.js';
import { Campaigns } from './campaigns.js';
import { Charts } from './charts.js';
import { CustomerPanel } from './customer.js';
import { Endpoints } from './endpoints.js';
import { when } from './format.js';
import { Lists } from './lists.js';
import { Failure, RequestTable } from './parts.js';
import { Search } from './search.js';
import { Tiles } from './tiles.js';

/** How often the page reads the gateway again while it is visible. */
export const REFRESH_MS = 15_000;
/** How often it asks /readyz while the gateway or the database is unreachable. */
const RETRY_MS = 2_000;
const RECENT = 10;

type Health = 'unknown' | 'ok' | 'database' | 'gateway';

const RANGES = {
  '24h': { label: 'Last 24 hours, by hour', ms: 24 * 3600_000, bucket: 'hour' },
  '7d': { label: 'Last 7 days, by day', ms: 7 * 86400_000, bucket: 'day' },
  '30d': { label: 'Last 30 days, by day', ms: 30 * 86400_000, bucket: 'day' },
} as const;
type RangeName = keyof typeof RANGES;

function rangeOf(name: RangeName): Range {
  const { ms, bucket } = RANGES[name];
  const until = new Date();
  // Whole buckets: the range starts at the top of an hour (or a UTC day).
  const since = new Date(until.getTime() - ms);
  if (bucket === 'hour') since.setUTCMinutes(0, 0, 0);
  else since.setUTCHours(0, 0, 0, 0);
  return { since: since.toISOString(), until: until.toISOString(), bucket };
}

export function App() {
  const [tick, setTick] = useState(0);
  const [health, setHealth] = useState<Health>('unknown');
  const [needKey, setNeedKey] = useState(false);
  const [hasKey, setHasKey] = useState(storedKey() !== null);
  const [range, setRange] = useState<RangeName>('24h');
  const [stats, setStats] = useState<Answer<Stats> | null>(null);
  const [refreshedAt, setRefreshedAt] = useState<string | null>(null);
  const [customer, setCustomer] = useState<string | null>(null);
  const [recent, setRecent] = useState<Answer<Page<RequestView>> | null>(null);

  const refresh = () => setTick((n) => n + 1);

  useEffect(
    () =>
      onAnswer((kind) => {
        if (kind === 'unauthorized') setNeedKey(true);
        if (kind === 'network') setHealth('gateway');
      }),
    [],
  );

  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') refresh();
    }, REFRESH_MS);
    return () => clearInterval(timer);
  }, []);

  // While the gateway or its database is down, everything is read again every few seconds (not
  // /readyz alone: it stays 503 after the database is back until a route's query has succeeded).
  const down = health === 'database' || health === 'gateway';
  useEffect(() => {
    if (!down) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') refresh();
    }, RETRY_MS);
    return () => clearInterval(timer);
  }, [down]);

  useEffect(() => {
    let current = true;
    // The health line follows /readyz alone: a slow statistics query must not hold it back.
    void getReady().then((ready) => {
      if (current) setHealth(ready.ok ? 'ok' : ready.kind === 'network' ? 'gateway' : 'database');
    });
    void (async () => {
      const [figures, latest] = await Promise.all([getStats(rangeOf(range)), listRecent(RECENT)]);
      if (!current) return;
      setStats(figures);
      setRecent(latest);
      setRefreshedAt(new Date().toISOString());
    })();
    return () => {
      current = false;
    };
  }, [tick, range]);

  const useKey = (key: string) => {
    storeKey(key);
    setHasKey(true);
    setNeedKey(false);
    refresh();
  };
  const forgetKey = () => {
    storeKey(null);
    setHasKey(false);
    refresh();
  };

  return (
    <div class="page">
      <header class="top">
        <h1>underwriting-gateway</h1>
        <span class={`health health-${health}`} role="status" data-testid="health">
          {health === 'ok'
            ? 'Gateway and database up'
            : health === 'database'
              ? 'The database is unreachable: the gateway answers, but cannot read or store anything'
              : health === 'gateway'
                ? 'The gateway is unreachable: no answer from it'
                : 'Checking the gateway…'}
        </span>
        <span class="refreshed">Refreshed {refreshedAt ? when(refreshedAt) : '—'}</span>
        <button type="button" onClick={refresh}>
          Refresh
        </button>
        {hasKey && (
          <button type="button" class="secondary" onClick={forgetKey}>
            Forget key
          </button>
        )}
      </header>

      {needKey && <KeyForm onKey={useKey} retry={hasKey} />}

      <Tiles stats={stats} />

      <section class="panel">
        <div class="panel-head">
          <h2>Decisions and turnaround</h2>
          <label>
            Range{' '}
            <select value={range} onChange={(e) => setRange((e.currentTarget as HTMLSelectElement).value as RangeName)}>
              {Object.entries(RANGES).map(([name, r]) => (
                <option value={name}>{r.label}</option>
              ))}
            </select>
          </label>
        </div>
        <Charts stats={stats} bucket={RANGES[range].bucket} />
      </section>

      <Search onOpen={setCustomer} />
      {customer && <CustomerPanel customerUuid={customer} tick={tick} onClose={() => setCustomer(null)} />}
      <section class="panel">
        <h2>Latest requests</h2>
        {recent && !recent.ok && <Failure answer={recent} what="requests" />}
        {recent?.ok &&
          (recent.data.items.length === 0 ? (
            <p class="muted">None yet.</p>
          ) : (
            <RequestTable requests={recent.data.items} onOpen={setCustomer} testId="recent" />
          ))}
      </section>
      <Campaigns tick={tick} />
      <Lists tick={tick} deadCount={stats?.ok ? stats.data.now.events.dead : undefined} onOpen={setCustomer} />
      <Endpoints tick={tick} />
    </div>
  );
}

function KeyForm({ onKey, retry }: { onKey: (key: string) => void; retry: boolean }) {
  const [key, setKey] = useState('');
  return (
    <form
      class="panel keyform"
      onSubmit={(e) => {
        e.preventDefault();
        if (key.trim()) onKey(key.trim());
      }}
    >
      <h2>API key</h2>
      <p>
        {retry ? 'The gateway refused that key. ' : ''}This gateway asks for a key (<code>QUERY_API_KEYS</code>). It is kept
        in this tab's session storage only and sent as <code>Authorization: Bearer</code>.
      </p>
      <label>
        Key{' '}
        <input
          type="password"
          name="api-key"
          autocomplete="off"
          value={key}
          onInput={(e) => setKey((e.currentTarget as HTMLInputElement).value)}
        />
      </label>{' '}
      <button type="submit">Use key</button>
    </form>
  );
}
