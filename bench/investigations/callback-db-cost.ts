import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import pg from 'pg';
import { NO_GENERIC_PLANS } from '../../src/db/handle.js';
import { STATEMENT_PLANNED_ONCE } from '../../src/db/plan-guards.js';
import { RECORD_RESULTS, recordResultsParameters, type ValidResult } from '../../src/requests/complete.js';
import { createBenchDatabase } from '../lib/database.js';
import { startOwnPostgres } from '../lib/own-postgres.js';

// `node dist/bench/investigations/callback-db-cost.js [--callbacks=6000] [--batch=16] [--connections=2]
//   [--rounds=3] [--analyse] [--variants=autocommit,planned-once,checks-once]`
// What the database spends per callback on the gateway's callback statement, for ways of running
// it (issue 34: the database side is most of the gateway's cost per callback). On a private cluster
// (bench/lib/own-postgres.ts: nobody else's WAL or buffers), each variant on a database of its own,
// seeded as the plan tests seed (test/helpers/statement-cost.ts: each customer one completed request
// with its callback and event, one waiting, both written in two versions as the API leaves them;
// never analysed unless --analyse). Each round runs `callbacks` results per variant, the variants
// alternated A B A B, from `connections` connections at once (the writer's two batches in flight),
// each connection set up as the gateway's are, batches of `batch` results sorted by customer as
// recordResults sends them. Per callback: the backends' CPU (/proc/<pid>/schedstat, ns), this
// process's CPU (building the batches and driving the protocol), buffers (pg_stat_database hit +
// read, read once the backends have exited and so reported) and WAL bytes. CPU is noisy on a shared
// host, buffers and WAL are not: the load average is printed with every round.

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const callbacks = arg('callbacks', 6000);
const batchSize = arg('batch', 16);
const connections = arg('connections', 2);
const rounds = arg('rounds', 3);
const analyse = args.includes('--analyse');
const say = (line: string) => process.stdout.write(`${line}\n`);

/** How a batch is sent on one connection. */
type Run = (client: pg.Client, batch: ValidResult[]) => Promise<unknown>;

const named = (client: pg.Client, batch: ValidResult[]) =>
  client.query({ name: RECORD_RESULTS.name, text: RECORD_RESULTS.text, values: recordResultsParameters(batch, { skewS: 300 }) });

const VARIANTS: Record<string, Run> = {
  // As the gateway ran it before: one round trip, autocommit; planned per batch (force_custom_plan),
  // and so is every foreign-key check per row.
  autocommit: named,
  // In a transaction of its own whose first statement sets the guard: the statement's generic plan,
  // and each foreign-key check's, made once per connection with sequential scans off.
  'planned-once': async (client, batch) => {
    await client.query(`begin; ${STATEMENT_PLANNED_ONCE}`);
    try {
      await named(client, batch);
      await client.query('commit');
    } catch (err) {
      await client.query('rollback');
      throw err;
    }
  },
};

// Only the foreign-key checks made once: the guard set by the statement itself, as it starts (one
// round trip, autocommit); the statement is still planned per batch.
const CHECKS_ONCE_TEXT = RECORD_RESULTS.text.replace(
  /with input as \(\s*select \* from json_to_recordset/,
  `with guard as materialized (select set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)),
    input as (select i.* from guard, json_to_recordset`,
);
if (CHECKS_ONCE_TEXT === RECORD_RESULTS.text) throw new Error('the callback statement no longer starts as this script expects');
VARIANTS['checks-once'] = (client, batch) =>
  client.query({ name: 'record_results_checks_once', text: CHECKS_ONCE_TEXT, values: recordResultsParameters(batch, { skewS: 300 }) });

// As planned-once, on a database with the foreign keys the callback statement checks added back
// as they were before migration 0027 dropped three (docs/performance.md, "Foreign keys"): what
// those checks cost the backends per callback.
VARIANTS['planned-once-with-fks'] = VARIANTS['planned-once']!;
const WITH_FOREIGN_KEYS = new Set(['planned-once-with-fks']);
const DROPPED_FOREIGN_KEYS = [
  'alter table underwriting_requests add constraint underwriting_requests_result_fk foreign key (result_callback_id) references callbacks (id)',
  'alter table callbacks add constraint callbacks_request_id_fkey foreign key (request_id) references underwriting_requests (id)',
  'alter table events add constraint events_request_id_fkey foreign key (request_id) references underwriting_requests (id) on delete cascade',
] as const;

const only = args.find((a) => a.startsWith('--variants='))?.slice('--variants='.length).split(',');
const variants = (only ?? ['autocommit', 'planned-once']).map((name) => {
  const run = VARIANTS[name];
  if (!run) throw new Error(`no variant ${name} (${Object.keys(VARIANTS).join(', ')})`);
  return { name, run };
});

/** Time on a CPU so far, in ns (a backend is one thread). */
function cpuNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

function resultFor(customerUuid: string, n: number): ValidResult {
  const started = new Date(Date.now() - 5_000 + (n % 1000));
  const body = JSON.stringify({
    customerUuid,
    started: started.toISOString(),
    finished: new Date(started.getTime() + 750).toISOString(),
    serviceType: 'CREDIT_SCORE',
    response: { costSavingEnabled: false, score: 300 + (n % 600), riskBand: 1 + (n % 5), limit: (n % 4) * 1500 },
  });
  return {
    receivedAt: new Date(),
    peer: '127.0.0.1',
    rawBody: Buffer.from(body),
    customerUuid,
    started: started.toISOString(),
    finished: new Date(started.getTime() + 750).toISOString(),
    body,
    decision: 'approved',
  };
}

/** Each customer: one request completed by a matched callback (with its event), one waiting; two versions each. */
async function seed(pool: pg.Pool, customers: number): Promise<void> {
  for (const table of ['underwriting_requests', 'callbacks', 'events']) await pool.query(`alter table ${table} set (autovacuum_enabled = off)`);
  await pool.query(
    `insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, submitted_at, updated_at)
     select 'c-' || c, md5('c-' || c), '***.456.789-**', false,
            '{"grossIncome": 5000, "occupation": "SALARIED", "address": {"city": "São Paulo", "zipCode": "01000-000"}}'::jsonb,
            case when k = 2 then 'submitting' else 'expired' end,
            now() - interval '1 day' + k * interval '1 minute' + c * interval '1 millisecond',
            now() - interval '1 day' + k * interval '1 minute' + c * interval '1 millisecond'
       from generate_series(0, $1::int - 1) c, generate_series(1, 2) k order by k, c`,
    [customers],
  );
  await pool.query(`update underwriting_requests set status = 'submitted', upstream_status = 202 where status = 'submitting'`);
  await pool.query(`
    with cb as (
      insert into callbacks (received_at, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
      select submitted_at + interval '10 s', '\\x7b7d'::bytea, 'matched', customer_uuid, submitted_at + interval '1 s',
             submitted_at + interval '2 s', '{"response": {"score": 700}}'::jsonb, 'approved', id
        from underwriting_requests where status = 'expired'
      returning id, request_id, received_at, customer_uuid
    ),
    done as (
      update underwriting_requests r set status = 'completed', decision = 'approved', completed_at = cb.received_at,
             updated_at = cb.received_at, result_callback_id = cb.id
        from cb where r.id = cb.request_id
      returning r.id
    )
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data)
    select 'evt_' || replace(gen_random_uuid()::text, '-', ''), 'underwriting.completed', cb.customer_uuid, cb.received_at,
           cb.request_id, cb.id, '{}'::jsonb
      from cb`);
  if (analyse) for (const table of ['underwriting_requests', 'callbacks', 'events']) await pool.query(`analyze ${table}`);
}

interface Figures {
  backendUs: number;
  clientUs: number;
  buffers: number;
  walBytes: number;
  load: number;
}

const own = await startOwnPostgres();
try {
  const admin = new pg.Client({ connectionString: own.url });
  await admin.connect();
  say(`callback statement, database cost per callback: ${callbacks} callbacks per round, batches of ${batchSize}, ${connections} connections,`);
  say(`${rounds} rounds A B A B, private PostgreSQL, tables ${analyse ? 'analysed' : 'never analysed'}; ${(rounds * callbacks).toLocaleString('en')} waiting + as many completed requests per variant`);
  const databases = new Map<string, Awaited<ReturnType<typeof createBenchDatabase>>>();
  for (const v of variants) {
    const database = await createBenchDatabase(own.url);
    await seed(database.pool, rounds * callbacks);
    if (WITH_FOREIGN_KEYS.has(v.name)) for (const statement of DROPPED_FOREIGN_KEYS) await database.pool.query(statement);
    await database.pool.end();
    databases.set(v.name, database);
  }
  await admin.query('checkpoint');
  const figures: Record<string, Figures[]> = {};
  say(`${'variant'.padEnd(14)} round  backend µs/cb  client µs/cb  buffers/cb  WAL B/cb  load1`);
  for (let round = 0; round < rounds; round++) {
    for (const v of variants) {
      const database = databases.get(v.name)!;
      const clients = await Promise.all(
        Array.from({ length: connections }, async () => {
          const client = new pg.Client({ connectionString: database.url, application_name: 'callback-db-cost' });
          await client.connect();
          await client.query(`set statement_timeout = 15000; set jit = off; ${NO_GENERIC_PLANS}`);
          return client;
        }),
      );
      const pids = (await admin.query<{ pid: number }>(`select pid from pg_stat_activity where application_name = 'callback-db-cost' and datname = $1`, [database.name])).rows.map((r) => r.pid);
      const stat = async () =>
        (
          await admin.query<{ b: string; w: string }>(
            `select (select blks_hit + blks_read from pg_stat_database where datname = $1)::text as b, pg_current_wal_lsn()::text as w`,
            [database.name],
          )
        ).rows[0]!;
      await admin.query('select pg_stat_clear_snapshot()');
      const before = await stat();
      const cpu0 = pids.map(cpuNs);
      const client0 = process.cpuUsage();
      let next = round * callbacks;
      const end = (round + 1) * callbacks;
      await Promise.all(
        clients.map(async (client) => {
          while (next < end) {
            const from = next;
            next = Math.min(end, next + batchSize);
            const batch = Array.from({ length: next - from }, (_, k) => resultFor(`c-${from + k}`, from + k));
            batch.sort((a, b) => (a.customerUuid < b.customerUuid ? -1 : 1));
            await v.run(client, batch);
          }
        }),
      );
      const clientUs = (() => {
        const d = process.cpuUsage(client0);
        return d.user + d.system;
      })();
      const cpu1 = pids.map(cpuNs);
      await Promise.all(clients.map((c) => c.end()));
      // Exited backends have reported their buffers.
      for (let i = 0; i < 100; i++) {
        const left = await admin.query(`select 1 from pg_stat_activity where application_name = 'callback-db-cost'`);
        if (left.rowCount === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await admin.query('select pg_stat_clear_snapshot()');
      const after = await stat();
      const wal = (await admin.query<{ d: string }>('select pg_wal_lsn_diff($1, $2)::text as d', [after.w, before.w])).rows[0]!.d;
      const f: Figures = {
        backendUs: cpu1.reduce((s, ns, i) => s + (ns - cpu0[i]!), 0) / 1000 / callbacks,
        clientUs: clientUs / callbacks,
        buffers: (Number(after.b) - Number(before.b)) / callbacks,
        walBytes: Number(wal) / callbacks,
        load: loadavg()[0]!,
      };
      (figures[v.name] ??= []).push(f);
      say(
        `${v.name.padEnd(14)} ${String(round + 1).padStart(5)}  ${f.backendUs.toFixed(1).padStart(13)}  ${f.clientUs.toFixed(1).padStart(12)}  ${f.buffers.toFixed(1).padStart(10)}  ${f.walBytes.toFixed(0).padStart(8)}  ${f.load.toFixed(1).padStart(5)}`,
      );
    }
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  say('\nmedians');
  for (const [name, fs] of Object.entries(figures)) {
    say(
      `${name.padEnd(14)}        ${median(fs.map((f) => f.backendUs)).toFixed(1).padStart(13)}  ${median(fs.map((f) => f.clientUs)).toFixed(1).padStart(12)}  ${median(fs.map((f) => f.buffers)).toFixed(1).padStart(10)}  ${median(fs.map((f) => f.walBytes)).toFixed(0).padStart(8)}`,
    );
  }
  await admin.end();
  for (const database of databases.values()) await database.drop();
} finally {
  await own.stop();
}
