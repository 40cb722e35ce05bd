import { ConfigError } from '../../src/config/config-error.js';

/** The lines a configuration loader refuses the environment with; [] when it accepts it. */
export function configProblems(load: (env: Record<string, string>) => unknown, env: Record<string, string>): string[] {
  try {
    load(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}
