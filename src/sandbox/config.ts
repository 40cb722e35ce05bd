import { createPublicKey } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../config/config-error.js';
import { addressList, httpUrl, integer, type LogFormat, logFormat, type LogLevel, logLevel, parseEnvWithSecretFiles } from '../config/env.js';
import { partnerTokenSchema } from '../provider/schemas.js';
import type { Faults } from './faults.js';

// Fixed, documented defaults: the simulator is for local runs, docker-compose and CI, never production.
export const SANDBOX_DEFAULT_PARTNER_TOKEN = 'sandboxPartnerTokenForLocalDevelopmentOnlyNeverUseInProduction01';
export const SANDBOX_DEFAULT_CLIENT_ID = 'sandbox-client';
export const SANDBOX_DEFAULT_CLIENT_SECRET = 'sandbox-client-secret';
/** Fabricated CPFs with valid check digits (the digits of pi, e and phi). */
export const SANDBOX_DEFAULT_CPFS = {
  costSavingReject: '31415926590',
  standardReject: '27182818205',
  approve: '16180339805',
} as const;
/** Loopback and the private ranges a docker network uses. */
export const SANDBOX_DEFAULT_ALLOWED_IPS = [
  '127.0.0.1/32',
  '::1/128',
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  'fc00::/7',
];

const publicKeyPem = z
  .string()
  .transform((v) => v.replace(/\\n/g, '\n').trim())
  .refine((pem) => {
    try {
      const key = createPublicKey({ key: pem, format: 'pem' });
      return key.asymmetricKeyType === 'rsa' || (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1');
    } catch {
      return false;
    }
  }, 'must be an RSA or P-256 public key in PEM (-----BEGIN PUBLIC KEY-----)');

const cpf = z.string().trim().regex(/^[0-9]{11}$/, 'must be exactly 11 digits');
/** A share of calls: a decimal number from 0 to 1. */
const rate = z
  .string()
  .trim()
  .regex(/^(0(\.[0-9]+)?|1(\.0+)?)$/, 'must be a number from 0 to 1')
  .transform(Number);

const envSchema = z.object({
  SANDBOX_HOST: z.string().trim().min(1, 'must not be empty').default('127.0.0.1'),
  SANDBOX_PORT: integer(0, 65535).default(4010),
  SANDBOX_CALLBACK_URL: httpUrl.optional(),
  SANDBOX_DELAY_MS: integer(0, 3_600_000).default(10_000),
  SANDBOX_DATA_DIR: z.string().trim().min(1, 'must not be empty').optional(),
  SANDBOX_PARTNER_TOKEN: partnerTokenSchema.default(SANDBOX_DEFAULT_PARTNER_TOKEN),
  SANDBOX_CLIENT_ID: z.string().min(1, 'must not be empty').default(SANDBOX_DEFAULT_CLIENT_ID),
  SANDBOX_CLIENT_SECRET: z.string().min(1, 'must not be empty').default(SANDBOX_DEFAULT_CLIENT_SECRET),
  SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY: publicKeyPem.optional(),
  SANDBOX_TOKEN_TTL_S: integer(1, 7 * 24 * 3600).default(3600),
  SANDBOX_CPF_COST_SAVING_REJECT: cpf.default(SANDBOX_DEFAULT_CPFS.costSavingReject),
  SANDBOX_CPF_STANDARD_REJECT: cpf.default(SANDBOX_DEFAULT_CPFS.standardReject),
  SANDBOX_CPF_APPROVE: cpf.default(SANDBOX_DEFAULT_CPFS.approve),
  SANDBOX_ALLOWED_IPS: addressList.default(SANDBOX_DEFAULT_ALLOWED_IPS),
  SANDBOX_MAX_RPS: integer(1, 1_000_000).optional(),
  SANDBOX_FAIL_503_RATE: rate.default(0),
  SANDBOX_TIMEOUT_AFTER_RECEIVE_RATE: rate.default(0),
  SANDBOX_RETRY_AFTER_S: integer(0, 3600).default(1),
  LOG_LEVEL: logLevel.default('info'),
  LOG_FORMAT: logFormat,
});

/** Every variable the simulator reads. */
export const SANDBOX_CONFIG_VARIABLES = Object.keys(envSchema.shape);

/** Its secrets: each may be given as <NAME>_FILE instead, as the gateway's. */
export const SANDBOX_SECRET_VARIABLES = ['SANDBOX_PARTNER_TOKEN', 'SANDBOX_CLIENT_SECRET'] as const satisfies ReadonlyArray<
  keyof typeof envSchema.shape
>;

export interface ScenarioCpfs {
  costSavingReject: string;
  standardReject: string;
  approve: string;
}

export interface SandboxConfig {
  host: string;
  port: number;
  /** Unset: results are computed but never delivered. */
  callbackUrl: string | undefined;
  delayMs: number;
  /** Where deliveries not yet made are kept across restarts; unset: ./data, or DATA_DIR in sandbox mode. */
  dataDir: string | undefined;
  partnerToken: string;
  partnerTokenIsDefault: boolean;
  clientId: string;
  clientSecret: string;
  clientSecretIsDefault: boolean;
  /** Set: the token endpoint also accepts RFC 7523 client assertions signed by its private key. */
  clientAssertionPublicKey: string | undefined;
  tokenTtlS: number;
  scenarioCpfs: ScenarioCpfs;
  allowedIps: string[];
  /** Failure injection at start (POST /_sandbox/faults changes it at run time). */
  faults: Faults;
  logLevel: LogLevel;
  /** Unset: pretty in development on a terminal, JSON otherwise (see defaultLogFormat). */
  logFormat: LogFormat | undefined;
}

/** Parses the simulator's environment; throws ConfigError with one line per bad variable. */
export function loadSandboxConfig(env: NodeJS.ProcessEnv = process.env): Readonly<SandboxConfig> {
  const e = parseEnvWithSecretFiles(envSchema, env, SANDBOX_SECRET_VARIABLES);
  const scenarioCpfs: ScenarioCpfs = {
    costSavingReject: e.SANDBOX_CPF_COST_SAVING_REJECT,
    standardReject: e.SANDBOX_CPF_STANDARD_REJECT,
    approve: e.SANDBOX_CPF_APPROVE,
  };
  if (new Set(Object.values(scenarioCpfs)).size < 3) {
    throw new ConfigError([
      'SANDBOX_CPF_APPROVE: the three scenario CPFs (SANDBOX_CPF_COST_SAVING_REJECT, SANDBOX_CPF_STANDARD_REJECT, SANDBOX_CPF_APPROVE) must differ',
    ]);
  }
  return Object.freeze({
    host: e.SANDBOX_HOST,
    port: e.SANDBOX_PORT,
    callbackUrl: e.SANDBOX_CALLBACK_URL,
    delayMs: e.SANDBOX_DELAY_MS,
    dataDir: e.SANDBOX_DATA_DIR,
    partnerToken: e.SANDBOX_PARTNER_TOKEN,
    partnerTokenIsDefault: e.SANDBOX_PARTNER_TOKEN === SANDBOX_DEFAULT_PARTNER_TOKEN,
    clientId: e.SANDBOX_CLIENT_ID,
    clientSecret: e.SANDBOX_CLIENT_SECRET,
    clientSecretIsDefault: e.SANDBOX_CLIENT_SECRET === SANDBOX_DEFAULT_CLIENT_SECRET,
    clientAssertionPublicKey: e.SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY,
    tokenTtlS: e.SANDBOX_TOKEN_TTL_S,
    scenarioCpfs: Object.freeze(scenarioCpfs),
    allowedIps: e.SANDBOX_ALLOWED_IPS,
    faults: Object.freeze({
      maxRps: e.SANDBOX_MAX_RPS ?? null,
      fail503Rate: e.SANDBOX_FAIL_503_RATE,
      timeoutAfterReceiveRate: e.SANDBOX_TIMEOUT_AFTER_RECEIVE_RATE,
      retryAfterS: e.SANDBOX_RETRY_AFTER_S,
    }),
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
  });
}

/** The file where the simulator keeps the deliveries it still owes (survives a restart). */
export function pendingDeliveriesFile(dataDir: string): string {
  return path.join(dataDir, 'sandbox-deliveries.json');
}

/** What the startup log may say about the settings: never a secret's value, never a CPF. */
export function describeSandboxConfig(config: Readonly<SandboxConfig>, redactUrl: (url: string) => string) {
  const defaults = SANDBOX_DEFAULT_CPFS;
  return {
    host: config.host,
    port: config.port,
    callbackUrl: config.callbackUrl === undefined ? null : redactUrl(config.callbackUrl),
    delayMs: config.delayMs,
    tokenTtlS: config.tokenTtlS,
    clientId: config.clientId,
    // Named "...Source" so that the logger's redaction of secret-named fields leaves the words readable.
    clientSecretSource: config.clientSecretIsDefault ? 'default' : 'custom',
    clientAssertions: config.clientAssertionPublicKey === undefined ? 'refused' : 'accepted',
    partnerTokenSource: config.partnerTokenIsDefault ? 'default' : 'custom',
    scenarioCpfsSource:
      config.scenarioCpfs.costSavingReject === defaults.costSavingReject &&
      config.scenarioCpfs.standardReject === defaults.standardReject &&
      config.scenarioCpfs.approve === defaults.approve
        ? 'default'
        : 'custom',
    allowedIps: config.allowedIps,
    faults: config.faults,
  };
}
