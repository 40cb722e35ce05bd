// Ad hoc figures for docs/endpoints.md: delivery lag to healthy endpoints beside a down one, a slow
// one (2 s per answer) and a rate-limited one (20/s), while events are recorded at 500/s.
// Usage: DATABASE_URL=postgres://… node --import tsx bench/investigations/endpoints-lag.ts [seconds]
// (an empty database of its own: it creates endpoints and events there).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { recordEventsSql } from '../../src/events/record.js';

const seconds = Number(process.argv[2] ?? 20);
const RATE = 500;
const ADMIN = 'figures-admin-key-0123456789';

async function receiver(answer: (res: http.ServerResponse) => void) {
  const lags: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { timestamp: string };
      lags.push(Date.now() - Date.parse(body.timestamp));
      answer(res);
    });
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, lags, server };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

const config = loadConfig({ ...process.env, ADMIN_API_KEYS: ADMIN, NODE_ENV: 'test', PROVIDER_BASE_URL: 'http://127.0.0.1:9', PARTNER_TOKEN: 'T'.repeat(64) });
const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: 'memory://' });
await migrateToLatest(database);
const app = await buildApp({ config, database });
await app.ready();

const healthy = [await receiver((res) => res.end()), await receiver((res) => res.end())];
const slow = await receiver((res) => setTimeout(() => res.end(), 2000));
const limited = await receiver((res) => res.end());
const others = process.env.ONLY_HEALTHY ? [] : [{ url: slow.url }, { url: limited.url, rateLimitPerS: 20 }, { url: 'http://127.0.0.1:1/down' }];
const urls = [...healthy.map((h) => ({ url: h.url })), ...others];
for (const body of urls) {
  const res = await app.inject({ method: 'POST', url: '/v1/endpoints', headers: { authorization: `Bearer ${ADMIN}` }, payload: body });
  if (res.statusCode !== 201) throw new Error(res.body);
}

// 500 events a second, in statements of 10 every 20 ms, each for its own customer.
const started = Date.now();
let n = 0;
while (Date.now() - started < seconds * 1000) {
  const due = Math.floor(((Date.now() - started) / 1000) * RATE);
  if (n < due) {
    const batch = Math.min(50, due - n);
    await sql`
      with source as (
        select 'callback.unmatched' as type, 'fig-' || g as customer_uuid, now() as created_at,
               null::bigint as request_id, null::bigint as callback_id, jsonb_build_object('customerUuid', 'fig-' || g) as data
        from generate_series(${n}::int, ${n + batch - 1}::int) g
      ),
      ${sql.raw(recordEventsSql('source'))}
      select 1`.execute(database.db);
    n += batch;
  }
  await new Promise((resolve) => setTimeout(resolve, 20));
}
await new Promise((resolve) => setTimeout(resolve, 3000));
const lags = healthy.flatMap((h) => h.lags);
console.log(JSON.stringify({
  seconds,
  events: n,
  healthy: { received: healthy.map((h) => h.lags.length), p50Ms: pct(lags, 50), p99Ms: pct(lags, 99), maxMs: Math.max(...lags) },
  slow: { received: slow.lags.length },
  rateLimited: { received: limited.lags.length, perS: limited.lags.length / (seconds + 3) },
}));
await app.close();
for (const r of [...healthy, slow, limited]) r.server.close();
await database.close();
