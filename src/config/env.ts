import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { isIP } from 'node:net';
import { z } from 'zod';
import { ConfigError } from './config-error.js';

// Building blocks shared by the gateway's and the sandbox's configuration schemas.

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const logLevel = z.enum(LOG_LEVELS);
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
/** Unset: decided at start by defaultLogFormat (logger.ts). */
export const logFormat = z.enum(LOG_FORMATS, { error: 'must be json or pretty' }).optional();

/** A whole number in [min, max]; the message for anything else (-5, 1.5, "ten") says what is wanted. */
export const integer = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, min > 0 ? `must be a positive whole number (${min} to ${max})` : `must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

export const httpUrl = z
  .string()
  .trim()
  .refine((v) => {
    try {
      const u = new URL(v);
      return (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password;
    } catch {
      return false;
    }
  }, 'must be an http(s) URL without credentials in it');

function isAddressOrCidr(entry: string): boolean {
  const [address, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || !address) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/** The partner token the provider issues (X-Partner-Auth carries it): PARTNER_TOKEN, the sandbox's, the guard's check. */
export const partnerTokenSchema = z.string().regex(/^[A-Za-z0-9]{64}$/, 'must be exactly 64 letters or digits');

export const commaList = z.string().transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean));

export const addressList = commaList.superRefine((entries, ctx) => {
  const bad = entries.filter((e) => !isAddressOrCidr(e));
  // Addresses are not secrets, so naming the bad entry is the helpful thing to do.
  if (bad.length > 0) ctx.addIssue({ code: 'custom', message: `not an IP address or CIDR: ${bad.join(', ')}` });
});

/**
 * Parses the variables a schema names out of the environment (an empty one counts as unset, as in
 * most shells' `FOO= cmd`); throws ConfigError with one line per bad variable, never its value.
 */
export function parseEnv<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv): z.infer<S> {
  const present = Object.fromEntries(
    Object.entries(env).filter(([key, v]) => key in schema.shape && v !== undefined && v !== ''),
  );
  const parsed = schema.safeParse(present);
  if (parsed.success) return parsed.data;
  const lines = new Map<string, string>();
  for (const issue of parsed.error.issues) {
    const name = String(issue.path[0] ?? 'environment');
    if (!lines.has(name)) lines.set(name, `${name}: ${issue.message}`);
  }
  throw new ConfigError([...lines.values()]);
}

/**
 * A value that surely is a path, so that it can be echoed in an error without leaking a secret set
 * there by mistake: absolute or ./-relative, not a URL, and in a directory that exists other than
 * the root. A token may start with / (base64 does), but its "directory" (`/9j` of `/9j/4AAQ…`) is
 * none that exists, and a name straight under / is shown neither.
 */
function surelyPath(value: string): boolean {
  if (!/^(\/|\.{1,2}\/|[A-Za-z]:[\\/])/.test(value) || value.includes('://') || value.includes('@')) return false;
  const dir = path.dirname(path.resolve(value));
  if (dir === path.parse(dir).root) return false;
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** The suffix that names a file holding a secret's value instead of the value itself. */
export const FILE_SUFFIX = '_FILE';

/**
 * The environment with each secret given as `<NAME>_FILE` replaced by the file's content (its
 * trailing newlines dropped), as the official PostgreSQL image does. Setting both forms, or naming a
 * file that cannot be read or is empty, is a configuration error naming the variable; the content
 * never appears in a message. `from` tells which secrets came from files (for the parse errors).
 */
export function withSecretFiles(
  env: NodeJS.ProcessEnv,
  secrets: readonly string[],
): { env: NodeJS.ProcessEnv; from: Set<string>; problems: string[] } {
  const resolved: NodeJS.ProcessEnv = { ...env };
  const from = new Set<string>();
  const problems: string[] = [];
  for (const name of secrets) {
    const fileVar = `${name}${FILE_SUFFIX}`;
    const file = env[fileVar];
    if (file === undefined || file === '') continue;
    if (env[name] !== undefined && env[name] !== '') {
      problems.push(`${fileVar}: ${name} is set too; set only one of them`);
      continue;
    }
    let content: string;
    try {
      content = readFileSync(file, 'utf8').replace(/[\r\n]+$/, '');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // The path is worth showing, unless it is the secret itself, set here by mistake
      // (DATABASE_URL_FILE=postgres://user:password@..., a token starting with /): only a sure path is echoed.
      const shown = surelyPath(file)
        ? file
        : 'the file it names (not shown: it is in no directory there is; give the path of a file holding the value, not the value)';
      problems.push(`${fileVar}: cannot read ${shown}${code ? ` (${code})` : ''}`);
      continue;
    }
    if (content === '') {
      problems.push(`${fileVar}: ${file} is empty`);
      continue;
    }
    resolved[name] = content;
    from.add(name);
  }
  return { env: resolved, from, problems };
}

/** parseEnv over the environment with its `<NAME>_FILE` secrets read (withSecretFiles). */
export function parseEnvWithSecretFiles<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv, secrets: readonly string[]): z.infer<S> {
  const { env: resolved, from, problems } = withSecretFiles(env, secrets);
  let parsed: z.infer<S> | undefined;
  try {
    parsed = parseEnv(schema, resolved);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // Which file to fix: "PARTNER_TOKEN (from PARTNER_TOKEN_FILE): must be ...".
    for (const line of err.problems) {
      const name = line.slice(0, line.indexOf(':'));
      problems.push(from.has(name) ? `${name} (from ${name}${FILE_SUFFIX})${line.slice(name.length)}` : line);
    }
  }
  if (problems.length > 0 || parsed === undefined) throw new ConfigError(problems);
  return parsed;
}
