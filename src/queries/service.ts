import type { Kysely } from 'kysely';
import { type Actor, keyFingerprint, recordAudit, subjectHasher } from '../audit/trail.js';
import type { NotificationChannel } from '../channels/channel.js';
import { hashCpfUnderEvery } from '../cpf.js';
import { groupCommit, type GroupCommitLimits } from '../db/group-commit.js';
import type { Tables } from '../db/types.js';
import { notFound } from '../http/errors.js';
import { scrubText } from '../observability/scrub.js';
import { cursorCodec } from '../http/cursor.js';
import type { QueryMetrics } from './metrics.js';
import { type CustomerView, DEFAULT_PAGE, type PageView } from './schemas.js';
import { type ListFilter, readCustomers, readPage } from './sql.js';

export interface QueryDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  results: Pick<NotificationChannel, 'wait'>;
  /** CPF_HASH_KEY's keys, newest first: the first signs cursors and hashes audit subjects; a lookup matches under every one. */
  cpfHashKeys: readonly string[];
  /** Set: a lookup's actor is the API key's fingerprint; empty: the peer's address. */
  queryApiKeys: readonly string[];
  metrics: QueryMetrics;
}

/**
 * Customer reads running at once, customers per read, and how long one waits to be sent: a read the
 * database has not taken 5 s after it was asked for answers 503 rather than queue on without bound.
 */
const CUSTOMER_READS: GroupCommitLimits = { inFlight: 2, batchSize: 32, maxQueuedMs: 5_000 };

/** Who asks: the bearer token presented (if any) and the peer's address. */
export interface Asker {
  bearer: string | undefined;
  ip: string;
}

/** The read routes' work: one customer (maybe waiting for its result), the list, the audited lookup by CPF. */
export function queryService(deps: QueryDeps) {
  const { db } = deps;
  const cursors = cursorCodec(deps.cpfHashKeys[0]!);
  const subjectOf = subjectHasher(deps.cpfHashKeys[0]!);
  // Who looked: the API key by its fingerprint, or the peer when the query routes have no keys.
  const actorOf = (asker: Asker): Actor => (deps.queryApiKeys.length > 0 ? keyFingerprint(asker.bearer ?? '') : `peer:${asker.ip}`);

  // The GETs that arrive while a read is running share the next one: one statement reads them all
  // (db/group-commit.ts, used for reads), as the callbacks' results are written.
  const customers = groupCommit((batch: readonly string[]) => readCustomers(db, batch), { limits: CUSTOMER_READS });

  const page = async (filter: ListFilter, limit: number | undefined, cursor: string | undefined): Promise<PageView> => {
    const after = cursor === undefined ? undefined : cursors.decode(cursor);
    const { items, next } = await readPage(db, filter, after, limit ?? DEFAULT_PAGE);
    return { items, nextCursor: next ? cursors.encode(next) : null };
  };

  return {
    /**
     * The customer's newest request; with waitS, held until it has a result (stored by any instance)
     * or waitS pass, or until `abandoned` says nobody awaits the answer any more.
     */
    customer(customerUuid: string, waitS: number, abandoned?: AbortSignal): Promise<CustomerView> {
      return deps.results.wait(customerUuid, waitS, {
        read: async () => {
          const view = await customers.add(customerUuid);
          if (!view) {
            // "lookup" is a valid customerUuid, so GET /v1/underwritings/lookup stays a customer read; but
            // when there is no such customer the caller almost surely meant the lookup by CPF.
            const hint = customerUuid === 'lookup' ? '; to find requests by CPF, POST /v1/underwritings/lookup with a JSON body {"cpf": "..."}' : '';
            // Named as a log would name it: a CPF typed as the customerUuid is not echoed back.
            throw notFound(`no underwriting request for customer ${scrubText(customerUuid)}${hint}`);
          }
          return view;
        },
        // Held until the newest request has a result (stored by any instance).
        ready: (view) => view.result !== null,
        onWaiting: (delta) => deps.metrics.waiters.inc(delta),
        abandoned,
      });
    },

    list: page,

    /** The requests of one CPF (under every CPF_HASH_KEY), audited: no answer leaves without its entry. */
    async lookup(cpf: string, limit: number | undefined, cursor: string | undefined, asker: Asker): Promise<PageView> {
      const found = await page({ cpfHashes: hashCpfUnderEvery(cpf, deps.cpfHashKeys) }, limit, cursor);
      // If the entry cannot be written, the lookup fails.
      await recordAudit(db, {
        at: deps.clock(),
        action: 'lookup',
        actor: actorOf(asker),
        subject: subjectOf({ cpf }),
        counts: { requests: found.items.length },
      });
      return found;
    },
  };
}
export type QueryService = ReturnType<typeof queryService>;
