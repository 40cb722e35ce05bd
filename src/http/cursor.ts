import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { validationFailed } from './errors.js';

/** Where a page ended: the last row's submitted_at (UTC, microseconds, as text) and id. */
export interface Position {
  t: string;
  id: number;
}

const position = z.strictObject({
  t: z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/),
  id: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
});

const SHAPE = /^[A-Za-z0-9_-]{1,300}\.[A-Za-z0-9_-]{22}$/;

/** Turns a position into an opaque cursor and back; decode throws 400 validation_failed for anything this service did not issue. */
export interface CursorCodec<P = Position> {
  encode(p: P): string;
  decode(cursor: string): P;
}

/** What every cursor this service refuses says, under the name of the parameter it came in. */
const notIssued = (parameter: string) => validationFailed([{ path: parameter, message: 'not a cursor issued by this service' }]);

/**
 * Signed page cursors (the `cursor` parameter of the lists); every instance sharing the
 * configuration accepts the others' cursors. The signing key is derived from the secret, so a
 * cursor's signature says nothing about CPF hashes; a scope ('audit-cursor') derives a key of its
 * own first, so that its cursors are never valid on another list.
 */
export function cursorCodec(secret: string, scope?: string): CursorCodec {
  const scoped = scope === undefined ? secret : createHmac('sha256', secret).update(`underwriting-gateway/${scope}/v1`).digest('hex');
  const key = createHmac('sha256', scoped).update('underwriting-gateway/page-cursor/v1').digest();
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest().subarray(0, 16);
  const invalid = () => notIssued('cursor');

  return {
    encode(p) {
      const payload = Buffer.from(JSON.stringify({ t: p.t, id: p.id })).toString('base64url');
      return `${payload}.${sign(payload).toString('base64url')}`;
    },
    decode(cursor) {
      if (!SHAPE.test(cursor)) throw invalid();
      const [payload = '', signature = ''] = cursor.split('.');
      const given = Buffer.from(signature, 'base64url');
      if (given.length !== 16 || !timingSafeEqual(given, sign(payload))) throw invalid();
      let decoded: unknown;
      try {
        decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        throw invalid();
      }
      const parsed = position.safeParse(decoded);
      if (!parsed.success) throw invalid();
      return parsed.data;
    },
  };
}

/** Where a feed page ended: the writing transaction's xid8 (as text) and the event's id. */
export interface FeedPosition {
  tx: string;
  id: number;
}

const FEED_DECODED = /^(\d{1,20})\.(\d{1,16})$/;

/**
 * The event feed's cursor (the `after` parameter): it only says where the last page ended, which
 * is no secret, so it is encoded, not signed; anything else is refused with 400.
 */
export const feedCursor: CursorCodec<FeedPosition> = {
  encode(p) {
    return Buffer.from(`${p.tx}.${p.id}`).toString('base64url');
  },
  decode(cursor) {
    const m = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? FEED_DECODED.exec(Buffer.from(cursor, 'base64url').toString('latin1')) : null;
    const id = m ? Number(m[2]) : NaN;
    if (!m || !Number.isSafeInteger(id) || BigInt(m[1]!) >= 2n ** 63n) throw notIssued('after');
    return { tx: m[1]!, id };
  },
};
