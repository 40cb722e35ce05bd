import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { AbScenario } from '../lib/compare.js';
import { seedHistory } from '../lib/database.js';

// GET one customer among many stored requests: the customers read have a few completed requests
// each (newest + history, each with its result); the rest of the table is other customers.

const PREFIX = 'q-';
/** The same paths for wrk (bench/wrk/get-one.lua builds them as build() does). */
const WRK_SCRIPT = fileURLToPath(new URL('../../../bench/wrk/get-one.lua', import.meta.url));

export async function seedGetOne(pool: pg.Pool, options: { rows: number; customers: number }): Promise<void> {
  const perCustomer = 3;
  await seedHistory(pool, {
    filler: Math.max(0, options.rows - options.customers * perCustomer),
    prefix: PREFIX,
    customers: options.customers,
    perCustomer,
  });
}

export function getOneScenario(options: { customers: number }): AbScenario {
  return {
    name: 'get-one',
    connections: 32,
    wrk: true,
    prepare: async () => ({
      build: (n) => ({ method: 'GET', path: `/v1/underwritings/${PREFIX}${(n * 7919) % options.customers}` }),
      wrk: { script: WRK_SCRIPT, path: '/', env: { GET_ONE_PREFIX: PREFIX, GET_ONE_CUSTOMERS: String(options.customers) } },
    }),
  };
}
