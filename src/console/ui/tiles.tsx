import type { Answer, Stats } from './api.js';
import { count, DASH, duration, relative, when } from './format.js';

function Tile({ id, label, value, sub, alert }: { id: string; label: string; value: string; sub?: string; alert?: boolean }) {
  return (
    <div class={`tile${alert ? ' tile-alert' : ''}`} data-testid={`tile-${id}`}>
      <span class="tile-label">{label}</span>
      <span class="tile-value">{value}</span>
      <span class="tile-sub">{sub ?? '\u00a0'}</span>
    </div>
  );
}

export function Tiles({ stats }: { stats: Answer<Stats> | null }) {
  const now = stats?.ok ? stats.data.now : null;
  const token = now?.token ?? null;
  return (
    <section class="tiles" aria-label="The gateway now">
      <Tile id="pending" label="Pending" value={count(now?.pending)} sub="requests awaiting a callback" />
      <Tile id="oldest" label="Oldest pending" value={duration(now?.oldestPendingAgeS)} sub="waiting for its callback" />
      <Tile id="unmatched" label="Unmatched, 24 h" value={count(now?.unmatched24h)} sub="callbacks that matched no request" />
      <Tile id="invalid" label="Invalid, 24 h" value={count(now?.invalid24h)} sub="callbacks that failed validation" />
      <Tile
        id="dead"
        label="Dead events"
        value={count(now?.events.dead)}
        sub={now ? `${count(now.events.pending)} pending` : undefined}
        alert={(now?.events.dead ?? 0) > 0}
      />
      <Tile
        id="token"
        label="Token expiry"
        value={token === null ? DASH : token.configured ? relative(token.expiresAt) : 'not configured'}
        sub={token?.configured ? `renews ${when(token.renewAt)}` : undefined}
      />
      {stats && !stats.ok && stats.kind !== 'unauthorized' && (
        <p class="note" data-testid="stats-note">
          Statistics: {stats.message}
        </p>
      )}
    </section>
  );
}
