import type { FastifyBaseLogger, FastifyPluginAsync } from 'fastify';
import { Gauge } from 'prom-client';
import type { CapabilityDeps } from '../deps.js';
import { paceMetrics } from '../provider/metrics.js';
import { createPacer, type Pacer } from '../provider/pacing.js';
import { createUnderwritingClient, DEFAULT_PROVIDER_CONNECTIONS } from '../provider/underwriting-client.js';
import { type KeyDigester, keyDigester } from '../requests/key-digest.js';
import { keepDigestingKeys } from '../requests/key-digest-pass.js';
import { keepMaskingSrd } from './srd-mask-pass.js';
import { abandonedAfterMs } from '../requests/sql.js';
import { type Forwarder, startForwarder } from './forwarder.js';
import { type SubmitMetrics, submitMetrics } from './metrics.js';
import { sealerOf, type Sealer } from './seal.js';
import { submitter } from './submit.js';
import { submitWrites } from './writes.js';

/** What queues submits needs besides the database: the sealer of their bodies, and the forwarder to wake. */
export interface SubmitQueue {
  /** sealerOf(CPF_HASH_KEY's keys): pass it to enqueueSubmits. */
  sealer: Sealer;
  /** Call after enqueueSubmits committed: this instance's forwarder looks at once. */
  wake(): void;
}

/** The submit capability's services, built once by app.ts: the route receives them, the worker plugin runs them. */
export interface Submissions {
  submit: ReturnType<typeof submitter>;
  metrics: SubmitMetrics;
  queue: SubmitQueue;
  pacer: Pacer;
  /** What an Idempotency-Key is stored as (requests/key-digest.ts): a submit's and a campaign's. */
  keyDigests: KeyDigester;
  /** Starts the forwarder when the app is ready; at close stops claiming, waits for forwards in flight, closes the provider client. */
  worker: FastifyPluginAsync;
}

export function createSubmissions(deps: CapabilityDeps, log: FastifyBaseLogger): Submissions {
  const { config } = deps;
  const { db, pacingDb } = deps.database;
  const metrics = submitMetrics(deps.registry);
  const client = createUnderwritingClient({
    baseUrl: config.providerBaseUrl,
    partnerToken: config.partnerToken,
    timeoutMs: config.upstreamTimeoutMs,
    keepAliveMs: config.providerKeepAliveMs,
    // Never fewer than the calls the pace lets this instance have in flight: a call left waiting for a
    // connection would time out unsent, stored as "did not answer" (possibly received), never sent again.
    connections: Math.max(DEFAULT_PROVIDER_CONNECTIONS, config.providerPacing.maxInFlight),
    tokenSource: deps.tokenSource,
    observe: metrics.upstream,
  });
  const circuit = new Gauge({
    name: 'provider_circuit_open',
    help: '1 while this instance has seen the provider circuit open (no calls until a probe succeeds)',
    registers: [deps.registry],
  });
  const pacer = createPacer({
    // Its statements are planned once per connection (DatabaseHandle.pacingDb): they run per call.
    db: pacingDb,
    config: config.providerPacing,
    // A slot whose instance died is free again once its call would surely have ended.
    leaseMs: abandonedAfterMs(config.upstreamTimeoutMs),
    log,
    onCircuit: (open) => circuit.set(open ? 1 : 0),
  });
  paceMetrics(deps.registry, { db, config: config.providerPacing });
  const sealer = sealerOf(config.cpfHashKeys);
  const keyDigests = keyDigester(config.cpfHashKeys);
  let forwarder: Forwarder | undefined;
  const queue: SubmitQueue = { sealer, wake: () => forwarder?.wake() };
  const announce = (customerUuid: string) => deps.results.announce(customerUuid);
  const writes = submitWrites(db);
  const submit = submitter({
    db,
    writes,
    client,
    clock: deps.clock,
    cpfHashKey: config.cpfHashKey,
    keyDigests,
    partnerToken: config.partnerToken,
    upstreamTimeoutMs: config.upstreamTimeoutMs,
    pacer,
    queue,
    announce,
  });
  const worker: FastifyPluginAsync = async (app) => {
    const closing = new AbortController();
    let keyPass: { settled: () => Promise<void> } | undefined;
    let srdPass: { settled: () => Promise<void> } | undefined;
    app.addHook('onReady', async () => {
      // Keys stored as sent by a version before digests become digests, in the background, now and hourly.
      keyPass = keepDigestingKeys({ db, digests: keyDigests, now: deps.clock, log: app.log, signal: closing.signal });
      // srd text stored before the free-text rule read what it reads now is masked under it, the same way.
      srdPass = keepMaskingSrd({ db, now: deps.clock, log: app.log, signal: closing.signal });
      forwarder = startForwarder({
        // The pacer's pool: the forwarder's statements run per forwarded request, planned once.
        db: pacingDb,
        client,
        pacer,
        sealer,
        clock: deps.clock,
        log: app.log,
        partnerToken: config.partnerToken,
        tracer: deps.tracer,
        announce,
        counted: metrics.forwarded,
      });
    });
    // Claiming stops as soon as closing begins (not once the last long-poll has been answered);
    // the forwards in flight finish before the provider client closes.
    let stopped: Promise<void> | undefined;
    app.addHook('preClose', (done) => {
      closing.abort();
      stopped = forwarder?.stop();
      done();
    });
    app.addHook('onClose', async () => {
      await (stopped ?? forwarder?.stop());
      // The passes stop between batches once closing aborts; their statements in flight end first.
      await keyPass?.settled();
      await srdPass?.settled();
      await writes.close();
      pacer.close();
      await client.close();
    });
  };
  return { submit, metrics, queue, pacer, worker, keyDigests };
}
