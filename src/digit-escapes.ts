/**
 * Another script's decimal digit as text that went through JSON, a URL or HTML carries it: `\u0665`
 * (Python's json.dumps writes every character past ASCII so), a surrogate pair `\ud835\udfce`,
 * `%D9%A5` (its UTF-8 bytes), `&#1637;`, `&#x665;`. The free-text rule (cpf.ts) and the scrubber
 * (observability/scrub.ts) read any script's digits as they are, and ASCII's and fullwidth digits
 * escaped; these they read once each is written as the digit it stands for, one character (never
 * as an ASCII escape, whose hex digits a reading could take for digits of their own: `%31`): so a
 * CPF typed in Arabic-Indic or Devanagari digits is masked however the text was escaped on its way.
 *
 * Written out rather than added to the rule's regex: listing every script's digits in it (some 770,
 * in each escape form) made it a regex of about 100 KB that ran 15 to 20 times slower on every text
 * with an escape in it, which most kept callback bodies have.
 */

/**
 * An escape that may be a digit past U+065F: JSON (a surrogate pair whole: a high half, then a low
 * one), percent-encoded UTF-8 (as many continuation bytes as its lead byte says; no lead below D9
 * encodes one), an HTML reference.
 */
const ESCAPE =
  /(?<!\\)(?:\\+u([dD][89abAB][0-9a-fA-F]{2})\\+u([dD][c-fC-F][0-9a-fA-F]{2})|\\+u([0-9a-fA-F]{4}))|%([dD][9a-fA-F])%([89abAB][0-9a-fA-F])|%([eE][0-9a-fA-F])%([89abAB][0-9a-fA-F])%([89abAB][0-9a-fA-F])|%([fF][0-4])%([89abAB][0-9a-fA-F])%([89abAB][0-9a-fA-F])%([89abAB][0-9a-fA-F])|&#(?:[xX]0*([0-9a-fA-F]{1,6})|0*([0-9]{1,7}));/g;

/** What every such escape begins with: most text has none, and is not scanned. */
const MAY_ESCAPE_DIGIT = /\\u(?!00)|%[d-fD-F]|&#/;

const DECIMAL_DIGIT = /^\p{Nd}$/u;
/** Digits past ASCII met so far, by code point: the walk to a run's zero is made once for each. */
const KNOWN_DIGITS = new Map<number, string>();

/** The ASCII digit a decimal digit of any script stands for (Unicode writes each script's as a run of ten, 0 to 9), or undefined. */
export function asciiDigitOf(codePoint: number): string | undefined {
  if (codePoint >= 48 && codePoint <= 57) return String.fromCharCode(codePoint);
  if (codePoint < 0x660 || codePoint > 0x10ffff) return undefined;
  const known = KNOWN_DIGITS.get(codePoint);
  if (known !== undefined) return known;
  if (!DECIMAL_DIGIT.test(String.fromCodePoint(codePoint))) return undefined;
  let zero = codePoint;
  while (DECIMAL_DIGIT.test(String.fromCodePoint(zero - 1))) zero--;
  const digit = String.fromCharCode(48 + ((codePoint - zero) % 10));
  KNOWN_DIGITS.set(codePoint, digit);
  return digit;
}

const hexByte = (text: string) => Number.parseInt(text, 16);

/** The code point an ESCAPE match stands for. */
function codePointOf(m: RegExpMatchArray): number {
  if (m[1] !== undefined) return 0x10000 + ((hexByte(m[1]) - 0xd800) << 10) + (hexByte(m[2]!) - 0xdc00);
  if (m[3] !== undefined) return hexByte(m[3]);
  if (m[4] !== undefined) return ((hexByte(m[4]) & 0x1f) << 6) | (hexByte(m[5]!) & 0x3f);
  if (m[6] !== undefined) return ((hexByte(m[6]) & 0x0f) << 12) | ((hexByte(m[7]!) & 0x3f) << 6) | (hexByte(m[8]!) & 0x3f);
  if (m[9] !== undefined) return ((hexByte(m[9]) & 0x07) << 18) | ((hexByte(m[10]!) & 0x3f) << 12) | ((hexByte(m[11]!) & 0x3f) << 6) | (hexByte(m[12]!) & 0x3f);
  return m[13] !== undefined ? hexByte(m[13]) : Number.parseInt(m[14]!, 10);
}

/**
 * The text with each escape of a digit past ASCII written as that digit (its ASCII one), and where
 * each stands in the text as received ([written start, written end, received start, received end],
 * in order); undefined when the text holds none (then it is read as it is).
 */
export function withAsciiDigitEscapes(text: string): { text: string; moved: number[] } | undefined {
  if (!MAY_ESCAPE_DIGIT.test(text)) return undefined;
  let written = '';
  let cursor = 0;
  const moved: number[] = [];
  for (const match of text.matchAll(ESCAPE)) {
    const codePoint = codePointOf(match);
    const digit = codePoint < 0x660 ? undefined : asciiDigitOf(codePoint);
    if (digit === undefined) continue;
    written += text.slice(cursor, match.index) + digit;
    moved.push(written.length - 1, written.length, match.index, match.index + match[0].length);
    cursor = match.index + match[0].length;
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
