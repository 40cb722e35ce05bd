import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks (standardwebhooks.com) signing: HMAC-SHA256 under the secret's bytes (the
 * base64 after "whsec_") of "id.timestamp.body", sent as `v1,<base64>`. A few lines on node:crypto
 * rather than the reference package, whose SHA-256 is pure JavaScript; the tests verify with it.
 */
export interface WebhookSigner {
  /** The three headers of one attempt; timestamp in Unix seconds. */
  headers(id: string, timestamp: number, body: string): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string>;
}

export function webhookSigner(secret: string): WebhookSigner {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return {
    headers(id, timestamp, body) {
      const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
      return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` };
    },
  };
}
