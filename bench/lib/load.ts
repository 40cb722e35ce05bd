import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import autocannon from 'autocannon';

// One timed run of autocannon against one target, every request distinct (its body or path is
// built from a running request number), summarised to the figures the report compares.
//
// Throughput is counted by the harness itself, from the first request sent to the last response
// received, never from autocannon's `duration`: autocannon ends a run only on its next one-second
// sample tick, so an `amount` run's duration is rounded UP to whole seconds (6,000 requests always
// "took" 2, 3 or 4 s) and a stopped run (seeded rows used up) counts the idle time to the tick.

export interface RequestShape {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
}

export interface LoadSpec {
  baseUrl: string;
  connections: number;
  /** A timed run; ignored when `amount` is set. */
  durationS: number;
  /** Exactly this many requests, then stop (the independent harness's way). */
  amount?: number;
  headers?: Record<string, string>;
  /** The n-th request of the run. */
  build(n: number): RequestShape;
  /** How many distinct requests exist (e.g. rows seeded); the run stops early when they run out. */
  limit?: number;
  /** A fixed offered load (requests per second over all connections) instead of as fast as answered. */
  rate?: number;
}

export interface RunFigures {
  /** First request sent to last response received, in s (the harness's own clock). */
  durationS: number;
  requests: number;
  ok: number;
  /** 2xx responses per second over durationS. */
  rps: number;
  /** What autocannon itself would have said: 2xx over its own (tick-rounded) duration. */
  autocannonRps: number;
  autocannonDurationS: number;
  p50: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** True when the run used up its distinct requests before its time. */
  exhausted: boolean;
  /**
   * p99 (ms) of the answers received in each whole second of the run, counted from its first
   * request (empty where the generator does not say: wrk). Shows whether a round's p99 is its
   * steady state or one slow stretch (its start, after the harness's CHECKPOINT).
   */
  secondP99: number[];
  /** When the run began and ended, wall clock (ISO, UTC): to match a round with the server's log. */
  startedAt: string;
  endedAt: string;
}

export async function runLoad(spec: LoadSpec): Promise<RunFigures> {
  let next = 0;
  let exhausted = false;
  let instance: autocannon.Instance | undefined;
  const limit = spec.limit ?? Number.POSITIVE_INFINITY;
  let firstSentAt = Number.NaN;
  let lastResponseAt = Number.NaN;
  const startedAt = new Date().toISOString();
  let responses = 0;
  let ok = 0;
  const seconds: RecordableHistogram[] = [];

  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon(
      {
        url: spec.baseUrl,
        connections: spec.connections,
        ...(spec.amount !== undefined ? { amount: spec.amount } : { duration: spec.durationS }),
        pipelining: 1,
        ...(spec.rate !== undefined ? { overallRate: spec.rate } : {}),
        timeout: 30,
        headers: { 'content-type': 'application/json', ...spec.headers },
        requests: [
          {
            setupRequest: (request) => {
              const n = next++;
              if (n === 0) firstSentAt = performance.now();
              if (n >= limit && !exhausted) {
                exhausted = true;
                setImmediate(() => instance?.stop());
              }
              const shape = spec.build(n);
              return { ...request, method: shape.method, path: shape.path, body: shape.body };
            },
          },
        ],
      },
      (err, res) => (err ? reject(err as Error) : resolve(res)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
      lastResponseAt = performance.now();
      responses++;
      if (statusCode >= 200 && statusCode < 300) ok++;
      const second = Math.floor((lastResponseAt - firstSentAt) / 1000);
      (seconds[second] ??= createHistogram()).record(Math.max(1, Math.round(responseTimeMs * 1000)));
    });
  });

  const durationS = Number.isFinite(firstSentAt) && Number.isFinite(lastResponseAt) ? (lastResponseAt - firstSentAt) / 1000 : 0;
  const acOk = result['2xx'];
  return {
    durationS: Math.round(durationS * 1000) / 1000,
    requests: responses,
    ok,
    rps: durationS > 0 ? Math.round((ok / durationS) * 10) / 10 : 0,
    autocannonRps: result.duration > 0 ? Math.round((acOk / result.duration) * 10) / 10 : 0,
    autocannonDurationS: result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    max: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {}).map(([code, stat]) => [code, (stat as { count: number }).count]),
    ),
    exhausted,
    // The last second is partial (the run ends within it): left out.
    // A second with no answer at all (a stall) is NaN: Array.from visits the holes that map skips.
    secondP99: Array.from(seconds.slice(0, -1), (h) => (h ? Math.round(h.percentile(99) / 100) / 10 : Number.NaN)),
    startedAt,
    endedAt: new Date().toISOString(),
  };
}
