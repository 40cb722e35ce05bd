import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { cpfHasher } from '../cpf.js';
import type { Tables } from '../db/types.js';
import type { AppDeliveryHandoff } from '../events/handoff.js';
import type { IngestLoad } from '../timing/ingest-load.js';
import type { CallbackMetrics } from './metrics.js';
import { keepMaskingBodies } from './body-mask-pass.js';
import { callbackReceiver } from './receiver.js';

export interface CallbackServiceDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  metrics: CallbackMetrics;
  /** Tells the long-polls (on every instance) that a customer's result is stored. */
  announce(customerUuid: string): void;
  /** CORRELATION_SKEW_S. */
  skewS: number;
  handoff: AppDeliveryHandoff;
  /** Callbacks being answered now: the event push yields to a burst of them. */
  ingest: IngestLoad;
  /** CUSTOMER_UUID_ALLOW_CPF: off, a callback naming a CPF as customerUuid is kept as invalid. */
  customerUuidAllowCpf: boolean;
  /**
   * Every CPF_HASH_KEY: a CPF masked in a callback's bytes is kept as its hash under each, so that
   * erasure by customerUuid finds it through requests hashed under a key a rotation put second.
   */
  cpfHashKeys: readonly string[];
}

/** The callback route's work: the receiver (stored before it is answered), the clock, its metrics and the ingest load it counts in. */
export function callbackService(deps: CallbackServiceDeps) {
  const hashers = deps.cpfHashKeys.map((key) => cpfHasher(key));
  const cpfHash = (cpf: string) => hashers.map((hash) => hash(cpf));
  return {
    receiver: callbackReceiver({
      db: deps.db,
      metrics: deps.metrics,
      announce: deps.announce,
      recording: { skewS: deps.skewS, handoff: deps.handoff },
      customerUuidAllowCpf: deps.customerUuidAllowCpf,
      cpfHash,
    }),
    /** Masks the CPFs in callbacks an earlier version stored, in the background, now and hourly (callbacks/body-mask-pass.ts). */
    maskEarlierBodies: (log: FastifyBaseLogger, signal: AbortSignal) => keepMaskingBodies({ db: deps.db, cpfHash, now: deps.clock, log, signal }),
    metrics: deps.metrics,
    clock: deps.clock,
    ingest: deps.ingest,
  };
}
export type CallbackService = ReturnType<typeof callbackService>;
