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
