import { createHmac, hkdfSync } from 'node:crypto';

/**
 * How an Idempotency-Key is stored (idempotency_keys.key, underwriting_requests.idempotency_key,
 * campaigns.idempotency_key): never as the client sent it. A key is the client's choice, and
 * clients build keys from what they have at hand (a CPF, an account number, a name); stored as
 * sent, such a key would reach every dump and backup of the database. Stored is `§` and 43
 * characters of base64url: an HMAC-SHA-256 of the key under a key derived (HKDF-SHA-256, its own
 * label) from a CPF_HASH_KEY, so a dump does not let anyone confirm a guessed key without it.
 *
 * `§` cannot begin a key as sent (printable ASCII only: idempotencyKeySchema), so a stored value
 * tells by itself whether it is a digest or a key stored as sent by a version before this one.
 */
export interface KeyDigester {
  /** The digest a key is stored under from now on (the first CPF_HASH_KEY). */
  digest(key: string): string;
  /**
   * What an earlier attempt with this key may be stored under: its digest under every
   * CPF_HASH_KEY (rotation), then the key as sent (a version before this one, or an instance of
   * it still running during a rolling deploy, stored keys so).
   */
  candidates(key: string): string[];
}

export const KEY_DIGEST_MARK = '§';
const LABEL = 'underwriting-gateway/idempotency-key/v1';

/** True when a stored key is a digest, not a key stored as sent by an earlier version. */
export const isKeyDigest = (stored: string): boolean => stored.startsWith(KEY_DIGEST_MARK);

/** The digester of the CPF_HASH_KEY list (the first key digests; the others are only looked for). */
export function keyDigester(hashKeys: readonly string[]): KeyDigester {
  if (hashKeys.length === 0) throw new Error('keyDigester needs at least one key');
  const derived = hashKeys.map((k) => Buffer.from(hkdfSync('sha256', Buffer.from(k, 'utf8'), Buffer.alloc(0), LABEL, 32)));
  const under = (secret: Buffer, key: string) => `${KEY_DIGEST_MARK}${createHmac('sha256', secret).update(key, 'utf8').digest('base64url')}`;
  return {
    digest: (key) => under(derived[0]!, key),
    candidates: (key) => [...derived.map((d) => under(d, key)), key],
  };
}
