import Fastify from 'fastify';
import { callbackBaseline } from './callback.js';
import { callbackSameModelBaseline } from './callback-same-model.js';
import { getOneBaseline } from './get-one.js';
import { openPool } from './pool.js';
import { submitBaseline } from './submit.js';

// The baselines as one child process, on the gateway's paths, so one load generator drives either.

const env = process.env;
const pool = openPool(env.DATABASE_URL ?? '');
const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
app.get('/healthz', async () => ({ status: 'ok' }));
// The callback baseline is the same-model one (what issue 16's independent harness compared
// with); the earlier one, which also updates the callback row it just inserted, stays for A/B.
await app.register(callbackSameModelBaseline(pool, '/v1/callbacks/underwriting'));
await app.register(callbackBaseline(pool, '/v1/callbacks/underwriting-legacy'));
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
