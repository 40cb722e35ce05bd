import { isSpanContextValid, type SpanContext } from '@opentelemetry/api';
import t from 'tap';
import { spanContextOf, traceparentOf } from '../../src/tracing/spans.js';

// spanContextOf reads a stored or incoming traceparent by hand (it runs twice or more per callback):
// it must accept and refuse exactly what the W3C form and the API's own validity check do.

/** The reading it replaced: the form by a regular expression, then the API's validity check. */
function byExpression(traceparent: string): SpanContext | undefined {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent);
  if (!m) return undefined;
  const context: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16) & 1, isRemote: true };
  return isSpanContextValid(context) ? context : undefined;
}

const GOOD = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

t.test('a traceparent is read as the W3C form and the API validity check read it, for every kind of flaw', async (t) => {
  const cases = [
    GOOD,
    GOOD.replace(/-01$/, '-00'),
    GOOD.replace(/-01$/, '-03'),
    GOOD.replace(/-01$/, '-fe'),
    GOOD.replace(/-01$/, '-0g'),
    GOOD.replace(/-01$/, '-0A'),
    `00-${'0'.repeat(32)}-b7ad6b7169203331-01`,
    `00-0af7651916cd43dd8448eb211c80319c-${'0'.repeat(16)}-01`,
    `00-${'0'.repeat(31)}1-${'0'.repeat(15)}1-01`,
    GOOD.toUpperCase(),
    GOOD.replace('0af7', '0AF7'),
    `01${GOOD.slice(2)}`,
    `ff${GOOD.slice(2)}`,
    `${GOOD}\n`,
    ` ${GOOD.slice(1)}`,
    GOOD.slice(0, -1),
    `${GOOD}-`,
    GOOD.replace('-b7ad', '_b7ad'),
    GOOD.replace('c-b7', 'cxb7'),
    GOOD.replace('1-01', '1_01'),
    GOOD.replace('0af7', '0a\uff17'),
    GOOD.replace('0af7', '0a/7'),
    GOOD.replace('0af7', '0a:7'),
    GOOD.replace('0af7', '0a`7'),
    GOOD.replace('0af7', '0ag7'),
    '',
  ];
  for (const text of cases) t.same(spanContextOf(text), byExpression(text), JSON.stringify(text));
  t.equal(spanContextOf(null), undefined);
  t.equal(spanContextOf(undefined), undefined);
});

t.test('random traceparents, good and spoilt one character at a time, read alike both ways', async (t) => {
  const hex = '0123456789abcdef';
  const alphabet = `${hex}ABCDEF-_ gz:/\`@\u00e9\uff10`;
  const pick = (chars: string) => chars[Math.floor(Math.random() * chars.length)]!;
  let differences = 0;
  let accepted = 0;
  for (let n = 0; n < 20_000; n++) {
    const id = (length: number) => Array.from({ length }, () => (Math.random() < 0.3 ? '0' : pick(hex))).join('');
    let text = `00-${id(32)}-${id(16)}-${pick(hex)}${pick(hex)}`;
    if (n % 2 === 1) {
      const at = Math.floor(Math.random() * text.length);
      text = `${text.slice(0, at)}${pick(alphabet)}${text.slice(at + 1)}`;
    }
    const expected = byExpression(text);
    if (expected) accepted++;
    if (JSON.stringify(spanContextOf(text)) !== JSON.stringify(expected)) differences++;
  }
  t.equal(differences, 0);
  t.ok(accepted > 5_000, `both readings accepted ${accepted} of 20,000`);
});

t.test('what is read is written back the same (the sampled flag only)', async (t) => {
  t.equal(traceparentOf(spanContextOf(GOOD)!), GOOD);
  t.equal(traceparentOf(spanContextOf(GOOD.replace(/-01$/, '-03'))!), GOOD);
});
