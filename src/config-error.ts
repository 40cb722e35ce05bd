/** Invalid configuration: one line per bad variable, naming it and why (never its value). */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** For entry points: a configuration error prints its lines to stderr and ends the process (exit 1). */
export async function configOrExit<T>(load: () => T | Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.problems.join('\n')}\n`);
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
    return new ConfigError([`${names.port}: port ${at.port} on ${at.host} is already in use (another process listens there); stop it or set ${names.port} to a free port`]);
  }
  if (code === 'EACCES') {
    return new ConfigError([`${names.port}: this user may not listen on port ${at.port} (ports below 1024 need privileges); set ${names.port} to another port`]);
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new ConfigError([`${names.host}: ${at.host} is not an address of this machine`]);
  }
  return err;
}
