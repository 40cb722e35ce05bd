import autocannon from 'autocannon';

// One timed run of autocannon against one target, every request distinct (its body or path is
// built from a running request number), summarised to the figures the report compares.

export interface RequestShape {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
}

export interface LoadSpec {
  baseUrl: string;
  connections: number;
  durationS: number;
  headers?: Record<string, string>;
  /** The n-th request of the run. */
  build(n: number): RequestShape;
  /** How many distinct requests exist (e.g. rows seeded); the run stops early when they run out. */
  limit?: number;
}

export interface RunFigures {
  durationS: number;
  requests: number;
  ok: number;
  /** 2xx responses per second. */
  rps: number;
  p50: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** True when the run used up its distinct requests before its time. */
  exhausted: boolean;
}

export async function runLoad(spec: LoadSpec): Promise<RunFigures> {
  let next = 0;
  let exhausted = false;
  let instance: autocannon.Instance | undefined;
  const limit = spec.limit ?? Number.POSITIVE_INFINITY;

  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon(
      {
        url: spec.baseUrl,
        connections: spec.connections,
        duration: spec.durationS,
        pipelining: 1,
        timeout: 30,
        headers: { 'content-type': 'application/json', ...spec.headers },
        requests: [
          {
            setupRequest: (request) => {
              const n = next++;
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
  });

  const ok = result['2xx'];
  return {
    durationS: result.duration,
    requests: result.requests.total,
    ok,
    rps: result.duration > 0 ? Math.round((ok / result.duration) * 10) / 10 : 0,
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
  };
}
