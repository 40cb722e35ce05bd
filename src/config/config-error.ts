import { hostname } from 'node:os';

/** Invalid configuration: one line per bad variable, naming it and why (never its value). */
export class ConfigError extends Error {
  /** `code`: the system error behind it, when one is (EADDRINUSE: a port taken). */
  constructor(
    readonly problems: string[],
    readonly code?: string,
  ) {
    super(`invalid configuration:\n${problems.join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * How a fatal start-up line is written: one JSON object per line (as the logs, for a collector)
 * when NODE_ENV=production or LOG_FORMAT=json, else plain text (LOG_FORMAT=pretty forces it).
 * Read from the environment itself: the configuration may be what is broken.
 */
export function fatalFormat(env: NodeJS.ProcessEnv = process.env): 'json' | 'text' {
  const format = env.LOG_FORMAT?.trim();
  if (format === 'json') return 'json';
  if (format === 'pretty') return 'text';
  return env.NODE_ENV?.trim() === 'production' ? 'json' : 'text';
}

/** The variable a line is about: its first word, or the first after a prefix ("...failed to start: DATA_DIR: ..."). */
const VARIABLE_LINE = /(?:^|: )([A-Z][A-Z0-9_]*)(?: \(from [A-Z0-9_]+\))?: /;

/** The variable a configuration line names, if any (VARIABLE_LINE). */
export const variableOf = (line: string): string | undefined => VARIABLE_LINE.exec(line)?.[1];

/**
 * The lines a process dies with, on stderr: as they are, or each as a JSON log line (level
 * "fatal", ISO time, `variable` when the line names one).
 */
export function writeFatal(lines: readonly string[], env: NodeJS.ProcessEnv = process.env, level: 'fatal' | 'warn' = 'fatal'): void {
  if (lines.length === 0) return;
  if (fatalFormat(env) === 'text') {
    process.stderr.write(`${lines.join('\n')}\n`);
    return;
  }
  const time = new Date().toISOString();
  const json = lines.map((msg) => {
    const variable = variableOf(msg);
    return JSON.stringify({ level, time, pid: process.pid, hostname: hostname(), ...(variable ? { variable } : {}), msg });
  });
  process.stderr.write(`${json.join('\n')}\n`);
}

/**
 * For entry points: a configuration error writes its lines (writeFatal) and ends the process (exit 1).
 * `hints` (the misspelt-variable warnings) are written after them: a start that fails for want of
 * PARTNER_TOKEN is exactly when "PARTNER_TOKN is not a setting; did you mean PARTNER_TOKEN?" matters.
 */
export async function configOrExit<T>(load: () => T | Promise<T>, hints: readonly string[] = []): Promise<T> {
  try {
    return await load();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    writeFatal(err.problems);
    writeFatal(hints, process.env, 'warn');
    return process.exit(1);
  }
}

/**
 * A listen() failure the configuration explains (the port is taken, or needs privileges; the
 * address is not this machine's) as a ConfigError naming the variable; any other error unchanged.
 */
export function listenError(err: unknown, names: { host: string; port: string }, at: { host: string; port: number }): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') {
    return new ConfigError([`${names.port}: port ${at.port} on ${at.host} is already in use (another process listens there); stop it or set ${names.port} to a free port`], code);
  }
  if (code === 'EACCES') {
    return new ConfigError([`${names.port}: this user may not listen on port ${at.port} (ports below 1024 need privileges); set ${names.port} to another port`]);
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new ConfigError([`${names.host}: ${at.host} is not an address of this machine`]);
  }
  return err;
}
