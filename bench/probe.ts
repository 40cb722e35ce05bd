import { appendFileSync } from 'node:fs';
import http from 'node:http';
import { constants, createHistogram, monitorEventLoopDelay, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';

// `npm run bench -- --probe` loads this into each gateway (`node --import`). It measures from inside
// the process what the load generator cannot tell apart: how long the gateway itself took to answer
// (from the request's arrival to the last byte handed to the socket), how late its event loop ran,
// and its garbage collection pauses. On SIGUSR2 it appends what it saw since the last SIGUSR2 to
// PROBE_FILE as one line of JSON, and starts again (the harness signals before and after each run).

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

  // Every HTTP server of the process: the gateway has one.
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'request') {
      const at = process.hrtime.bigint();
      (args[1] as http.ServerResponse).once('finish', () => inside.record(Math.max(1, Number(process.hrtime.bigint() - at))));
    }
    return emit.apply(this, [event, ...args] as unknown as Parameters<typeof emit>);
  } as typeof emit;

  const ms = (ns: number) => Math.round(ns / 1e5) / 10;
  process.on('SIGUSR2', () => {
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
    };
    appendFileSync(file, `${JSON.stringify(figures)}\n`);
    inside.reset();
    loop.reset();
    gc = { pauses: 0, ms: 0, maxMs: 0, major: 0, majorMs: 0 };
  });
}
