import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { notFound } from '../http/errors.js';
import { cursorCodec } from '../http/cursor.js';
import type { KeyDigester } from '../requests/key-digest.js';
import type { Sealer } from '../submissions/seal.js';
import { submitBodySchema } from '../submissions/schemas.js';
import { DEFAULT_PAGE, RESULT_COLUMNS } from './schemas.js';
import { cancelCampaign, listCampaigns, readCampaignRow } from './sql.js';
import type { CampaignMetrics } from './metrics.js';
import { campaignUploader } from './upload.js';
import { campaignView, csvHeader, csvLine, listItem, ndjsonLine, resultChunks } from './views.js';

export interface CampaignDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** CPF_HASH_KEY: hashes the lines' CPFs and signs the list's cursors. */
  cpfHashKey: string;
  /** What an Idempotency-Key is stored as (requests/key-digest.ts). */
  keyDigests: KeyDigester;
  /** CUSTOMER_UUID_ALLOW_CPF, as the submit's own body schema takes it. */
  customerUuidAllowCpf: boolean;
  /** The submit queue's: the sealer of queued bodies, and the forwarder to wake once a batch is queued. */
  queue: { sealer: Sealer; wake(): void };
  /** The campaign counters and gauges (underwriting_campaign_*). */
  metrics: CampaignMetrics;
}

const unknownCampaign = (id: string) => notFound(`no campaign ${id}`);

/** Campaigns: the upload that queues a file's submits, their lists and progress, their results as a file, cancelling. */
export function campaignService(deps: CampaignDeps) {
  const { db } = deps;
  const cursors = cursorCodec(deps.cpfHashKey);
  const upload = campaignUploader({
    db,
    clock: deps.clock,
    schema: submitBodySchema(deps.customerUuidAllowCpf),
    cpfHashKey: deps.cpfHashKey,
    keyDigests: deps.keyDigests,
    sealer: deps.queue.sealer,
    wake: deps.queue.wake,
    metrics: deps.metrics,
  });

  return {
    upload,

    async list(limit: number = DEFAULT_PAGE, cursor: string | undefined) {
      const rows = await listCampaigns(db, cursor === undefined ? undefined : cursors.decode(cursor), limit);
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      const now = deps.clock();
      return {
        items: page.map((row) => listItem(row, now)),
        nextCursor: rows.length > limit && last ? cursors.encode({ t: last.position_t, id: last.id }) : null,
      };
    },

    /** One campaign's progress; 404 when there is none. */
    async read(id: string) {
      const row = await readCampaignRow(db, id);
      if (!row) throw unknownCampaign(id);
      return campaignView(db, row, deps.clock());
    },

    /** A campaign's results as the chunks of a CSV or NDJSON file, and the file's name; 404 when there is no such campaign. */
    async results(id: string, ndjson: boolean): Promise<{ name: string; file: AsyncGenerator<string> }> {
      const row = await readCampaignRow(db, id);
      if (!row) throw unknownCampaign(id);
      const chunks = resultChunks(db, row.id, ndjson ? (lines) => lines.map(ndjsonLine).join('') : (lines) => lines.map((l) => csvLine(l, RESULT_COLUMNS)).join(''));
      async function* file() {
        if (!ndjson) yield csvHeader(RESULT_COLUMNS);
        yield* chunks;
      }
      return { name: `${row.public_id}-results.${ndjson ? 'ndjson' : 'csv'}`, file: file() };
    },

    /** What is still queued ends cancelled; 404 when there is no such campaign. */
    async cancel(id: string): Promise<{ cancelled: number }> {
      const done = await cancelCampaign(db, id, deps.clock());
      if (!done) throw unknownCampaign(id);
      return done;
    },
  };
}
export type CampaignService = ReturnType<typeof campaignService>;
