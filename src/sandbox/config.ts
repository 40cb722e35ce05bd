import path from 'node:path';
import { ConfigError } from '../config/config-error.js';
import { type LogFormat, type LogLevel, parseEnvWithSecretFiles } from '../config/env.js';
import {
  SANDBOX_DEFAULT_CLIENT_SECRET,
  SANDBOX_DEFAULT_CPFS,
  SANDBOX_DEFAULT_PARTNER_TOKEN,
  SANDBOX_SECRET_VARIABLES,
  sandboxEnvSchema,
} from '../config/sandbox-env.js';
import type { Faults } from './faults.js';

// The simulator's variables and their defaults are read in config/sandbox-env.ts; here they become its config.
export {
  SANDBOX_CONFIG_VARIABLES,
  SANDBOX_DEFAULT_ALLOWED_IPS,
  SANDBOX_DEFAULT_CLIENT_ID,
  SANDBOX_DEFAULT_CLIENT_SECRET,
  SANDBOX_DEFAULT_CPFS,
  SANDBOX_DEFAULT_PARTNER_TOKEN,
  SANDBOX_DEFAULT_PORT,
} from '../config/sandbox-env.js';

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
  const e = parseEnvWithSecretFiles(sandboxEnvSchema, env, SANDBOX_SECRET_VARIABLES);
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
