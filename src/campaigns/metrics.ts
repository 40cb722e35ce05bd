import type { Kysely } from 'kysely';
import { Gauge, type Registry } from 'prom-client';
import type { CampaignStatus, Tables } from '../db/types.js';
import { CLUSTER_WIDE, outcomeCounter, scrapeSnapshot } from '../observability/metrics.js';
import { countCampaignsByStatus } from './sql.js';
import { UPLOAD_SILENT_MS } from './views.js';

// Campaigns in /metrics (docs/observability.md): the lines this instance read, by outcome, and the
// campaigns by status, read from the shared database at each scrape (cluster-wide, as the stats gauges).

/** What became of one line of an uploaded file (underwriting_campaign_lines_total's outcome). */
export type CampaignLineOutcome = 'accepted' | 'rejected';

export interface CampaignMetrics {
  lines(outcome: CampaignLineOutcome, n: number): void;
}

const STATUSES: readonly CampaignStatus[] = ['running', 'done', 'cancelled'];

export function campaignMetrics(registry: Registry, deps: { db: Kysely<Tables>; clock: () => Date }): CampaignMetrics {
  const lines = outcomeCounter(
    registry,
    'underwriting_campaign_lines_total',
    'Lines of campaign files this instance read, by outcome: accepted (queued as a submit) or rejected (invalid, or its customer in flight)',
  );
  // Both series from the first scrape (a rate() needs the 0 before the first line).
  for (const outcome of ['accepted', 'rejected'] as const) lines.inc({ outcome }, 0);

  const snapshot = scrapeSnapshot(() => countCampaignsByStatus(deps.db, new Date(deps.clock().getTime() - UPLOAD_SILENT_MS)));
  new Gauge({
    name: 'underwriting_campaigns',
    help: `Campaigns by status, as GET /v1/campaigns/:id shows it (running, done, cancelled); ${CLUSTER_WIDE}`,
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const rows = await snapshot();
      if (!rows) return;
      for (const status of STATUSES) this.set({ status }, rows.find((r) => r.status === status)?.n ?? 0);
    },
  });

  return { lines: (outcome, n) => lines.inc({ outcome }, n) };
}
