import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { type BenchDatabase, backendCpuBetween, backendCpuSnapshot, createBenchDatabase, GATEWAY_APPLICATIONS, seedSubmitted } from '../lib/database.js';
import { runLoad } from '../lib/load.js';
import { type OwnPostgres, startOwnPostgres } from '../lib/own-postgres.js';
import { type Child, cpuTimeMs, GATEWAY_NODE_ARGS, startChild, stopAll } from '../lib/processes.js';
import { callbackBody } from '../scenarios/callback.js';

// `node dist/bench/investigations/cross-check.js [--own-postgres] [--amount=24000] [--reps=2] [--seed=api|sql] [--analyze]
//   [--warm=N] [--gen=autocannon|wrk] [--variants=gateway,gateway-npm-start,baseline,baseline-legacy]`
// (also gateway-dev-warn: NODE_ENV unset, LOG_LEVEL=warn)
//
// Issue 16's independent harness, reproduced to find why it and `npm run bench` disagreed: the
// callback targets one after another, A B A B, each run `amount` distinct callbacks for requests
// seeded just before (through the gateway's submit API, or by SQL as the bench does), throughput
// counted from the first request sent to the last response (and, beside it, autocannon's figure),
// CPU per callback of the target and of its PostgreSQL backends, WAL bytes per callback.

const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const amount = Number(arg('amount', '24000'));
const reps = Number(arg('reps', '2'));
const seedHow = arg('seed', 'api') as 'api' | 'sql';
const warm = Number(arg('warm', '0'));
const generator = arg('gen', 'autocannon') as 'autocannon' | 'wrk';
const variantNames = arg('variants', 'gateway,gateway-npm-start,baseline,baseline-legacy').split(',');
const ownPostgres = args.includes('--own-postgres');
/** Analyse the tables after seeding (the shared server runs without autovacuum: nothing else would). */
const analyze = args.includes('--analyze');

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const say = (line: string) => process.stdout.write(`${line}\n`);
const alnum = (n: number) => Array.from({ length: n }, () => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'[randomInt(62)]).join('');
const secrets = { PARTNER_TOKEN: alnum(64), CPF_HASH_KEY: alnum(48) };

interface Variant {
  name: string;
  kind: 'gateway' | 'baseline';
  path: string;
  env: Record<string, string>;
}

const VARIANTS: Record<string, Omit<Variant, 'name'>> = {
  // As `npm run bench` starts it.
  gateway: { kind: 'gateway', path: '/v1/callbacks/underwriting', env: { NODE_ENV: 'production', LOG_LEVEL: 'warn' } },
  // As `npm start` does with no NODE_ENV and no LOG_LEVEL: development, info (a line per request and per callback).
  'gateway-npm-start': { kind: 'gateway', path: '/v1/callbacks/underwriting', env: {} },
  // NODE_ENV unset but LOG_LEVEL=warn: separates the two.
  'gateway-dev-warn': { kind: 'gateway', path: '/v1/callbacks/underwriting', env: { LOG_LEVEL: 'warn' } },
  baseline: { kind: 'baseline', path: '/v1/callbacks/underwriting', env: {} },
  'baseline-legacy': { kind: 'baseline', path: '/v1/callbacks/underwriting-legacy', env: {} },
};

const execFileP = promisify(execFile);

async function wrkRun(baseUrl: string, path: string, prefix: string, durationS: number) {
  const { stdout } = await execFileP(
    'wrk',
    ['-t2', '-c32', `-d${durationS}s`, '--latency', '-s', here('../../../bench/wrk/callback.lua'), `${baseUrl}${path}`],
    { env: { ...process.env, CALLBACK_PREFIX: prefix, WRK_THREADS: '2' }, maxBuffer: 1 << 20 },
  );
  const line = stdout.split('\n').find((l) => l.startsWith('WRK_JSON '));
  if (!line) throw new Error(`wrk said:\n${stdout}`);
  return JSON.parse(line.slice('WRK_JSON '.length)) as { durationS: number; requests: number; non2xx: number; errors: number; p50: number; p99: number };
}

let own: OwnPostgres | undefined;
let database: BenchDatabase | undefined;

async function main() {
  own = ownPostgres ? await startOwnPostgres() : undefined;
  const adminUrl = own?.url ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  database = await createBenchDatabase(adminUrl);
  const bench = database;
  const admin = new pg.Pool({ connectionString: adminUrl, max: 1 });
  const stub = await startChild({ name: 'stub', script: here('../stub.js'), readyPath: '/healthz', env: {} });
  const common = { DATABASE_URL: bench.url, PROVIDER_BASE_URL: stub.baseUrl, ...secrets, CALLBACK_ALLOWED_IPS: '127.0.0.1/32' };
  const started = new Map<string, Child>();
  const variants: Variant[] = variantNames.map((name) => ({ name, ...VARIANTS[name]! }));
  for (const v of variants) {
    started.set(
      v.name,
      v.kind === 'gateway'
        ? await startChild({ name: v.name, script: here('../../src/server.js'), nodeArgs: GATEWAY_NODE_ARGS, readyPath: '/readyz', env: { ...common, ...v.env } })
        : await startChild({ name: v.name, script: here('../baselines/server.js'), readyPath: '/healthz', env: { ...common, NODE_ENV: 'production' } }),
    );
  }
  const submitter = [...started.entries()].find(([name]) => VARIANTS[name]?.kind === 'gateway')?.[1];
  let prefixCounter = 0;

  const seed = async (prefix: string, count: number) => {
    if (seedHow === 'sql' || !submitter) return seedSubmitted(bench.pool, prefix, count);
    const r = await runLoad({
      baseUrl: submitter.baseUrl,
      connections: 32,
      durationS: 0,
      amount: count,
      build: (n) => ({
        method: 'POST',
        path: '/v1/underwritings',
        body: JSON.stringify({ customerUuid: `${prefix}${n}`, cpf: String(10_000_000_000 + randomInt(89_999_999_999)), costSavingEnabled: false }),
      }),
    });
    if (r.ok !== count) throw new Error(`seeding through the API: ${r.ok}/${count} accepted ${JSON.stringify(r.statusCodes)}`);
  };

  say(`cross-check: ${amount} callbacks per run, ${reps} reps, seeded by ${seedHow}${analyze ? ' then analysed' : ', not analysed'}, warm-up ${warm}, ${generator}, ${own ? 'own PostgreSQL' : 'shared PostgreSQL'}`);
  say('variant             ok     own req/s  autocannon req/s (s)  p50  p99  cpu ms/cb  db cpu ms/cb  WAL B/cb');
  const lsn = async () => (await admin.query<{ l: string }>('select pg_current_wal_lsn()::text as l')).rows[0]!.l;
  const lsnBytes = async (a: string, b: string) => Number((await admin.query<{ d: string }>('select pg_wal_lsn_diff($2, $1)::bigint as d', [a, b])).rows[0]!.d);

  for (const v of variants) {
    if (warm > 0) {
      const child = started.get(v.name)!;
      const prefix = `w${++prefixCounter}-`;
      await seedSubmitted(bench.pool, prefix, warm);
      await runLoad({ baseUrl: child.baseUrl, connections: 32, durationS: 0, amount: warm, build: (n) => ({ method: 'POST', path: v.path, body: callbackBody(`${prefix}${n}`, n) }) });
    }
  }
  for (let rep = 0; rep < reps; rep++) {
    for (const v of variants) {
      const child = started.get(v.name)!;
      const prefix = `x${++prefixCounter}-`;
      await seed(prefix, generator === 'wrk' ? amount * 3 : amount);
      if (analyze) await bench.pool.query('analyze underwriting_requests; analyze callbacks');
      await bench.pool.query('checkpoint').catch(() => undefined);
      const app = v.kind === 'gateway' ? GATEWAY_APPLICATIONS : ['bench-baseline'];
      const [cpu0, dbCpu0, lsn0] = [cpuTimeMs(child.pid), await backendCpuSnapshot(bench, app), await lsn()];
      let ok: number;
      let line: string;
      if (generator === 'wrk') {
        const w = await wrkRun(child.baseUrl, v.path, prefix, Math.max(3, Math.round(amount / 2000)));
        ok = w.requests - w.non2xx;
        line = `${String(ok).padStart(6)}  ${(ok / w.durationS).toFixed(0).padStart(8)}  wrk ${w.durationS.toFixed(2)} s  ${w.p50}  ${w.p99}`;
      } else {
        const r = await runLoad({ baseUrl: child.baseUrl, connections: 32, durationS: 0, amount, build: (n) => ({ method: 'POST', path: v.path, body: callbackBody(`${prefix}${n}`, n) }) });
        ok = r.ok;
        line = `${String(ok).padStart(6)}  ${String(Math.round(r.rps)).padStart(8)}  ${String(Math.round(r.autocannonRps)).padStart(8)} (${r.autocannonDurationS})  own ${r.durationS} s  ${r.p50}  ${r.p99}`;
      }
      const [cpu1, dbCpu1, lsn1] = [cpuTimeMs(child.pid), await backendCpuSnapshot(bench, app), await lsn()];
      const per = (a: number | null, b: number | null) => (a === null || b === null ? '-' : ((b - a) / ok).toFixed(3));
      const dbMs = backendCpuBetween(dbCpu0, dbCpu1);
      say(`${v.name.padEnd(18)} ${line}  ${per(cpu0, cpu1)}  ${dbMs === null ? '-' : (dbMs / ok).toFixed(3)}  ${((await lsnBytes(lsn0, lsn1)) / ok).toFixed(0)}`);
    }
  }
  await admin.end();
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void (async () => {
      await stopAll();
      await database?.drop().catch(() => undefined);
      await own?.stop();
      process.exit(130);
    })();
  });
}

try {
  await main();
} catch (err) {
  say(`cross-check failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
} finally {
  await stopAll();
  await database?.drop().catch(() => undefined);
  await own?.stop();
}
process.exit();
