import { validationFailed } from '../errors.js';
import type { FeedPosition } from './sql.js';

// The feed's cursor is opaque to clients; it only says where the last page ended, which is no
// secret, so it is encoded, not signed. Anything else is refused with 400.

const DECODED = /^(\d{1,20})\.(\d{1,16})$/;

export function encodeFeedCursor(p: FeedPosition): string {
  return Buffer.from(`${p.tx}.${p.id}`).toString('base64url');
}

export function decodeFeedCursor(cursor: string): FeedPosition {
  const m = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? DECODED.exec(Buffer.from(cursor, 'base64url').toString('latin1')) : null;
  const id = m ? Number(m[2]) : NaN;
  if (!m || !Number.isSafeInteger(id) || BigInt(m[1]!) >= 2n ** 63n) {
    throw validationFailed([{ path: 'after', message: 'not a cursor issued by this service' }]);
  }
  return { tx: m[1]!, id };
}
