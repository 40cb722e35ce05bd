/**
 * Another script's decimal digit as text that went through JSON, a URL or HTML carries it: `\u0665`
 * (Python's json.dumps writes every character past ASCII so), a surrogate pair `\ud835\udfce`,
 * `%D9%A5` (its UTF-8 bytes), `&#1637;`, `&#x665;`. The free-text rule (cpf.ts) reads ASCII's and
 * fullwidth digits escaped, and any script's digits as they are; these it reads once they are
 * written as the ASCII digit's escape of the same kind (`\u0035`, `%35`, `&#53;`): so a CPF typed in
 * Arabic-Indic or Devanagari digits is masked however the text was escaped on its way.
 *
 * Written out rather than added to the rule's regex: listing every script's digits in it (some 770,
 * in each escape form) made it a regex of about 100 KB that ran 15 to 20 times slower on every text
 * with an escape in it, which most kept callback bodies have.
 */

/** An escape that may be a character past ASCII, in the forms the rule reads: JSON (a pair whole), percent-encoded UTF-8, an HTML reference. */
const ESCAPE =
  /(?<!\\)(\\+)u([0-9a-fA-F]{4})(?:(?<!\\)\\+u([dD][c-fC-F][0-9a-fA-F]{2}))?|%([c-fC-F][0-9a-fA-F](?:%[89abAB][0-9a-fA-F]){1,3})|&#(?:[xX]0*([0-9a-fA-F]{1,6})|0*([0-9]{1,7}));/g;

/** What every such escape begins with (`\u00…` is below U+0100, and no script's digits but ASCII's are): most text has none, and is not scanned. */
const MAY_ESCAPE_DIGIT = /\\u(?!00)|%[c-fC-F]|&#/;

const DECIMAL_DIGIT = /^\p{Nd}$/u;

/** The ASCII digit another script's decimal digit stands for (Unicode writes each script's as a run of ten, 0 to 9), or undefined. */
export function asciiDigitOf(codePoint: number): string | undefined {
  if (codePoint >= 48 && codePoint <= 57) return String.fromCharCode(codePoint);
  if (codePoint < 0x660 || codePoint > 0x10ffff || !DECIMAL_DIGIT.test(String.fromCodePoint(codePoint))) return undefined;
  let zero = codePoint;
  while (DECIMAL_DIGIT.test(String.fromCodePoint(zero - 1))) zero--;
  return String.fromCharCode(48 + ((codePoint - zero) % 10));
}

/**
 * The text with each escape of a digit past ASCII written as the ASCII digit's escape of the same
 * kind, and where each stands in the text as received ([written start, written end, received start,
 * received end], in order); undefined when the text holds none (then it is read as it is).
 */
export function withAsciiDigitEscapes(text: string): { text: string; moved: number[] } | undefined {
  if (!MAY_ESCAPE_DIGIT.test(text)) return undefined;
  let written = '';
  let cursor = 0;
  const moved: number[] = [];
  for (const match of text.matchAll(ESCAPE)) {
    const [whole, backslashes, unit, low, percent, hex, decimal] = match;
    let codePoint: number;
    let ascii: (digit: string) => string;
    if (unit !== undefined) {
      const high = Number.parseInt(unit, 16);
      codePoint = low === undefined ? high : 0x10000 + ((high - 0xd800) << 10) + (Number.parseInt(low, 16) - 0xdc00);
      if (low !== undefined && (high < 0xd800 || high > 0xdbff)) continue;
      ascii = (digit) => `${backslashes}u003${digit}`;
    } else if (percent !== undefined) {
      const bytes = Buffer.from(percent.replaceAll('%', ''), 'hex');
      const decoded = bytes.toString('utf8');
      if (decoded.includes('\uFFFD') || Buffer.byteLength(decoded) !== bytes.length) continue;
      codePoint = decoded.codePointAt(0)!;
      if (decoded.length !== String.fromCodePoint(codePoint).length) continue;
      ascii = (digit) => `%3${digit}`;
    } else {
      codePoint = hex !== undefined ? Number.parseInt(hex, 16) : Number.parseInt(decimal!, 10);
      ascii = (digit) => `&#${48 + Number(digit)};`;
    }
    if (codePoint < 0x660) continue;
    const digit = asciiDigitOf(codePoint);
    if (digit === undefined) continue;
    const replacement = ascii(digit);
    written += text.slice(cursor, match.index) + replacement;
    moved.push(written.length - replacement.length, written.length, match.index, match.index + whole.length);
    cursor = match.index + whole.length;
  }
  if (moved.length === 0) return undefined;
  return { text: written + text.slice(cursor), moved };
}

/**
 * Positions in the written text (in order: a reading's [start, end) spans) as positions in the text
 * as received: past a written escape, shifted by what its writing changed (its end is the received
 * escape's end).
 */
export function receivedSpans(spans: readonly number[], moved: readonly number[]): number[] {
  const out: number[] = [];
  let m = 0;
  let shift = 0;
  for (const at of spans) {
    while (m < moved.length && moved[m + 1]! <= at) {
      shift = moved[m + 3]! - moved[m + 1]!;
      m += 4;
    }
    out.push(at + shift);
  }
  return out;
}
