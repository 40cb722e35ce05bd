import t from 'tap';
import { packKeys, unpackKeys } from '../../src/channels/announcer.js';

// Many keys share a notification; PostgreSQL refuses a payload of 8000 bytes or more.

t.test('keys are packed in order into payloads below the limit, and read back', async (t) => {
  const keys = Array.from({ length: 500 }, (_, i) => `customer-${i}-${'x'.repeat(100)}`);
  const payloads = packKeys(keys);
  t.ok(payloads.length > 1 && payloads.length < keys.length, `${payloads.length} payloads for ${keys.length} keys`);
  for (const p of payloads) t.ok(Buffer.byteLength(p) < 8000, `a payload of ${Buffer.byteLength(p)} bytes`);
  t.same(payloads.flatMap(unpackKeys), keys);
});

t.test('a key that fits alone, multi-byte or at the edge, gets a payload; one that cannot is dropped', async (t) => {
  const edge = 'e'.repeat(7900);
  const accents = 'ção'.repeat(100);
  t.same(packKeys([edge, 'a', accents]), [edge, `a\n${accents}`]);
  t.same(packKeys(['b', 'f'.repeat(7901), 'line\nbreak', '', 'c']), ['b\nc']);
  t.same(packKeys([]), []);
});

t.test("a payload of one key (an older instance's) reads as that key", async (t) => {
  t.same(unpackKeys('single-key'), ['single-key']);
  t.same(unpackKeys(''), []);
});
