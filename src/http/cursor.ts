import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { validationFailed } from '../errors.js';

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

/** Signs and checks page cursors; every instance sharing the configuration accepts the others' cursors. */
export interface CursorCodec {
  encode(p: Position): string;
  /** Throws 400 validation_failed for anything this service did not issue. */
  decode(cursor: string): Position;
}

export function cursorCodec(secret: string): CursorCodec {
  // A key of its own, derived from the configured secret, so a cursor signature says nothing about CPF hashes.
  const key = createHmac('sha256', secret).update('underwriting-gateway/page-cursor/v1').digest();
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest().subarray(0, 16);
  const invalid = () => validationFailed([{ path: 'cursor', message: 'not a cursor issued by this service' }]);

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
