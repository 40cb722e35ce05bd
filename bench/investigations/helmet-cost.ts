import helmet from '@fastify/helmet';
import Fastify, { type FastifyInstance } from 'fastify';
import { SECURITY_HEADER_OPTIONS } from '../../src/app.js';
import { addSecurityHeaders } from '../../src/http/security-headers.js';

// `node dist/bench/investigations/helmet-cost.js [--requests=20000] [--rounds=3]`: the CPU a bare Fastify app
// spends per request on security headers, by each way of setting them, alternated A B C A B C
// (CPU time, not wall time: steadier on a shared machine). The same headers every way.

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const requests = arg('requests', 20_000);
const rounds = arg('rounds', 3);

const variants: Record<string, (app: FastifyInstance) => Promise<void>> = {
  'no security headers': async () => undefined,
  '@fastify/helmet, global (before)': async (app) => {
    await app.register(helmet, SECURITY_HEADER_OPTIONS);
  },
  '@fastify/helmet not global + precomputed (now)': async (app) => {
    await app.register(helmet, { ...SECURITY_HEADER_OPTIONS, global: false });
    addSecurityHeaders(app, SECURITY_HEADER_OPTIONS);
  },
  'precomputed only': async (app) => {
    addSecurityHeaders(app, SECURITY_HEADER_OPTIONS);
  },
};

const apps = new Map<string, FastifyInstance>();
for (const [name, setup] of Object.entries(variants)) {
  const app = Fastify();
  await setup(app);
  app.get('/x', async () => ({ ok: true }));
  await app.ready();
  apps.set(name, app);
}
const results = new Map<string, number[]>();
for (let round = 0; round <= rounds; round++) {
  for (const [name, app] of apps) {
    const before = process.cpuUsage();
    for (let i = 0; i < requests; i++) await app.inject({ method: 'GET', url: '/x' });
    const used = process.cpuUsage(before);
    // Round 0 warms the JIT and is not counted.
    if (round > 0) results.set(name, [...(results.get(name) ?? []), (used.user + used.system) / requests]);
  }
}
const headerCount = Object.keys((await apps.get('precomputed only')!.inject({ method: 'GET', url: '/x' })).headers).length;
process.stdout.write(`CPU µs per request (app.inject, ${requests} requests x ${rounds} rounds; ${headerCount} response headers):\n`);
for (const [name, us] of results) {
  const sorted = [...us].sort((a, b) => a - b);
  process.stdout.write(`  ${name.padEnd(48)} median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)}  (${us.map((u) => u.toFixed(1)).join(', ')})\n`);
}
for (const app of apps.values()) await app.close();
