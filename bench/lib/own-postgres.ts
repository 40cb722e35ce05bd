import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from './processes.js';

// `--own-postgres`: a private PostgreSQL cluster for the benchmark (initdb into a temporary
// directory, its own port, stopped and deleted at the end), with pg_stat_statements preloaded.
// Nobody else writes to it, so WAL bytes per callback (pg_current_wal_lsn differences) and
// pg_stat_statements count the benchmark's own work only. Settings as the shared server's
// (shared_buffers 128 MB, fsync and synchronous_commit on, autovacuum off, max_wal_size 1 GB).

export interface OwnPostgres {
  url: string;
  stop(): Promise<void>;
}

const BIN_DIRS = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];

/** `autovacuum`: on with the server's default settings (bench state d); off otherwise, as the shared server runs. */
export async function startOwnPostgres(options: { autovacuum?: boolean } = {}): Promise<OwnPostgres> {
  const bin = BIN_DIRS.find((d) => existsSync(join(d, 'initdb')));
  if (!bin) throw new Error(`--own-postgres needs initdb (looked in ${BIN_DIRS.join(', ')})`);
  const dir = mkdtempSync(join(tmpdir(), 'ugw-bench-pg-'));
  const dataDir = join(dir, 'data');
  // initdb and postgres refuse to run as root: run them as the postgres user when we are root.
  const asRoot = process.getuid?.() === 0;
  let uid: number | undefined;
  let gid: number | undefined;
  if (asRoot) {
    uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const ids = asRoot ? { uid, gid } : {};
  execFileSync(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'], {
    stdio: 'ignore',
    ...ids,
  });
  const port = await freePort();
  const settings = {
    port: String(port),
    listen_addresses: '127.0.0.1',
    unix_socket_directories: dir,
    shared_buffers: '128MB',
    max_wal_size: '1GB',
    autovacuum: options.autovacuum === true ? 'on' : 'off',
    fsync: 'on',
    synchronous_commit: 'on',
    max_connections: '100',
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.track': 'all',
    track_io_timing: 'on',
    // Diagnostic runs only: "name=value name=value" over the settings above (BENCH_OWN_POSTGRES_SETTINGS).
    ...settingsFrom(process.env.BENCH_OWN_POSTGRES_SETTINGS),
  };
  const proc = spawn(join(bin, 'postgres'), ['-D', dataDir, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])], {
    stdio: 'ignore',
    ...ids,
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('create extension if not exists pg_stat_statements');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline) throw new Error(`own PostgreSQL did not start: ${String(err)}`);
      await sleep(200);
    }
  }
  let stopped = false;
  return {
    url,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      proc.kill('SIGINT'); // fast shutdown
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** "full_page_writes=off checkpoint_timeout=30min" as settings; a word without "=" is refused. */
export function settingsFrom(text: string | undefined): Record<string, string> {
  const words = (text ?? '').split(/\s+/).filter((w) => w.length > 0);
  return Object.fromEntries(
    words.map((word) => {
      const at = word.indexOf('=');
      if (at <= 0) throw new Error(`BENCH_OWN_POSTGRES_SETTINGS: "${word}" is not name=value`);
      return [word.slice(0, at), word.slice(at + 1)];
    }),
  );
}
