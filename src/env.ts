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
