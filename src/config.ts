import { createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';

/** Used only outside production, and loudly: stored CPF hashes are only as secret as this key. */
export const DEV_CPF_HASH_KEY = 'underwriting-gateway-development-only-cpf-hash-key';

const LOCALHOST = ['127.0.0.1/32', '::1/128'];

const booleanFlag = z
  .string()
  .trim()
  .toLowerCase()
  .refine((v) => ['true', 'false', '1', '0', 'yes', 'no'].includes(v), 'must be true or false')
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const integer = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

const httpUrl = z
  .string()
  .trim()
  .refine((v) => {
    try {
      const u = new URL(v);
      return (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password;
    } catch {
      return false;
    }
  }, 'must be an http(s) URL without credentials in it')
  .transform((v) => v.replace(/\/+$/, ''));

function isAddressOrCidr(entry: string): boolean {
  const [address, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || !address) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

const commaList = z
  .string()
  .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean));

const addressList = commaList.superRefine((entries, ctx) => {
  const bad = entries.filter((e) => !isAddressOrCidr(e));
  // Addresses are not secrets, so naming the bad entry is the helpful thing to do.
  if (bad.length > 0) ctx.addIssue({ code: 'custom', message: `not an IP address or CIDR: ${bad.join(', ')}` });
});

const secretString = (min: number) => z.string().min(min, `must be at least ${min} characters`);

const pkcs8Pem = z
  .string()
  .transform((v) => v.replace(/\\n/g, '\n').trim())
  .refine((pem) => {
    if (!pem.startsWith('-----BEGIN PRIVATE KEY-----')) return false;
    try {
      const key = createPrivateKey({ key: pem, format: 'pem' });
      // The assertion is signed RS256 or ES256, so only RSA and P-256 keys can serve.
      return key.asymmetricKeyType === 'rsa' || key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
    } catch {
      return false;
    }
  }, 'must be a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----), RSA or EC P-256');

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().trim().min(1, 'must not be empty').default('0.0.0.0'),
  PORT: integer(0, 65535).default(3000),
  DATABASE_URL: z
    .string()
    .trim()
    .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// or postgresql:// URL')
    .optional(),
  DATA_DIR: z.string().trim().min(1, 'must not be empty').default('./data'),
  MIGRATE_ON_START: booleanFlag.default(true),
  PROVIDER_BASE_URL: httpUrl.optional(),
  PARTNER_TOKEN: z.string().regex(/^[A-Za-z0-9]{64}$/, 'must be exactly 64 letters or digits').optional(),
  UPSTREAM_TIMEOUT_MS: integer(100, 120_000).default(10_000),
  SUBMIT_ALLOWED_IPS: addressList.default(LOCALHOST),
  CALLBACK_ALLOWED_IPS: addressList.optional(),
  QUERY_ALLOWED_IPS: addressList.default(LOCALHOST),
  QUERY_API_KEYS: commaList
    .refine((keys) => keys.every((k) => k.length >= 16), 'every key must be at least 16 characters')
    .optional(),
  CALLBACK_SECRET: secretString(16).optional(),
  TRUST_PROXY: addressList.optional(),
  CALLBACK_TIMEOUT_S: integer(1, 30 * 24 * 3600).default(3600),
  CPF_HASH_KEY: secretString(32).optional(),
  AUTH_URL: httpUrl.optional(),
  CLIENT_ID: z.string().min(1, 'must not be empty').optional(),
  CLIENT_SECRET: z.string().min(1, 'must not be empty').optional(),
  TOKEN_SCOPE: z.string().trim().min(1, 'must not be empty').default('sdk-kyc'),
  CLIENT_ASSERTION_KEY: pkcs8Pem.optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

/** Every variable the gateway reads (the sandbox's SANDBOX_* are its own). */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape);

export interface TokenClientConfig {
  authUrl: string;
  clientId: string;
  clientSecret: string | undefined;
  scope: string;
  assertionKey: string | undefined;
}

export interface Config {
  nodeEnv: 'development' | 'production' | 'test';
  host: string;
  port: number;
  /** Unset: embedded PGlite under dataDir. */
  databaseUrl: string | undefined;
  dataDir: string;
  migrateOnStart: boolean;
  /** Unset: sandbox mode, the built-in simulator serves the provider's API. */
  providerBaseUrl: string | undefined;
  partnerToken: string | undefined;
  upstreamTimeoutMs: number;
  submitAllowedIps: string[];
  callbackAllowedIps: string[];
  queryAllowedIps: string[];
  queryApiKeys: string[];
  callbackSecret: string | undefined;
  trustProxy: string[];
  callbackTimeoutS: number;
  cpfHashKey: string;
  cpfHashKeyIsDevelopmentDefault: boolean;
  tokenClient: TokenClientConfig | undefined;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  sandboxMode: boolean;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`);
    this.name = 'ConfigError';
  }
}

const REQUIRED_IN_PRODUCTION = [
  'DATABASE_URL',
  'PROVIDER_BASE_URL',
  'PARTNER_TOKEN',
  'CPF_HASH_KEY',
  'CALLBACK_ALLOWED_IPS',
] as const;

/** Parses the environment once; throws ConfigError with one line per bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  // An empty variable means "not set", as in most shells' `FOO= cmd`.
  const present = Object.fromEntries(
    Object.entries(env).filter(([key, v]) => key in envSchema.shape && v !== undefined && v !== ''),
  );
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = new Map<string, string>();
    for (const issue of parsed.error.issues) {
      const name = String(issue.path[0] ?? 'environment');
      if (!lines.has(name)) lines.set(name, `${name}: ${issue.message}`);
    }
    throw new ConfigError([...lines.values()]);
  }
  const e = parsed.data;
  const problems: string[] = [];
  const production = e.NODE_ENV === 'production';

  if (production) {
    for (const name of REQUIRED_IN_PRODUCTION) {
      if (e[name] === undefined) problems.push(`${name}: required when NODE_ENV=production`);
    }
  }
  if (e.PROVIDER_BASE_URL !== undefined && e.PARTNER_TOKEN === undefined && !production) {
    problems.push('PARTNER_TOKEN: required when PROVIDER_BASE_URL is set');
  }

  const tokenVars = { AUTH_URL: e.AUTH_URL, CLIENT_ID: e.CLIENT_ID };
  const anyToken = e.AUTH_URL ?? e.CLIENT_ID ?? e.CLIENT_SECRET ?? e.CLIENT_ASSERTION_KEY;
  if (anyToken !== undefined) {
    for (const [name, value] of Object.entries(tokenVars)) {
      if (value === undefined) problems.push(`${name}: required when any of AUTH_URL, CLIENT_ID, CLIENT_SECRET, CLIENT_ASSERTION_KEY is set`);
    }
    if (e.CLIENT_SECRET === undefined && e.CLIENT_ASSERTION_KEY === undefined) {
      problems.push('CLIENT_SECRET: required when AUTH_URL is set, unless CLIENT_ASSERTION_KEY is');
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const sandboxMode = e.PROVIDER_BASE_URL === undefined && !production;
  const config: Config = {
    nodeEnv: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    migrateOnStart: e.MIGRATE_ON_START,
    providerBaseUrl: e.PROVIDER_BASE_URL,
    partnerToken: e.PARTNER_TOKEN,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    submitAllowedIps: e.SUBMIT_ALLOWED_IPS,
    callbackAllowedIps: e.CALLBACK_ALLOWED_IPS ?? LOCALHOST,
    queryAllowedIps: e.QUERY_ALLOWED_IPS,
    queryApiKeys: e.QUERY_API_KEYS ?? [],
    callbackSecret: e.CALLBACK_SECRET,
    trustProxy: e.TRUST_PROXY ?? [],
    callbackTimeoutS: e.CALLBACK_TIMEOUT_S,
    cpfHashKey: e.CPF_HASH_KEY ?? DEV_CPF_HASH_KEY,
    cpfHashKeyIsDevelopmentDefault: e.CPF_HASH_KEY === undefined,
    tokenClient:
      e.AUTH_URL !== undefined && e.CLIENT_ID !== undefined
        ? {
            authUrl: e.AUTH_URL,
            clientId: e.CLIENT_ID,
            clientSecret: e.CLIENT_SECRET,
            scope: e.TOKEN_SCOPE,
            assertionKey: e.CLIENT_ASSERTION_KEY,
          }
        : undefined,
    logLevel: e.LOG_LEVEL,
    sandboxMode,
  };
  return Object.freeze(config);
}
