import { createCipheriv, createDecipheriv, hkdfSync, randomFillSync } from 'node:crypto';

/**
 * A queued submit's body (it holds the full CPF) is kept only sealed: AES-256-GCM under a key
 * derived by HKDF-SHA-256 from CPF_HASH_KEY with a label of its own, so the hashing key itself
 * never encrypts anything and no new secret has to be deployed. The customerUuid is bound in as
 * associated data: a sealed body moved to another row does not open.
 */
const LABEL = 'underwriting-gateway queued submit body v1';
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + IV_BYTES + TAG_BYTES;
/** IVs drawn from the CSPRNG at once (one call per this many seals, not one per seal: a campaign seals a body per line). */
const IVS_PER_DRAW = 1024;

export interface Sealer {
  /** version (1 byte) | IV (12) | GCM tag (16) | ciphertext. */
  seal(plain: string, customerUuid: string): Buffer;
  /** The plain text, or undefined when no configured key opens it (a key rotated away, a tampered row). */
  open(sealed: Uint8Array, customerUuid: string): string | undefined;
}

function deriveKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), LABEL, 32));
}

/** Seals under the first key (CPF_HASH_KEY's first entry); opens under any, so a rotation leaves the queue readable. */
export function sealerOf(secrets: readonly string[]): Sealer {
  if (secrets.length === 0) throw new Error('sealerOf needs at least one key');
  // Derived once per process (HKDF per seal cost as much as the sealing).
  const keys = secrets.map(deriveKey);
  // Random IVs, as before, drawn IVS_PER_DRAW at a time; each is used once (the pool is refilled,
  // never reread). The cipher copies its IV when created, so the pool's bytes may be overwritten later.
  const ivs = Buffer.allocUnsafe(IV_BYTES * IVS_PER_DRAW);
  let next = ivs.length;
  const nextIv = (): Buffer => {
    if (next === ivs.length) {
      randomFillSync(ivs);
      next = 0;
    }
    const iv = ivs.subarray(next, next + IV_BYTES);
    next += IV_BYTES;
    return iv;
  };
  return {
    seal(plain, customerUuid) {
      const iv = nextIv();
      const cipher = createCipheriv('aes-256-gcm', keys[0]!, iv);
      cipher.setAAD(Buffer.from(customerUuid, 'utf8'));
      // GCM's final() adds no bytes: update's output is the whole ciphertext, copied once into the sealed form.
      const body = cipher.update(plain, 'utf8');
      cipher.final();
      const sealed = Buffer.allocUnsafe(HEADER_BYTES + body.length);
      sealed[0] = VERSION;
      iv.copy(sealed, 1);
      cipher.getAuthTag().copy(sealed, 1 + IV_BYTES);
      body.copy(sealed, HEADER_BYTES);
      return sealed;
    },
    open(sealed, customerUuid) {
      const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
      if (bytes.length < HEADER_BYTES || bytes[0] !== VERSION) return undefined;
      const iv = bytes.subarray(1, 1 + IV_BYTES);
      const tag = bytes.subarray(1 + IV_BYTES, HEADER_BYTES);
      for (const key of keys) {
        try {
          const decipher = createDecipheriv('aes-256-gcm', key, iv);
          decipher.setAAD(Buffer.from(customerUuid, 'utf8'));
          decipher.setAuthTag(tag);
          return Buffer.concat([decipher.update(bytes.subarray(HEADER_BYTES)), decipher.final()]).toString('utf8');
        } catch {
          // Not this key: try the next.
        }
      }
      return undefined;
    },
  };
}
