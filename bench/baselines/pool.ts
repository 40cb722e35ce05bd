import pg from 'pg';

/** The same pool size and keep-alive as the gateway's own (src/db/guarded-pool.ts), so only the handlers differ. */
export function openPool(connectionString: string): pg.Pool {
  const pool = new pg.Pool({ connectionString, max: 10, keepAlive: true, application_name: 'bench-baseline' });
  pool.on('error', () => undefined);
  return pool;
}
