import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createBenchDatabase, seedSubmitted } from './lib/database.js';
import { GATEWAY_NODE_ARGS, startChild, stopAll } from './lib/processes.js';
import { CALLBACK_PATH, callbackBody } from './scenarios/callback.js';

// `node dist/bench/tracing-instructions.js --mode=off|on|sampled|base [--n=500] [--warmup=300] [--node=PATH] [--label=x] [--perf-map]`:
// the instructions the gateway process executes per answer, counted by valgrind (callgrind),
// which does not depend on what else the machine runs (docs/tracing.md, Cost). The gateway runs
// under `valgrind --tool=callgrind --instr-atstart=no`; after a warm-up (not counted) counting is
// switched on, N distinct callbacks are sent at a fixed concurrency, the batch span processor is
// given its schedule delay to export, and the count is dumped; then the same for N submits.
//   off      tracing off (no OTLP endpoint)
//   on       every span exported as protobuf to the stub (the bench's OTLP sink)
//   sampled  on, with OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1
//   base     BENCH_TRACING_BASE_ENTRY (a build from before tracing), off
// One mode per run: run two of the same mode to see the method's own spread. Results are appended
// to bench/results/tracing-instructions.jsonl. DATABASE_URL: the PostgreSQL to make a database on.
// --perf-map: the gateway also runs with --perf-basic-prof (V8 writes /tmp/perf-<pid>.map, the
// JIT code's addresses and names), so that bench/callgrind-js.py can name the JavaScript that
// callgrind shows only as addresses; use it on both sides of a comparison.

const args = process.argv.slice(2);
const arg = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const mode = arg('mode') ?? 'off';
if (!['off', 'on', 'sampled', 'base'].includes(mode)) throw new Error(`--mode=${mode}: off, on, sampled or base`);
const n = Number(arg('n') ?? 500);
const warmup = Number(arg('warmup') ?? 300);
const node = arg('node') ?? process.execPath;
const label = arg('label') ?? mode;
const perfMap = args.includes('--perf-map');
const CONCURRENCY = 4;
/** The batch span processor's default schedule delay is 5 s: waited (in every mode alike) so that a window's spans are exported inside it. */
const EXPORT_WAIT_MS = 6_000;

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const RESULTS_DIR = here('../../bench/results/');
const OUT_DIR = `${RESULTS_DIR}callgrind/`;
const entry = mode === 'base' ? process.env.BENCH_TRACING_BASE_ENTRY : here('../src/server.js');
if (!entry) throw new Error('--mode=base needs BENCH_TRACING_BASE_ENTRY');
const adminUrl = process.env.DATABASE_URL;
if (!adminUrl) throw new Error('DATABASE_URL: the PostgreSQL server to create the run database on');

const say = (line: string) => process.stdout.write(`${line}\n`);

async function send(baseUrl: string, count: number, build: (i: number) => { path: string; body: string }): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const { path, body } = build(next++);
        const res = await fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  return statuses;
}

/** The instructions of one callgrind dump file (its `totals:` or `summary:` line). */
function dumpedInstructions(file: string): number {
  const m = /^(?:totals|summary):\s+(\d+)/m.exec(readFileSync(file, 'utf8'));
  if (!m) throw new Error(`no totals in ${file}`);
  return Number(m[1]);
}

mkdirSync(OUT_DIR, { recursive: true });
const outBase = `${OUT_DIR}${label}-${Date.now()}`;
const database = await createBenchDatabase(adminUrl);
try {
  const stub = await startChild({ name: 'stub', script: here('./stub.js'), readyPath: '/healthz', env: {} });
  const prefix = `ti${Date.now()}c`;
  await seedSubmitted(database.pool, prefix, warmup + n);
  const tracing =
    mode === 'on' || mode === 'sampled'
      ? {
          OTEL_EXPORTER_OTLP_ENDPOINT: stub.baseUrl,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
          ...(mode === 'sampled' ? { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' } : {}),
        }
      : {};
  const gateway = await startChild({
    name: 'gateway under callgrind',
    script: entry,
    node,
    nodeArgs: perfMap ? [...GATEWAY_NODE_ARGS, '--perf-basic-prof'] : GATEWAY_NODE_ARGS,
    launcher: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${outBase}.%p`],
    readyPath: '/readyz',
    readyTimeoutMs: 300_000,
    readyPollMs: 1_000,
    env: {
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database.url,
      PROVIDER_BASE_URL: stub.baseUrl,
      PARTNER_TOKEN: 'x'.repeat(64),
      CPF_HASH_KEY: 'k'.repeat(48),
      CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
      ...(mode === 'base' ? { MIGRATE_ON_START: 'false' } : {}),
      ...tracing,
    },
  });
  const control = (...options: string[]) => {
    const out = execFileSync('callgrind_control', [...options, String(gateway.pid)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      // vgdb finds the gateway's pipe by HOST (and USER), which the gateway has as its listen address.
      env: { ...process.env, HOST: '127.0.0.1' },
    });
    if (!out.includes('OK')) throw new Error(`callgrind_control ${options.join(' ')}: ${out}`);
  };
  const callback = (offset: number) => (i: number) => ({ path: CALLBACK_PATH, body: callbackBody(`${prefix}${offset + i}`, offset + i) });
  const submit = (tag: string) => (i: number) => ({
    path: '/v1/underwritings',
    body: JSON.stringify({ customerUuid: `${prefix}${tag}${i}`, cpf: String(10_000_000_000 + ((i * 7919) % 89_999_999_999)), costSavingEnabled: false }),
  });
  const load = [loadavg()[0]!];
  say(`${label}: warming up (${warmup} callbacks, ${warmup} submits, not counted)`);
  await send(gateway.baseUrl, warmup, callback(0));
  await send(gateway.baseUrl, warmup, submit('w'));
  await sleep(EXPORT_WAIT_MS);
  control('-i', 'on');
  const callbacks = await send(gateway.baseUrl, n, callback(warmup));
  await sleep(EXPORT_WAIT_MS);
  control('-d');
  const submits = await send(gateway.baseUrl, n, submit('m'));
  await sleep(EXPORT_WAIT_MS);
  control('-d');
  load.push(loadavg()[0]!);
  await gateway.stop();
  await stub.stop();
  const parts = readdirSync(OUT_DIR)
    .filter((f) => f.startsWith(`${outBase.slice(OUT_DIR.length)}.${gateway.pid}.`))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  if (parts.length < 2) throw new Error(`expected two dumps, found ${parts.join(', ')}`);
  const [cbIr, subIr] = parts.slice(0, 2).map((f) => dumpedInstructions(`${OUT_DIR}${f}`)) as [number, number];
  const nodeVersion = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  const result = {
    at: new Date().toISOString(),
    label,
    mode,
    node: nodeVersion,
    n,
    warmup,
    concurrency: CONCURRENCY,
    perfMap,
    loadAverage: load,
    callbackStatuses: Object.fromEntries(callbacks),
    submitStatuses: Object.fromEntries(submits),
    callbackInstructionsPerAnswer: Math.round(cbIr / n),
    submitInstructionsPerAnswer: Math.round(subIr / n),
    dumps: parts.slice(0, 2).map((f) => `${OUT_DIR}${f}`),
    ...(perfMap ? { perfMapFile: `/tmp/perf-${gateway.pid}.map` } : {}),
  };
  appendFileSync(`${RESULTS_DIR}tracing-instructions.jsonl`, `${JSON.stringify(result)}\n`);
  say(JSON.stringify(result));
} finally {
  await stopAll();
  await database.drop();
}
