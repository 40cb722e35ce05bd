import { once } from 'node:events';
import net from 'node:net';

/** Every entry point a user runs (npm start, migrate, sandbox, token, the console build, sql:snapshot, the bench). */
export const ENTRY_POINTS = ['src/server.ts', 'src/db/migrate-cli.ts', 'src/sandbox/server.ts', 'src/provider/token-cli.ts', 'src/console/build-cli.ts', 'src/db/sql-snapshot-cli.ts', 'bench/run.ts'];

/**
 * An environment that would make every entry point fail were it read (a bad PORT, a database
 * nobody listens on): an exit 0 under it shows that nothing but the command line's answer ran.
 */
export async function failingEnvironment(): Promise<Record<string, string>> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return { PORT: 'eighty', SANDBOX_PORT: 'eighty', DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/x` };
}
