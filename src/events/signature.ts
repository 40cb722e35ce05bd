import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks (standardwebhooks.com) signing: HMAC-SHA256 under the secret's bytes (the
 * base64 after "whsec_") of "id.timestamp.body", sent as `v1,<base64>`; several secrets (a
 * rotation's overlap) sign side by side, space-separated. A few lines on node:crypto rather than
 * the reference package, whose SHA-256 is pure JavaScript; the tests verify with it.
 */
export interface WebhookSigner {
  /** The three headers of one attempt; timestamp in Unix seconds, atMs the attempt's instant (which secrets still sign). */
  headers(id: string, timestamp: number, body: string, atMs?: number): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string>;
}

/** A signing secret, and when it stops signing (a rotated-out secret); none: it signs until replaced. */
export interface SigningSecret {
  secret: string;
  until?: Date | undefined;
}

const keyOf = (secret: string) => Buffer.from(secret.trim().replace(/^whsec_/, ''), 'base64');

export function webhookSigner(secrets: string | readonly SigningSecret[]): WebhookSigner {
  const keys = (typeof secrets === 'string' ? [{ secret: secrets }] : secrets).map((s) => ({ key: keyOf(s.secret), until: s.until?.getTime() }));
  return {
    headers(id, timestamp, body, atMs = timestamp * 1000) {
      const signed = `${id}.${timestamp}.${body}`;
      const signatures = keys
        .filter((k) => k.until === undefined || k.until > atMs)
        .map((k) => `v1,${createHmac('sha256', k.key).update(signed).digest('base64')}`);
      return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
    },
  };
}

/** A new secret: whsec_ and the base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
