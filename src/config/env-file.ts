import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { ConfigError } from './config-error.js';
import { FILE_SUFFIX } from './env.js';

/** Names the file of variables to read at start: a path, or empty for none. Read before any other setting. */
export const ENV_FILE_VARIABLE = 'ENV_FILE';

export interface EnvFileResult {
  /** The file read, if any. */
  file: string | undefined;
  /** The names it set (never values); a variable already in the environment is kept, not overridden. */
  applied: string[];
  /** The names it held that the environment already set (the environment wins). */
  overridden: string[];
}

/**
 * Reads a dotenv file into env (as `node --env-file` would: the environment wins): ENV_FILE when
 * set (a path, in any mode; empty: no file), else `.env` in the working directory when it exists,
 * and never when NODE_ENV=production is set in the environment unless ENV_FILE names the file.
 * An ENV_FILE that cannot be read is a configuration error.
 */
export function loadEnvFile(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): EnvFileResult {
  const named = env[ENV_FILE_VARIABLE];
  let file: string;
  let content: string;
  if (named !== undefined) {
    if (named === '') return { file: undefined, applied: [], overridden: [] };
    file = path.resolve(cwd, named);
    try {
      content = readFileSync(file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new ConfigError([`${ENV_FILE_VARIABLE}: cannot read ${named}${code ? ` (${code})` : ''}`]);
    }
  } else {
    if (env.NODE_ENV === 'production') return { file: undefined, applied: [], overridden: [] };
    file = path.join(cwd, '.env');
    try {
      content = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { file: undefined, applied: [], overridden: [] };
      throw new ConfigError([`${ENV_FILE_VARIABLE}: .env exists but cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
    }
  }
  const applied: string[] = [];
  const overridden: string[] = [];
  const setInEnvironment = (name: string) => env[name] !== undefined && env[name] !== '';
  for (const [name, value] of Object.entries(parseEnv(content))) {
    if (value === undefined) continue;
    // A secret the environment gives in its other form (NAME_FILE for the file's NAME, or NAME for
    // its NAME_FILE) is the environment's too: the file must not make it "set both" (.env.example
    // itself sets SANDBOX_PARTNER_TOKEN and SANDBOX_CLIENT_SECRET).
    const otherForm = name.endsWith(FILE_SUFFIX) ? name.slice(0, -FILE_SUFFIX.length) : `${name}${FILE_SUFFIX}`;
    if (env[name] !== undefined || setInEnvironment(otherForm)) {
      overridden.push(name);
      continue;
    }
    env[name] = value;
    applied.push(name);
  }
  return { file, applied, overridden };
}
