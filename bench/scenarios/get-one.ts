import type pg from 'pg';
import type { AbScenario } from '../lib/compare.js';
import { seedHistory } from '../lib/database.js';

// GET one customer among many stored requests: the customers read have a few completed requests
// each (newest + history, each with its result); the rest of the table is other customers.

const PREFIX = 'q-';

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
    prepare: async () => ({
      build: (n) => ({ method: 'GET', path: `/v1/underwritings/${PREFIX}${(n * 7919) % options.customers}` }),
    }),
  };
}
