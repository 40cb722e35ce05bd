import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { type WebhookTarget, webhookTarget } from '../../src/events/targets.js';
import { urlKeyer } from '../../src/events/url-key.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';

export const webhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/** A configured URL's target, keyed as a test instance (CPF_HASH_KEY of testConfig) keys it. */
export const configuredTarget = (url: string): WebhookTarget => webhookTarget(url, urlKeyer([TEST_CPF_HASH_KEY]).key);

/** Environment for an instance pushing events to these URLs. */
/**
 * Push to these URLs. The attempt timeout is long enough that a prompt receiver is never timed out
 * on a loaded host (CI runs two suites and a container build at once); a test of timeouts sets its own.
 */
export function pushEnv(urls: string[], secret: string, extra: Record<string, string> = {}): Record<string, string> {
  return { EVENT_WEBHOOK_URLS: urls.join(','), EVENT_WEBHOOK_SECRET: secret, EVENT_WEBHOOK_TIMEOUT_MS: '5000', ...extra };
}

export async function getJson(app: FastifyInstance, url: string, headers: Record<string, string> = {}) {
  const res = await app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, body: res.json() as any, text: res.body };
}

// Moved to test/helpers/until.ts; re-exported for test files written before the move.
export { until } from '../helpers/until.js';
