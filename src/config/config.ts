import { createPrivateKey } from 'node:crypto';
import { z } from 'zod';
import { ConfigError, variableOf } from './config-error.js';
import { addressList, commaList, httpUrl, integer, type LogFormat, logFormat, type LogLevel, logLevel, parseEnvWithSecretFiles, partnerTokenSchema } from './env.js';
import { isNeverAReceiver, NEVER_A_RECEIVER_MESSAGE } from '../http/receiver-address.js';


/** Used only outside production, and loudly: stored CPF hashes are only as secret as this key. */
export const DEV_CPF_HASH_KEY = 'underwriting-gateway-development-only-cpf-hash-key';

const LOCALHOST = ['127.0.0.1/32', '::1/128'];

const booleanFlag = z
  .string()
  .trim()
  .toLowerCase()
  .refine((v) => ['true', 'false', '1', '0', 'yes', 'no'].includes(v), 'must be true or false')
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** A base URL: its trailing slashes go, so paths append cleanly. */
const baseUrl = httpUrl.transform((v) => v.replace(/\/+$/, ''));

/**
 * An API key is presented as `Authorization: Bearer <key>`, one token without whitespace: a key
 * holding a space, a tab or a line break (a QUERY_API_KEYS_FILE with one key per line) could never
 * be presented, and every caller would be refused 401 by a gateway that started as if all was well.
 */
const sendableKeys = (keys: string[]): boolean => keys.every((k) => !/[\s\u0000-\u001f\u007f]/.test(k));
const SENDABLE_KEYS_MESSAGE = 'a key must hold no spaces, tabs or line breaks (separate keys with commas, not one per line)';

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

/**
 * Where outcome events are pushed. Unlike the provider's URL, userinfo and query strings are
 * allowed (receivers often authenticate that way); they are never logged or shown.
 */
const webhookUrls = commaList.superRefine((entries, ctx) => {
  if (entries.length === 0) ctx.addIssue({ code: 'custom', message: 'must list at least one http(s) URL' });
  const bad = entries.filter((e) => {
    try {
      const u = new URL(e);
      return u.protocol !== 'http:' && u.protocol !== 'https:';
    } catch {
      return true;
    }
  });
  // Never the entry itself: it may carry a secret.
  if (bad.length > 0) ctx.addIssue({ code: 'custom', message: `${bad.length} entry(ies) not an http(s) URL` });
  // As an endpoint written through the API: the worker's connections refuse these addresses anyway.
  const never = entries.filter((e) => !bad.includes(e) && isNeverAReceiver(new URL(e).hostname));
  if (never.length > 0) ctx.addIssue({ code: 'custom', message: `${never.length} entry(ies) ${NEVER_A_RECEIVER_MESSAGE}` });
});

/** Standard Webhooks: "whsec_" and the base64 of 24-64 random bytes. */
export function isWebhookSecret(v: string): boolean {
  const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(v.trim());
  if (!m) return false;
  const bytes = Buffer.from(m[1]!, 'base64');
  return bytes.length >= 24 && bytes.length <= 64 && bytes.toString('base64').replace(/=+$/, '') === m[1]!.replace(/=+$/, '');
}
const webhookSecret = z.string().refine(isWebhookSecret, 'must be whsec_ followed by the base64 of 24-64 random bytes');

/** An OTLP/HTTP endpoint: http(s), credentials (if any) go in OTEL_EXPORTER_OTLP_HEADERS instead. */
const otlpEndpoint = httpUrl;
const otlpProtocol = z.enum(['http/protobuf', 'http/json'], {
  error: 'must be http/protobuf or http/json (OTLP over gRPC is not supported)',
});
/** OTEL_TRACES_EXPORTER: a comma list of which only otlp (the default) and none are known here. */
const tracesExporter = commaList.refine(
  (names) => names.length > 0 && names.every((n) => n === 'otlp' || n === 'none'),
  'must be otlp or none',
);

/**
 * OTEL_TRACES_SAMPLER: the samplers the SDK knows (sdk-trace-base's config.js). Any other value the
 * SDK would replace by parentbased_always_on with only a diag line: a misspelt ratio sampler would
 * export every trace, at every trace's cost, so it stops the start instead.
 */
const TRACES_SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
// Both are read as the SDK reads them (getStringFromEnv, getNumberFromEnv): blank is unset, a name
// is matched as written (untrimmed: " traceidratio " is no sampler to the SDK, nor to root-ids.ts).
const blank = (v: string) => v.trim() === '';
const tracesSampler = z
  .string()
  .refine((v) => blank(v) || (TRACES_SAMPLERS as readonly string[]).includes(v), `must be one of ${TRACES_SAMPLERS.join(', ')}`);
/** OTEL_TRACES_SAMPLER_ARG: a ratio sampler's probability (the SDK would read 1 for one out of range). */
const samplerRatio = z.string().refine((v) => {
  const p = Number(v);
  return blank(v) || (Number.isFinite(p) && p >= 0 && p <= 1);
}, 'must be a number from 0 to 1 (the share of traces a ratio sampler keeps)');

/**
 * A connection string pg can parse (as pg-connection-string does: spaces and stray `%` encoded, an
 * empty host allowed): a password with an unencoded `#`, `/` or `?` would otherwise fail only when
 * the string is used, DATABASE_LISTEN_URL's as an uncaught exception after the server listens.
 * Never names the value (it holds the password).
 */
function parsesAsConnectionString(value: string): boolean {
  const str = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(value) ? encodeURI(value).replace(/%25(\d\d)/g, '%$1') : value;
  for (const candidate of [str, str.replace('@/', '@___DUMMY___/')]) {
    try {
      new URL(candidate, 'postgres://base');
      return true;
    } catch {
      /* try the next */
    }
  }
  return false;
}

const connectionString = z
  .string()
  .trim()
  .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// or postgresql:// URL')
  .refine(parsesAsConnectionString, 'is not a valid URL: percent-encode special characters (# / ? @ :) in the user name and password');

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().trim().min(1, 'must not be empty').default('0.0.0.0'),
  PORT: integer(0, 65535).default(3000),
  DATABASE_URL: connectionString.optional(),
  DATABASE_POOL_MODE: z.enum(['session', 'transaction']).default('session'),
  DATABASE_LISTEN_URL: connectionString.optional(),
  DATA_DIR: z.string().trim().min(1, 'must not be empty').default('./data'),
  MIGRATE_ON_START: booleanFlag.default(true),
  PROVIDER_BASE_URL: baseUrl.optional(),
  PARTNER_TOKEN: partnerTokenSchema.optional(),
  UPSTREAM_TIMEOUT_MS: integer(100, 120_000).default(10_000),
  PROVIDER_KEEP_ALIVE_MS: integer(100, 600_000).default(4_000),
  PROVIDER_MAX_RPS: integer(1, 100_000).default(50),
  PROVIDER_MAX_IN_FLIGHT: integer(1, 10_000).default(32),
  PROVIDER_CIRCUIT_FAILURES: integer(1, 1000).default(5),
  PROVIDER_CIRCUIT_OPEN_S: integer(1, 3600).default(30),
  SUBMIT_ALLOWED_IPS: addressList.default(LOCALHOST),
  CALLBACK_ALLOWED_IPS: addressList.optional(),
  QUERY_ALLOWED_IPS: addressList.default(LOCALHOST),
  QUERY_API_KEYS: commaList
    .refine((keys) => keys.every((k) => k.length >= 16), 'every key must be at least 16 characters')
    .refine(sendableKeys, SENDABLE_KEYS_MESSAGE)
    .optional(),
  CALLBACK_SECRET: secretString(16).optional(),
  TRUST_PROXY: addressList.optional(),
  CALLBACK_TIMEOUT_S: integer(1, 30 * 24 * 3600).default(3600),
  CPF_HASH_KEY: commaList
    .refine((keys) => keys.length > 0, 'must hold at least one key')
    .refine((keys) => keys.every((k) => k.length >= 32), 'every key must be at least 32 characters')
    .refine((keys) => new Set(keys).size === keys.length, 'must not repeat a key')
    .optional(),
  AUTH_URL: baseUrl.optional(),
  CLIENT_ID: z.string().min(1, 'must not be empty').optional(),
  CLIENT_SECRET: z.string().min(1, 'must not be empty').optional(),
  TOKEN_SCOPE: z.string().trim().min(1, 'must not be empty').default('sdk-kyc'),
  CLIENT_ASSERTION_KEY: pkcs8Pem.optional(),
  LOG_LEVEL: logLevel.default('info'),
  LOG_FORMAT: logFormat,
  ADMIN_API_KEYS: commaList
    .refine((keys) => keys.length > 0, 'must hold at least one key')
    .refine((keys) => keys.every((k) => k.length >= 16), 'every key must be at least 16 characters')
    .refine(sendableKeys, SENDABLE_KEYS_MESSAGE)
    .optional(),
  CORRELATION_SKEW_S: integer(0, 24 * 3600).default(300),
  EVENT_WEBHOOK_URLS: webhookUrls.optional(),
  EVENT_WEBHOOK_SECRET: webhookSecret.optional(),
  EVENT_WEBHOOK_TIMEOUT_MS: integer(100, 120_000).default(10_000),
  EVENT_RETRY_HORIZON_S: integer(1, 30 * 24 * 3600).default(259_200),
  EVENT_ENDPOINT_DISABLE_AFTER_S: integer(1, 30 * 24 * 3600).default(86_400),
  RETENTION_DAYS: integer(1, 36_500).optional(),
  // OpenTelemetry tracing (docs/tracing.md): what decides on, off, the wire format and the sampler
  // is checked here; the SDK reads its other standard variables (headers, timeout, resource) itself.
  OTEL_SDK_DISABLED: booleanFlag.optional(),
  OTEL_TRACES_EXPORTER: tracesExporter.optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpEndpoint.optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional(),
  OTEL_SERVICE_NAME: z.string().trim().min(1, 'must not be empty').optional(),
  OTEL_TRACES_SAMPLER: tracesSampler.optional(),
  OTEL_TRACES_SAMPLER_ARG: samplerRatio.optional(),
  CUSTOMER_UUID_ALLOW_CPF: booleanFlag.default(false),
  SHUTDOWN_DRAIN_MS: integer(0, 600_000).default(0),
});

/** Every variable the gateway reads (the sandbox's SANDBOX_* are its own). */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape);

/** The secrets: each may be given as <NAME>_FILE instead, the path of a file holding it. */
export const SECRET_VARIABLES = [
  'PARTNER_TOKEN',
  'CPF_HASH_KEY',
  'CALLBACK_SECRET',
  'QUERY_API_KEYS',
  'ADMIN_API_KEYS',
  'CLIENT_SECRET',
  'CLIENT_ASSERTION_KEY',
  'EVENT_WEBHOOK_SECRET',
  'DATABASE_URL',
  'DATABASE_LISTEN_URL',
] as const satisfies ReadonlyArray<keyof typeof envSchema.shape>;

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
  /** `transaction` behind a transaction-pooling PgBouncer: no named prepared statements, no session state. */
  databasePoolMode: 'session' | 'transaction';
  /** Where LISTEN connects (a direct or session-pooled connection); unset: databaseUrl. */
  databaseListenUrl: string | undefined;
  dataDir: string;
  migrateOnStart: boolean;
  /** Unset: sandbox mode, the built-in simulator serves the provider's API. */
  providerBaseUrl: string | undefined;
  partnerToken: string | undefined;
  upstreamTimeoutMs: number;
  /**
   * An idle connection to the provider is closed by the gateway after this long (unless the provider's
   * Keep-Alive header asks for less): below the provider's own idle timeout, a call never goes out on a
   * connection the provider is closing, which fails as "possibly received" and is never sent again.
   */
  providerKeepAliveMs: number;
  /** The provider's pace across every instance (provider/pacing.ts, docs/provider-pacing.md). */
  providerPacing: ProviderPacingConfig;
  submitAllowedIps: string[];
  callbackAllowedIps: string[];
  queryAllowedIps: string[];
  queryApiKeys: string[];
  callbackSecret: string | undefined;
  trustProxy: string[];
  callbackTimeoutS: number;
  /** The first of cpfHashKeys: it hashes new requests. */
  cpfHashKey: string;
  /** Every configured CPF hash key, newest first; lookup, export and erasure match under each. */
  cpfHashKeys: string[];
  cpfHashKeyIsDevelopmentDefault: boolean;
  /** Keys of the admin routes (personal data, audit, /v1/endpoints); empty: those routes refuse with 403. */
  adminApiKeys: string[];
  tokenClient: TokenClientConfig | undefined;
  logLevel: LogLevel;
  /** Unset: pretty in development on a terminal, JSON otherwise (see defaultLogFormat). */
  logFormat: LogFormat | undefined;
  sandboxMode: boolean;
  /** How far the provider's `started` may run behind our clock when a callback is matched. */
  correlationSkewS: number;
  /** Set when EVENT_WEBHOOK_URLS is: where and how outcome events are pushed. */
  eventWebhooks: EventWebhookConfig | undefined;
  eventRetryHorizonS: number;
  /** Timeout of one delivery attempt, to any endpoint. */
  eventWebhookTimeoutMs: number;
  /** An endpoint whose every attempt has failed for this long becomes disabled. */
  eventEndpointDisableAfterS: number;
  /** Unset: keep everything forever. Else requests, callbacks and events older than this are purged. */
  retentionDays: number | undefined;
  /** Unset: no tracing SDK is started (the API's no-op tracer, nothing exported). */
  tracing: TracingConfig | undefined;
  /** A customerUuid that is a valid CPF is accepted (partners whose own identifiers are 11-digit numbers); else refused 400. */
  customerUuidAllowCpf: boolean;
  /** After SIGTERM, /readyz answers 503 this long (everything else still served) before the listener closes. */
  shutdownDrainMs: number;
}

/** Set when spans are exported: an OTLP endpoint is configured and nothing turns tracing off. */
export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  tracesUrl: string;
  protocol: 'http/protobuf' | 'http/json';
  /** OTEL_SERVICE_NAME; unset: service.name from OTEL_RESOURCE_ATTRIBUTES, else DEFAULT_SERVICE_NAME. */
  serviceName: string | undefined;
}

export const DEFAULT_SERVICE_NAME = 'underwriting-gateway';

export interface ProviderPacingConfig {
  /** Provider calls started per second, at most, by all instances together. */
  maxRps: number;
  /** Provider calls in flight at once, at most, by all instances together. */
  maxInFlight: number;
  /** Consecutive failed calls (no answer, or a 5xx) that open the circuit. */
  circuitFailures: number;
  /** How long an open circuit stays shut before one instance probes the provider. */
  circuitOpenS: number;
}

export interface EventWebhookConfig {
  /** As configured, secrets included: used only to send, never logged or shown. */
  urls: string[];
  /** whsec_...; never logged. */
  secret: string;
  timeoutMs: number;
}


const REQUIRED_IN_PRODUCTION = [
  'DATABASE_URL',
  'PROVIDER_BASE_URL',
  'PARTNER_TOKEN',
  'CPF_HASH_KEY',
  'CALLBACK_ALLOWED_IPS',
] as const;

/**
 * Tracing is on when an OTLP endpoint is configured, unless OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none say otherwise (the standard variables' own rules).
 */
function tracingConfig(e: z.infer<typeof envSchema>): TracingConfig | undefined {
  if (e.OTEL_SDK_DISABLED === true || e.OTEL_TRACES_EXPORTER?.includes('none')) return undefined;
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`);
  if (tracesUrl === undefined) return undefined;
  return {
    tracesUrl,
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    serviceName: e.OTEL_SERVICE_NAME,
  };
}

/**
 * The variables parsed, or a ConfigError naming every bad one and, in production, every required
 * one missing beside them: a start refused for a malformed PORT also says DATABASE_URL is unset,
 * not on the next start.
 */
function parseOrListMissing(env: NodeJS.ProcessEnv): z.infer<typeof envSchema> {
  try {
    return parseEnvWithSecretFiles(envSchema, env, SECRET_VARIABLES);
  } catch (err) {
    if (!(err instanceof ConfigError) || env.NODE_ENV !== 'production') throw err;
    // Set as the parse sees it (an empty value is unset), or already told about (itself, or its _FILE).
    const named = new Set(err.problems.map(variableOf));
    const given = (name: string) => named.has(name) || named.has(`${name}_FILE`) || (env[name] ?? '') !== '' || (env[`${name}_FILE`] ?? '') !== '';
    throw new ConfigError([...err.problems, ...missingInProduction(given)]);
  }
}

/** A line for each variable production requires that `given` says is not set. */
function missingInProduction(given: (name: (typeof REQUIRED_IN_PRODUCTION)[number]) => boolean): string[] {
  return REQUIRED_IN_PRODUCTION.filter((name) => !given(name)).map((name) => `${name}: required when NODE_ENV=production`);
}

/** Parses the environment once; throws ConfigError with one line per bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  const e = parseOrListMissing(env);
  const problems: string[] = [];
  const production = e.NODE_ENV === 'production';

  if (production) problems.push(...missingInProduction((name) => e[name] !== undefined));
  if (e.PROVIDER_BASE_URL !== undefined && e.PARTNER_TOKEN === undefined && !production) {
    problems.push('PARTNER_TOKEN: required when PROVIDER_BASE_URL is set');
  }

  if (e.DATABASE_URL === undefined) {
    if (e.DATABASE_LISTEN_URL !== undefined) problems.push('DATABASE_LISTEN_URL: needs DATABASE_URL (the embedded database has no pooler)');
    if (e.DATABASE_POOL_MODE === 'transaction') problems.push('DATABASE_POOL_MODE: transaction needs DATABASE_URL (the embedded database has no pooler)');
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
  // An admin key must never double as a query key: whoever reads outcomes could then erase them.
  if (e.ADMIN_API_KEYS?.some((k) => e.QUERY_API_KEYS?.includes(k))) {
    problems.push('ADMIN_API_KEYS: must not repeat a key of QUERY_API_KEYS');
  }
  if (e.EVENT_WEBHOOK_URLS !== undefined && e.EVENT_WEBHOOK_SECRET === undefined) {
    problems.push('EVENT_WEBHOOK_SECRET: required when EVENT_WEBHOOK_URLS is set');
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const cpfHashKeys = e.CPF_HASH_KEY ?? [DEV_CPF_HASH_KEY];
  const sandboxMode = e.PROVIDER_BASE_URL === undefined && !production;
  const config: Config = {
    nodeEnv: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    databasePoolMode: e.DATABASE_POOL_MODE,
    databaseListenUrl: e.DATABASE_LISTEN_URL ?? e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    migrateOnStart: e.MIGRATE_ON_START,
    providerBaseUrl: e.PROVIDER_BASE_URL,
    partnerToken: e.PARTNER_TOKEN,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    providerKeepAliveMs: e.PROVIDER_KEEP_ALIVE_MS,
    providerPacing: {
      maxRps: e.PROVIDER_MAX_RPS,
      maxInFlight: e.PROVIDER_MAX_IN_FLIGHT,
      circuitFailures: e.PROVIDER_CIRCUIT_FAILURES,
      circuitOpenS: e.PROVIDER_CIRCUIT_OPEN_S,
    },
    submitAllowedIps: e.SUBMIT_ALLOWED_IPS,
    callbackAllowedIps: e.CALLBACK_ALLOWED_IPS ?? LOCALHOST,
    queryAllowedIps: e.QUERY_ALLOWED_IPS,
    queryApiKeys: e.QUERY_API_KEYS ?? [],
    callbackSecret: e.CALLBACK_SECRET,
    trustProxy: e.TRUST_PROXY ?? [],
    callbackTimeoutS: e.CALLBACK_TIMEOUT_S,
    cpfHashKey: cpfHashKeys[0]!,
    cpfHashKeys,
    cpfHashKeyIsDevelopmentDefault: e.CPF_HASH_KEY === undefined,
    adminApiKeys: e.ADMIN_API_KEYS ?? [],
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
    logFormat: e.LOG_FORMAT,
    sandboxMode,
    correlationSkewS: e.CORRELATION_SKEW_S,
    eventWebhooks:
      e.EVENT_WEBHOOK_URLS !== undefined && e.EVENT_WEBHOOK_SECRET !== undefined
        ? { urls: e.EVENT_WEBHOOK_URLS, secret: e.EVENT_WEBHOOK_SECRET.trim(), timeoutMs: e.EVENT_WEBHOOK_TIMEOUT_MS }
        : undefined,
    eventRetryHorizonS: e.EVENT_RETRY_HORIZON_S,
    eventWebhookTimeoutMs: e.EVENT_WEBHOOK_TIMEOUT_MS,
    eventEndpointDisableAfterS: e.EVENT_ENDPOINT_DISABLE_AFTER_S,
    retentionDays: e.RETENTION_DAYS,
    tracing: tracingConfig(e),
    customerUuidAllowCpf: e.CUSTOMER_UUID_ALLOW_CPF,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS,
  };
  return Object.freeze(config);
}

/** What `npm run migrate` needs: the database alone (no provider, no secrets but its URL). */
export type DatabaseConfig = Pick<Config, 'nodeEnv' | 'databaseUrl' | 'databasePoolMode' | 'dataDir' | 'logLevel' | 'logFormat'>;

const databaseEnvSchema = envSchema.pick({
  NODE_ENV: true,
  DATABASE_URL: true,
  DATABASE_POOL_MODE: true,
  DATA_DIR: true,
  LOG_LEVEL: true,
  LOG_FORMAT: true,
});

/** Parses only the database's variables; production still refuses the embedded database. */
export function loadDatabaseConfig(env: NodeJS.ProcessEnv = process.env): Readonly<DatabaseConfig> {
  const e = parseEnvWithSecretFiles(databaseEnvSchema, env, ['DATABASE_URL']);
  if (e.NODE_ENV === 'production' && e.DATABASE_URL === undefined) {
    throw new ConfigError(['DATABASE_URL: required when NODE_ENV=production']);
  }
  return Object.freeze({
    nodeEnv: e.NODE_ENV,
    databaseUrl: e.DATABASE_URL,
    databasePoolMode: e.DATABASE_POOL_MODE,
    dataDir: e.DATA_DIR,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
  });
}

/** Every secret value the configuration holds, for scrubbing text that comes from outside (a path, a header). */
export function configuredSecrets(config: Config): string[] {
  const values = [
    config.partnerToken,
    config.callbackSecret,
    ...config.queryApiKeys,
    ...config.adminApiKeys,
    ...(config.cpfHashKeyIsDevelopmentDefault ? [] : config.cpfHashKeys),
    config.tokenClient?.clientSecret,
    config.eventWebhooks?.secret,
  ];
  return values.filter((v): v is string => typeof v === 'string' && v !== '');
}
