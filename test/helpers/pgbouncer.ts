import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';

/** Debian's pgbouncer (`.ci/run` installs it when missing); PGBOUNCER_BIN overrides. */
export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN || '/usr/sbin/pgbouncer';

export interface PgBouncer {
  port: number;
  mode: 'session' | 'transaction';
  /** The given direct URL, reaching the same database through PgBouncer. */
  url(directUrl: string): string;
  /** Everything PgBouncer logged (stderr). */
  log(): string;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** PgBouncer refuses to run as root: then it runs as postgres (present wherever PostgreSQL is), else nobody. */
function runAsUser(): string[] {
  if (process.getuid?.() !== 0) return [];
  const users = readFileSync('/etc/passwd', 'utf8');
  return ['-u', /^postgres:/m.test(users) ? 'postgres' : 'nobody'];
}

export interface PgBouncerOptions {
  /** server_round_robin = 1: idle server connections handed out least recently released first (the default: most recently). */
  roundRobin?: boolean;
  /** default_pool_size: server connections per database and user (20 unless given). */
  poolSize?: number;
}

/**
 * A real PgBouncer in front of the PostgreSQL server of serverUrl, in the given pool mode, on a
 * free port of 127.0.0.1 (auth_type trust; every database passed through). Resolves once it
 * listens; stopped at teardown.
 */
export async function startPgBouncer(t: Test, serverUrl: string, mode: 'session' | 'transaction', options: PgBouncerOptions = {}): Promise<PgBouncer> {
  if (!existsSync(PGBOUNCER_BIN)) {
    throw new Error(`PgBouncer is not installed at ${PGBOUNCER_BIN} (apt-get install pgbouncer, or set PGBOUNCER_BIN)`);
  }
  const server = new URL(serverUrl);
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-pgbouncer-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // Readable by the user it may switch to.
  await chmod(dir, 0o755);
  const port = await freePort();
  const user = decodeURIComponent(server.username || 'postgres');
  await writeFile(path.join(dir, 'userlist.txt'), `"${user}" ""\n`, { mode: 0o644 });
  await writeFile(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      `pool_mode = ${mode}`,
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 500',
      ...(options.roundRobin ? ['server_round_robin = 1'] : []),
      // No ignore_startup_parameters: a client sending one PgBouncer refuses fails, as in production.
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const child: ChildProcess = spawn(PGBOUNCER_BIN, [...runAsUser(), path.join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const listening = new Promise<void>((resolve, reject) => {
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      log += chunk;
      if (log.includes(`listening on 127.0.0.1:${port}`)) resolve();
    });
    child.once('exit', (code, signal) => reject(new Error(`pgbouncer exited (${code ?? signal}) before listening:\n${log}`)));
  });
  const exited = once(child, 'exit');
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  });
  await listening;
  return {
    port,
    mode,
    url(directUrl) {
      const url = new URL(directUrl);
      url.hostname = '127.0.0.1';
      url.port = String(port);
      return url.toString();
    },
    log: () => log,
  };
}
