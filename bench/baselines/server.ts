import Fastify from 'fastify';
import { callbackBaseline } from './callback.js';
import { getOneBaseline } from './get-one.js';
import { openPool } from './pool.js';
import { submitBaseline } from './submit.js';

// The baselines as one child process, on the gateway's paths, so one load generator drives either.

const env = process.env;
const pool = openPool(env.DATABASE_URL ?? '');
const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
app.get('/healthz', async () => ({ status: 'ok' }));
await app.register(callbackBaseline(pool));
await app.register(
  submitBaseline({
    pool,
    providerBaseUrl: env.PROVIDER_BASE_URL ?? '',
    partnerToken: env.PARTNER_TOKEN ?? '',
    cpfHashKey: env.CPF_HASH_KEY ?? '',
  }),
);
await app.register(getOneBaseline(pool));
await app.listen({ host: '127.0.0.1', port: Number(env.PORT ?? 0) });

const stop = async (): Promise<void> => {
  await app.close();
  await pool.end();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
