import { createPublicKey } from 'node:crypto';
import { z } from 'zod';
import { addressList, httpUrl, integer, logFormat, logLevel, partnerTokenSchema } from './env.js';

// The sandbox's settings: its variables, their defaults and checks. Below the sandbox (sandbox/config.ts
// loads them) so that the known names (config-names.ts) come from here without config importing the simulator.

// Fixed, documented defaults: the simulator is for local runs, docker-compose and CI, never production.
export const SANDBOX_DEFAULT_PARTNER_TOKEN = 'sandboxPartnerTokenForLocalDevelopmentOnlyNeverUseInProduction01';
export const SANDBOX_DEFAULT_CLIENT_ID = 'sandbox-client';
export const SANDBOX_DEFAULT_CLIENT_SECRET = 'sandbox-client-secret';
/** Where the simulator listens unless SANDBOX_PORT says otherwise. */
export const SANDBOX_DEFAULT_PORT = 4010;
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

export const sandboxEnvSchema = z.object({
  SANDBOX_HOST: z.string().trim().min(1, 'must not be empty').default('127.0.0.1'),
  SANDBOX_PORT: integer(0, 65535).default(SANDBOX_DEFAULT_PORT),
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
export const SANDBOX_CONFIG_VARIABLES = Object.keys(sandboxEnvSchema.shape);

/** Its secrets: each may be given as <NAME>_FILE instead, as the gateway's. */
export const SANDBOX_SECRET_VARIABLES = ['SANDBOX_PARTNER_TOKEN', 'SANDBOX_CLIENT_SECRET'] as const satisfies ReadonlyArray<
  keyof typeof sandboxEnvSchema.shape
>;
