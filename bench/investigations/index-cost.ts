import pg from 'pg';
import { RECORD_RESULTS, recordResultsParameters, type ValidResult } from '../../src/requests/complete.js';
import { createBenchDatabase, seedSubmitted } from '../lib/database.js';
import { startOwnPostgres } from '../lib/own-postgres.js';
import { cpuTimeMs } from '../lib/processes.js';
import { callbackBody } from '../scenarios/callback.js';

// `node dist/bench/investigations/index-cost.js [--callbacks=8000] [--batch=16] [--reps=2]`: what each index of
// the callback hot path costs the database. On a private cluster (nobody else's WAL), for each
// variant (every index, then every index but one), a fresh migrated database: requests seeded
// 'submitted' and analysed, then the gateway's own RECORD_RESULTS statement (prepared, as the
// gateway runs it) in batches, from one connection. Per callback: the backend's CPU,
// pg_stat_statements' execution time, WAL bytes and full-page images, buffers dirtied.
// Variants alternate A B A B ... over `reps` rounds.

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const callbacks = arg('callbacks', 8000);
const batchSize = arg('batch', 16);
const reps = arg('reps', 2);
const say = (line: string) => process.stdout.write(`${line}\n`);

const VARIANTS: Array<{ name: string; ddl: string[] }> = [
  { name: 'as migrated', ddl: [] },
  { name: '- status_list', ddl: ['drop index underwriting_requests_status_list'] },
  { name: '- decision_list', ddl: ['drop index underwriting_requests_decision_list'] },
  { name: '- status+decision', ddl: ['drop index underwriting_requests_status_list', 'drop index underwriting_requests_decision_list'] },
  { name: '- list', ddl: ['drop index underwriting_requests_list'] },
  { name: '- cpf_list', ddl: ['drop index underwriting_requests_cpf_list'] },
  { name: '- waiting', ddl: ['drop index underwriting_requests_waiting'] },
  {
    // As before migration 0008: an entry for every request still waiting.
    name: 'result_callback full',
    ddl: [
      'alter table underwriting_requests add constraint underwriting_requests_result_callback_id_key unique (result_callback_id)',
      'drop index underwriting_requests_result',
    ],
  },
  { name: '- callbacks_request', ddl: ['drop index callbacks_request'] },
  { name: '- callbacks_unmatched', ddl: ['drop index callbacks_unmatched'] },
  { name: '- events_created', ddl: ['drop index events_created'] },
  { name: '- events_request', ddl: ['drop index events_request'] },
  { name: '- events_callback', ddl: ['drop index events_callback'] },
  { name: '- events_customer_feed', ddl: ['drop index events_customer_feed'] },
  { name: '- events FKs', ddl: ['alter table events drop constraint events_request_id_fkey', 'alter table events drop constraint events_callback_id_fkey'] },
  { name: '- events request FK', ddl: ['alter table events drop constraint events_request_id_fkey'] },
  { name: '- events callback FK', ddl: ['alter table events drop constraint events_callback_id_fkey'] },
  { name: '- callbacks FK', ddl: ['alter table callbacks drop constraint callbacks_request_id_fkey'] },
  { name: '- result_callback FK', ddl: ['alter table underwriting_requests drop constraint underwriting_requests_result_fk'] },
];

/** The statement's parameters as the gateway sends them (the contract's 300 s skew). */
const parameters = (batch: ValidResult[]) => recordResultsParameters(batch, { skewS: 300 });

const only = args.find((a) => a.startsWith('--variants='))?.slice('--variants='.length).split(',');
const variants = only ? VARIANTS.filter((v) => only.includes(v.name)) : VARIANTS;

function results(prefix: string, from: number, count: number): ValidResult[] {
  return Array.from({ length: count }, (_, k) => {
    const n = from + k;
    const body = callbackBody(`${prefix}${n}`, n);
    const parsed = JSON.parse(body) as { started: string; finished: string };
    return {
      receivedAt: new Date(),
      peer: '127.0.0.1',
      rawBody: Buffer.from(body),
      customerUuid: `${prefix}${n}`,
      started: parsed.started,
      finished: parsed.finished,
      body,
      decision: 'approved' as const,
    };
  });
}

const own = await startOwnPostgres();
try {
  const admin = new pg.Pool({ connectionString: own.url, max: 1 });
  say(`index cost: ${callbacks} callbacks in batches of ${batchSize}, ${reps} rounds, private PostgreSQL`);
  say('variant                   µs CPU/cb  µs exec/cb  WAL B/cb  FPI/cb  WAL rec/cb  dirtied/cb  req idx  req B/row');
  const rows: Record<string, number[][]> = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const v of variants) {
      const database = await createBenchDatabase(own.url);
      try {
        for (const ddl of v.ddl) await database.pool.query(ddl);
        // The table as a day of traffic leaves it: many requests already answered, then the waiting ones.
        await seedSubmitted(database.pool, 'old-', 40_000);
        await database.pool.query(`update underwriting_requests set status = 'expired' where customer_uuid like 'old-%'`);
        await seedSubmitted(database.pool, 'c-', callbacks);
        await database.pool.query('vacuum analyze underwriting_requests');
        // Not callbacks: analysed while empty, its statistics say 0 rows, and the foreign-key checks
        // against it (planned once per connection, kept for the connection's life) would scan it
        // sequentially: 2-3x the CPU per callback (measured), until an ANALYZE (autovacuum's, as the
        // table grows) makes them plan again.
        const client = new pg.Client({ connectionString: database.url, application_name: 'index-cost' });
        await client.connect();
        // Warm the prepared statement and the caches with a first batch not counted.
        await client.query({ name: RECORD_RESULTS.name, text: RECORD_RESULTS.text, values: parameters(results('c-', 0, batchSize)) });
        await admin.query('checkpoint');
        await admin.query('select pg_stat_statements_reset()');
        const pid = (await client.query<{ p: number }>('select pg_backend_pid() as p')).rows[0]!.p;
        const lsn0 = (await admin.query<{ l: string }>('select pg_current_wal_lsn()::text as l')).rows[0]!.l;
        const cpu0 = cpuTimeMs(pid) ?? 0;
        let done = batchSize;
        while (done < callbacks) {
          const n = Math.min(batchSize, callbacks - done);
          await client.query({ name: RECORD_RESULTS.name, text: RECORD_RESULTS.text, values: parameters(results('c-', done, n)) });
          done += n;
        }
        const counted = callbacks - batchSize;
        const cpu1 = cpuTimeMs(pid) ?? 0;
        const wal = (await admin.query<{ d: string }>('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint as d', [lsn0])).rows[0]!.d;
        const st = (
          await admin.query<{ t: number; fpi: string; rec: string; dirtied: string }>(
            `select sum(total_exec_time) as t, sum(wal_fpi) as fpi, sum(wal_records) as rec, sum(shared_blks_dirtied) as dirtied
             from pg_stat_statements where query like '%json_to_recordset%'`,
          )
        ).rows[0]!;
        const idx = (
          await database.pool.query<{ n: string; b: string }>(
            `select count(*) as n, (select pg_total_relation_size('underwriting_requests') / greatest(1, (select count(*) from underwriting_requests))) as b
             from pg_indexes where tablename = 'underwriting_requests'`,
          )
        ).rows[0]!;
        await client.end();
        const fig = [
          ((cpu1 - cpu0) * 1000) / counted,
          (Number(st.t) * 1000) / counted,
          Number(wal) / counted,
          Number(st.fpi) / counted,
          Number(st.rec) / counted,
          Number(st.dirtied) / counted,
        ];
        (rows[v.name] ??= []).push(fig);
        say(
          `${v.name.padEnd(24)}  ${fig.map((x, i) => x.toFixed(i >= 3 ? 2 : 0).padStart(i === 0 ? 8 : 10)).join('')}  ${idx.n.padStart(7)}  ${idx.b.padStart(9)}`,
        );
      } finally {
        await database.drop();
      }
    }
  }
  say('\nmedians');
  for (const [name, figs] of Object.entries(rows)) {
    const med = figs[0]!.map((_, i) => {
      const s = figs.map((f) => f[i]!).sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    });
    say(`${name.padEnd(24)}  ${med.map((x, i) => x.toFixed(i >= 3 ? 2 : 0).padStart(i === 0 ? 8 : 10)).join('')}`);
  }
  await admin.end();
} finally {
  await own.stop();
}
process.exit(0);
