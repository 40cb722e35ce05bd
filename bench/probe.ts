import { appendFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import http from 'node:http';
import { createRequire } from 'node:module';
import { constants, createHistogram, monitorEventLoopDelay, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';

// `npm run bench -- --probe` loads this into each gateway (`node --import`). It measures from inside
// the process what the load generator cannot tell apart: how long the gateway itself took to answer
// (from the request's arrival to the last byte handed to the socket), how long the callback's
// group-commit statement took (the database's share of that), how late its event loop ran, and
// its garbage collection pauses. On SIGUSR2 it appends what it saw since the last SIGUSR2 to
// PROBE_FILE as one line of JSON, and starts again (the harness signals before and after each run).
// With PROBE_PROFILE as well (`--probe-profile`), it also keeps a CPU profile of each interval
// (<PROBE_PROFILE>-<n>.cpuprofile: odd n the runs, warm-ups first, even n the pauses between them),
// so that a run's self time can be set beside the other side's same run rather than over whole
// processes (bench/profile-summary.js takes one or more of them).

/** One interval's figures, as the harness reads them. */
export interface ProbeFigures {
  /** Requests answered, and their time inside the gateway, ms. */
  answered: number;
  insideP50: number;
  insideP99: number;
  insideMax: number;
  /** Event-loop delay beyond the 5 ms sampling period, ms. */
  loopP99: number;
  loopMax: number;
  gcPauses: number;
  gcMs: number;
  gcMaxMs: number;
  /** Mark-compact (major) collections among them. */
  majorGcs: number;
  majorGcMs: number;
  /**
   * The callback's group-commit statement (`record_results`): how many ran, and the time from the
   * gateway handing it to `pg` to its rows back, ms. Tells the database's share of the answer time
   * from the gateway's own.
   */
  batches: number;
  batchP50: number;
  batchP99: number;
  batchMax: number;
  /** The p99 of the answer time inside the gateway in each second of the interval, ms. */
  secondInsideP99: number[];
  /** The callback statement's worst time in each second of the interval, ms. */
  secondBatchMax: number[];
  /** Database connections the process opened during the interval (pg clients connected). */
  connects: number;
  /**
   * Checkouts of a pooled connection (pg's Pool.connect) and how long each waited for one, ms: a
   * request whose statement finds every connection of the pool in use waits here.
   */
  checkouts: number;
  checkoutP99: number;
  checkoutMax: number;
  /** Checkouts that waited 1 ms or longer. */
  checkoutsWaited: number;
  /** Every named statement the process ran: how many, and their time from `pg` being handed one to its rows back (total and worst, ms). */
  statements?: Record<string, { calls: number; totalMs: number; maxMs: number }>;
}

const file = process.env.PROBE_FILE;
if (file) {
  const RESOLUTION_MS = 5;
  const inside = createHistogram();
  const loop = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  loop.enable();
  let gc = { pauses: 0, ms: 0, maxMs: 0, major: 0, majorMs: 0 };
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.pauses++;
      gc.ms += entry.duration;
      gc.maxMs = Math.max(gc.maxMs, entry.duration);
      if ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind !== constants.NODE_PERFORMANCE_GC_MINOR) {
        gc.major++;
        gc.majorMs += entry.duration;
      }
    }
  }).observe({ entryTypes: ['gc'] });

  // pg's Client.query, for the named statement the callback writer runs (the gateway's own copy
  // of pg: the one its node_modules resolves, as this file's does).
  const batch = createHistogram();
  let since = process.hrtime.bigint();
  const second = () => Number((process.hrtime.bigint() - since) / 1_000_000_000n);
  let seconds: ReturnType<typeof createHistogram>[] = [];
  let secondBatch: number[] = [];
  let connects = 0;
  let statements: Record<string, { calls: number; totalMs: number; maxMs: number }> = {};
  const checkout = createHistogram();
  let checkoutsWaited = 0;
  const pg = createRequire(import.meta.url)('pg') as {
    Client: { prototype: { query: (...args: unknown[]) => unknown; connect: (...args: unknown[]) => unknown } };
    Pool: { prototype: { connect: (...args: unknown[]) => unknown } };
  };
  const poolConnect = pg.Pool.prototype.connect;
  pg.Pool.prototype.connect = function (this: unknown, ...args: unknown[]): unknown {
    const result = poolConnect.apply(this, args);
    if (result instanceof Promise) {
      const at = process.hrtime.bigint();
      const done = () => {
        const ns = Math.max(1, Number(process.hrtime.bigint() - at));
        checkout.record(ns);
        if (ns >= 1_000_000) checkoutsWaited++;
      };
      result.then(done, done);
    }
    return result;
  };
  const connect = pg.Client.prototype.connect;
  pg.Client.prototype.connect = function (this: unknown, ...args: unknown[]): unknown {
    connects++;
    return connect.apply(this, args);
  };
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]): unknown {
    const result = query.apply(this, args);
    const name = (args[0] as { name?: string } | undefined)?.name;
    if (name !== undefined && result instanceof Promise) {
      const at = process.hrtime.bigint();
      const done = () => {
        const ms = Number(process.hrtime.bigint() - at) / 1e6;
        const s = (statements[name] ??= { calls: 0, totalMs: 0, maxMs: 0 });
        s.calls++;
        s.totalMs += ms;
        s.maxMs = Math.max(s.maxMs, ms);
      };
      result.then(done, done);
    }
    if (name === 'record_results' && result instanceof Promise) {
      const at = process.hrtime.bigint();
      const done = () => {
        const ns = Math.max(1, Number(process.hrtime.bigint() - at));
        batch.record(ns);
        const s = second();
        secondBatch[s] = Math.max(secondBatch[s] ?? 0, ns);
      };
      result.then(done, done);
    }
    return result;
  };

  // Every HTTP server of the process: the gateway has one.
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'request') {
      const at = process.hrtime.bigint();
      (args[1] as http.ServerResponse).once('finish', () => {
        const ns = Math.max(1, Number(process.hrtime.bigint() - at));
        inside.record(ns);
        (seconds[second()] ??= createHistogram()).record(ns);
      });
    }
    return emit.apply(this, [event, ...args] as unknown as Parameters<typeof emit>);
  } as typeof emit;

  const ms = (ns: number) => Math.round(ns / 1e5) / 10;
  const profileBase = process.env.PROBE_PROFILE;
  const profiler = profileBase ? new Session() : undefined;
  let interval = 0;
  if (profiler) {
    profiler.connect();
    profiler.post('Profiler.enable');
    profiler.post('Profiler.start');
  }
  const nextProfile = () => {
    if (!profiler) return;
    const n = interval++;
    profiler.post('Profiler.stop', (err, result) => {
      if (!err && n > 0) writeFileSync(`${profileBase}-${n}.cpuprofile`, JSON.stringify(result.profile));
      profiler.post('Profiler.start');
    });
  };

  process.on('SIGUSR2', () => {
    nextProfile();
    const figures: ProbeFigures = {
      answered: inside.count,
      insideP50: inside.count ? ms(inside.percentile(50)) : 0,
      insideP99: inside.count ? ms(inside.percentile(99)) : 0,
      insideMax: inside.count ? ms(inside.max) : 0,
      loopP99: Math.max(0, ms(loop.percentile(99) - RESOLUTION_MS * 1e6)),
      loopMax: Math.max(0, ms(loop.max - RESOLUTION_MS * 1e6)),
      gcPauses: gc.pauses,
      gcMs: Math.round(gc.ms),
      gcMaxMs: Math.round(gc.maxMs * 10) / 10,
      majorGcs: gc.major,
      majorGcMs: Math.round(gc.majorMs * 10) / 10,
      batches: batch.count,
      batchP50: batch.count ? ms(batch.percentile(50)) : 0,
      batchP99: batch.count ? ms(batch.percentile(99)) : 0,
      batchMax: batch.count ? ms(batch.max) : 0,
      secondInsideP99: Array.from(seconds, (h) => (h ? ms(h.percentile(99)) : 0)),
      secondBatchMax: Array.from(secondBatch, (ns) => (ns ? ms(ns) : 0)),
      connects,
      checkouts: checkout.count,
      checkoutP99: checkout.count ? ms(checkout.percentile(99)) : 0,
      checkoutMax: checkout.count ? ms(checkout.max) : 0,
      checkoutsWaited,
      statements: Object.fromEntries(
        Object.entries(statements).map(([n, s]) => [n, { calls: s.calls, totalMs: Math.round(s.totalMs), maxMs: Math.round(s.maxMs * 10) / 10 }]),
      ),
    };
    appendFileSync(file, `${JSON.stringify(figures)}\n`);
    inside.reset();
    batch.reset();
    loop.reset();
    gc = { pauses: 0, ms: 0, maxMs: 0, major: 0, majorMs: 0 };
    since = process.hrtime.bigint();
    seconds = [];
    secondBatch = [];
    connects = 0;
    checkout.reset();
    checkoutsWaited = 0;
    statements = {};
  });
}
