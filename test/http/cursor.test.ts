import { createHmac } from 'node:crypto';
import t from 'tap';
import { cursorCodec, feedCursor } from '../../src/http/cursor.js';

// The one cursor codec: the lists' signed cursors (a scope for the audit trail's) and the feed's.

const SECRET = 'a-secret-of-thirty-two-characters-or-more';
const AT = { t: '2026-01-01T00:00:00.000000Z', id: 42 };

t.test('a scoped codec signs with a key of its own: its cursors are refused by the lists and the other way round', (t) => {
  const lists = cursorCodec(SECRET);
  const audit = cursorCodec(SECRET, 'audit-cursor');
  t.same(audit.decode(audit.encode(AT)), AT);
  t.same(lists.decode(lists.encode(AT)), AT);
  t.throws(() => lists.decode(audit.encode(AT)), /the request is not valid/);
  t.throws(() => audit.decode(lists.encode(AT)), /the request is not valid/);
  // The key the audit routes derived before the codec took the scope: cursors already handed out stay valid.
  const before = cursorCodec(createHmac('sha256', SECRET).update('underwriting-gateway/audit-cursor/v1').digest('hex'));
  t.equal(audit.encode(AT), before.encode(AT));
  t.end();
});

t.test('the feed cursor round-trips a position and refuses anything else under `after`', (t) => {
  const position = { tx: '922337203685477580', id: 7 };
  t.same(feedCursor.decode(feedCursor.encode(position)), position);
  for (const bad of ['', 'x', Buffer.from('1.2.3').toString('base64url'), Buffer.from(`${2n ** 63n}.1`).toString('base64url'), 'a'.repeat(65)]) {
    t.throws(() => feedCursor.decode(bad), /the request is not valid/, `refused: ${JSON.stringify(bad)}`);
  }
  let refused: unknown;
  try {
    feedCursor.decode('x');
  } catch (err) {
    refused = err;
  }
  t.match(refused, { code: 'validation_failed', extra: { issues: [{ path: 'after', message: 'not a cursor issued by this service' }] } });
  t.end();
});
