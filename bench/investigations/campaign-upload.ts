import { randomInt } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { backendCpuBetween, backendCpuSnapshot, createBenchDatabase, GATEWAY_APPLICATIONS, seedSubmitted } from '../lib/database.js';
import { cpuTimeMs, GATEWAY_NODE_ARGS, RssSampler, startChild, stopAll } from '../lib/processes.js';
import { cpfOf } from '../lib/states.js';

// `node dist/bench/investigations/campaign-upload.js [--lines=100000] [--rounds=1] [--others=0] [--profile]`
// (--others=N: N other customers' requests awaiting callbacks, seeded and analysed first, as the
// campaign scenario does; AUTO_EXPLAIN_MS=1000: statements slower than that logged with their plans
// in PostgreSQL's log, the role being a superuser)
// (CAMPAIGN_UPLOAD_ENTRIES=/before/dist/src/server.js,/after/dist/src/server.js: several builds,
// alternated round by round, A B A B, each on a database of its own):
// what a campaign upload costs per line (issue 37's upload goal). One gateway (the build's
// dist/src/server.js, NODE_ENV=production) on a throwaway PostgreSQL database (DATABASE_URL),
// its provider held back (provider_pacing.hold_until a day ahead, as test/campaigns does) so that
// nothing but the upload runs; each round uploads an NDJSON file of new customers over HTTP and
// reports wall time, the gateway's CPU and its PostgreSQL backends' CPU, each per line.
// --profile: the gateway runs under --cpu-prof (bench/results/profiles/campaign-upload.cpuprofile,
// written when it stops; read it with dist/bench/profile-summary.js). CPU time, not wall time, is
// the figure that means something on a shared machine; the load average is printed with it.

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const lines = arg('lines', 100_000);
const rounds = arg('rounds', 1);
const profile = args.includes('--profile');
/** Requests of other customers awaiting their callbacks, seeded (and analysed) first, as the campaign scenario does. */
const others = arg('others', 0);

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const PROFILE_DIR = here('../../../bench/results/profiles/');
const say = (line: string) => process.stdout.write(`${line}\n`);

function alphanumeric(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from({ length }, () => alphabet[randomInt(alphabet.length)]).join('');
}

/** An NDJSON campaign of `count` new customers, with a full srd, as a bank's file would hold. */
export function campaignFile(prefix: string, count: number, start = 0): Buffer {
  const parts: string[] = [];
  for (let i = start; i < start + count; i++) {
    parts.push(
      JSON.stringify({
        customerUuid: `${prefix}-${i}`,
        cpf: cpfOf(i),
        costSavingEnabled: i % 3 === 0,
        srd: {
          grossIncome: 3000 + (i % 9000),
          housingSpends: 900,
          cardSpends: 400,
          loanSpends: 0,
          address: { street: 'Rua das Flores', number: String(i % 999), city: 'São Paulo', state: 'SP' },
          occupation: 'Company Employee',
          desiredCreditLimit: 5000,
        },
      }),
    );
  }
  return Buffer.from(`${parts.join('\n')}\n`);
}

const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
if (profile) await mkdir(PROFILE_DIR, { recursive: true });
const entries = process.env.CAMPAIGN_UPLOAD_ENTRIES?.split(',').filter(Boolean) ?? [here('../../src/server.js')];
const databases: Awaited<ReturnType<typeof createBenchDatabase>>[] = [];
try {
  const gateways = [];
  for (const [i, entry] of entries.entries()) {
    const database = await createBenchDatabase(adminUrl);
    databases.push(database);
    if (others > 0) await seedSubmitted(database.pool, 'other-', others);
    if (process.env.AUTO_EXPLAIN_MS) {
      // Every statement slower than this logged with its plan (analysed, with buffers) in PostgreSQL's own log.
      const name = new URL(database.url).pathname.slice(1);
      for (const setting of ["session_preload_libraries = 'auto_explain'", `auto_explain.log_min_duration = ${Number(process.env.AUTO_EXPLAIN_MS)}`, 'auto_explain.log_analyze = on', 'auto_explain.log_buffers = on'])
        await database.pool.query(`alter database ${name} set ${setting}`);
    }
    gateways.push({ entry, database, child: await startGateway(entry, database, i) });
    await database.pool.query(`update provider_pacing set hold_until = now() + interval '1 day'`);
  }
  say(`campaign upload: ${lines} lines per round, ${rounds} round(s) per build; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  for (let round = 1; round <= rounds; round++) {
    for (const [i, { entry, database, child: gateway }] of gateways.entries()) {
      const file = campaignFile(`r${round}`, lines);
      const cpuBefore = cpuTimeMs(gateway.pid);
      const backendsBefore = await backendCpuSnapshot(database, GATEWAY_APPLICATIONS);
      const rss = new RssSampler(gateway.pid);
      const started = performance.now();
      const res = await fetch(`${gateway.baseUrl}/v1/campaigns`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: file });
      const answer = (await res.json()) as { accepted?: number; rejected?: unknown[] };
      const wallMs = performance.now() - started;
      const peakMb = rss.finish();
      const cpuMs = (cpuTimeMs(gateway.pid) ?? Number.NaN) - (cpuBefore ?? Number.NaN);
      const backendMs = backendCpuBetween(backendsBefore, await backendCpuSnapshot(database, GATEWAY_APPLICATIONS));
      if (res.status !== 202 || answer.accepted !== lines) throw new Error(`round ${round}: ${res.status} ${JSON.stringify(answer).slice(0, 500)}`);
      const us = (ms: number | null) => (ms === null || Number.isNaN(ms) ? 'n/a' : `${((ms * 1000) / lines).toFixed(1)} us`);
      say(
        `round ${round}, build ${i + 1} (${entry}): ${(wallMs / 1000).toFixed(2)} s wall (${us(wallMs)}/line); gateway CPU ${us(cpuMs)}/line; ` +
          `PostgreSQL backends CPU ${us(backendMs)}/line; gateway peak RSS ${peakMb ?? 'n/a'} MB (since its start); load average ${loadavg()[0]!.toFixed(2)}`,
      );
    }
  }
  for (const { child } of gateways) await child.stop();
  if (profile) say(`profiles: ${PROFILE_DIR}campaign-upload-<build>.cpuprofile (node dist/bench/profile-summary.js <it>)`);
} finally {
  await stopAll();
  for (const database of databases) await database.drop();
}

function startGateway(entry: string, database: Awaited<ReturnType<typeof createBenchDatabase>>, i: number) {
  return startChild({
    name: `gateway ${i + 1}`,
    script: entry,
    nodeArgs: [...GATEWAY_NODE_ARGS, ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=campaign-upload-${i + 1}.cpuprofile`] : [])],
    readyPath: '/readyz',
    env: {
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database.url,
      // Never called: the provider is held back below.
      PROVIDER_BASE_URL: 'http://127.0.0.1:9',
      PARTNER_TOKEN: alphanumeric(64),
      CPF_HASH_KEY: alphanumeric(48),
      CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
    },
  });
}
