import { createHash, createHmac, hkdfSync } from 'node:crypto';

/**
 * What a configured URL's endpoint row, dispatch position and deliveries are named by (their
 * `key` / `url_key`): `ck_` and 32 hex digits of an HMAC-SHA-256 under a key derived (HKDF-SHA-256,
 * its own label) from the first CPF_HASH_KEY. A dump of the database does not let anyone confirm a
 * guessed URL (a URL may carry a secret) without that key.
 *
 * The HMAC is taken of the URL's legacy key (the first 32 hex digits of its unsalted SHA-256, what
 * named it before), so that rows in the legacy form can be re-keyed without knowing their URL
 * (see endpoints/rekey.ts). API endpoints are named by their random id instead.
 */
export interface UrlKeyer {
  /** A configured URL's key. */
  key(url: string): string;
  /** The key of a URL whose legacy key is `legacy`. */
  fromLegacy(legacy: string): string;
  /** The keys the URL had before: its legacy key, and its key under each other CPF_HASH_KEY (rotation). */
  previous(url: string): string[];
}

const LABEL = 'underwriting-gateway/endpoint-url-key/v1';

/** A legacy key: 32 hex digits (a keyed one starts with `ck_`, an API endpoint's with `ep_`). */
export const LEGACY_KEY = /^[0-9a-f]{32}$/;

/** The legacy key of a configured URL: the first 32 hex digits of its unsalted SHA-256. Only ever computed to find old rows. */
export function legacyUrlKey(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 32);
}

/** The keyer of the CPF_HASH_KEY list (the first key names; the others are only looked for). */
export function urlKeyer(hashKeys: readonly string[]): UrlKeyer {
  if (hashKeys.length === 0) throw new Error('urlKeyer needs at least one key');
  const derived = hashKeys.map((k) => Buffer.from(hkdfSync('sha256', Buffer.from(k, 'utf8'), Buffer.alloc(0), LABEL, 32)));
  const keyed = (secret: Buffer, legacy: string) => `ck_${createHmac('sha256', secret).update(legacy).digest('hex').slice(0, 32)}`;
  const fromLegacy = (legacy: string) => keyed(derived[0]!, legacy);
  return {
    key: (url) => fromLegacy(legacyUrlKey(url)),
    fromLegacy,
    previous(url) {
      const legacy = legacyUrlKey(url);
      const current = fromLegacy(legacy);
      return [...new Set([legacy, ...derived.slice(1).map((d) => keyed(d, legacy))])].filter((k) => k !== current);
    },
  };
}
