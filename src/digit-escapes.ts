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

/** A UTF-8 continuation byte, percent-encoded (after its `%`). */
const CONTINUATION = '[89abAB][0-9a-fA-F]';

/**
 * Escapes of a character, as a sticky regex (tried where one may begin): JSON's `\u0665`,
 * percent-encoded UTF-8 (as many continuation bytes as its lead byte says; a two-byte sequence's
 * lead as `twoByteLead` allows; each `%` may be written `%25` as often as `percent` allows: text
 * encoded again, `%252E`), an HTML reference (its `;` may be left out, as HTML reads `&#53` and
 * `&#x35` too, where no digit of its base follows), then `more`, then the forms read by name:
 * JavaScript's `escape()` (`%u0665`), Python's `\U0001d7ce` and a JavaScript code point escape
 * (`\u{665}`). Every form's numbered groups stand where codePointOf reads them; the named ones come
 * after them all, so that `more` numbers its own groups as if they were not there. A high surrogate
 * half right before a low one, each in any of these forms (`\ud835\udfce`, `\u{d835}\u{dfce}`,
 * `%uD835%uDFCE`, `\ud835\u{dfce}`), is one character: rewritten() joins them.
 */
function escapes(twoByteLead: string, percent: string, more = ''): RegExp {
  return new RegExp(
    String.raw`(?<!\\)\\+u([0-9a-fA-F]{4})` +
      `|${percent}(${twoByteLead})${percent}(${CONTINUATION})|${percent}([eE][0-9a-fA-F])${percent}(${CONTINUATION})${percent}(${CONTINUATION})` +
      `|${percent}([fF][0-4])${percent}(${CONTINUATION})${percent}(${CONTINUATION})${percent}(${CONTINUATION})` +
      String.raw`|&#(?:[xX]0*([0-9a-fA-F]{1,6})(?:;|(?![0-9a-fA-F]))|0*([0-9]{1,7})(?:;|(?![0-9])))${more}` +
      `|${percent}[uU](?<percentUnit>[0-9a-fA-F]{4})` +
      String.raw`|(?<!\\)\\+U(?<python>[0-9a-fA-F]{8})` +
      String.raw`|(?<!\\)\\+u\{0*(?<brace>[0-9a-fA-F]{1,6})\}`,
    'y',
  );
}

/**
 * A `%` as written once, and as written by text encoded any number of times more (`%25`, `%2525`,
 * `%252525`: a URL carried through as many systems). Read unbounded in linear time: `25` begins no
 * escape's first byte but an ASCII one's, and the sticky regex is tried once per `%`.
 */
const PERCENT_ONCE = '%';
const PERCENT_ENCODED_AGAIN = '%(?:25)*';

/** An escape that may be a digit past U+065F (no two-byte lead below D9 encodes one). */
const ESCAPE = escapes('[dD][9a-fA-F]', PERCENT_ONCE);
/**
 * Any escape of one character the scrubber reads through: an ASCII one's too (`%2E`, `\x2e`), JSON's
 * short ones (`\n`, `\t`, `\/`: a line break between a CPF's groups), and HTML's named references
 * (`&nbsp;`, `&period;`), which it reads as what no digit is. With `percent`, its percent escapes.
 */
const anyEscape = (percent: string) =>
  escapes(
    '[cdCD][0-9a-fA-F]',
    percent,
    // Not the `%25` before an escape() form encoded again (`%25u0665`): the form's own, read after
    // `more`. Looked ahead from the `%`, once: after the percent's `(?:25)*`, it would be read again at
    // each step that backtracks, time quadratic in a run of `25`.
    String.raw`|(?!%(?:25)*[uU][0-9a-fA-F]{4})${percent}([0-7][0-9a-fA-F])|(?<!\\)\\+x([0-9a-fA-F]{2})|(?<!\\)\\+([nrtbf/"'])|&([a-zA-Z][a-zA-Z0-9]{1,31});`,
  );
const ANY_ESCAPE = anyEscape(PERCENT_ONCE);
/**
 * ANY_ESCAPE for text percent-encoded again (`%252E`, `%2535`): a reading of its own, besides
 * ANY_ESCAPE's, since `%25` followed by two hex digits is also a `%` encoded once before text that
 * begins with them (`%25123`: `%123`).
 */
const ANY_ESCAPE_ENCODED_AGAIN = anyEscape(PERCENT_ENCODED_AGAIN);

/** What every escape of a digit past U+065F begins with: most text has none, and is not scanned. */
const MAY_ESCAPE_DIGIT = /\\u(?!00)|\\U|%[d-fD-FuU]|&#/;

const DECIMAL_DIGIT = /^\p{Nd}$/u;

/** True when a code point is a decimal digit of some script (Unicode's Nd). */
export function isDecimalDigit(codePoint: number): boolean {
  return DECIMAL_DIGIT.test(String.fromCodePoint(codePoint));
}
/** Digits past ASCII met so far, by code point: the walk to a run's zero is made once for each. */
const KNOWN_DIGITS = new Map<number, string>();

/** The ASCII digit a decimal digit of any script stands for (Unicode writes each script's as a run of ten, 0 to 9), or undefined. */
export function asciiDigitOf(codePoint: number): string | undefined {
  if (codePoint >= 48 && codePoint <= 57) return String.fromCharCode(codePoint);
  if (codePoint < 0x660 || codePoint > 0x10ffff) return undefined;
  const known = KNOWN_DIGITS.get(codePoint);
  if (known !== undefined) return known;
  if (!isDecimalDigit(codePoint)) return undefined;
  let zero = codePoint;
  while (isDecimalDigit(zero - 1)) zero--;
  const digit = String.fromCharCode(48 + ((codePoint - zero) % 10));
  KNOWN_DIGITS.set(codePoint, digit);
  return digit;
}

const hexByte = (text: string) => Number.parseInt(text, 16);

/** The code point a high and a low surrogate half stand for together. */
const joinedHalves = (high: number, low: number) => 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
const isHighHalf = (codePoint: number) => codePoint >= 0xd800 && codePoint <= 0xdbff;
const isLowHalf = (codePoint: number) => codePoint >= 0xdc00 && codePoint <= 0xdfff;

/** The code point a match of escapes() stands for. */
function codePointOf(m: RegExpMatchArray): number {
  const named = m.groups;
  if (named !== undefined) {
    const { brace, percentUnit, python } = named;
    if (brace !== undefined) return hexByte(brace);
    if (percentUnit !== undefined) return hexByte(percentUnit);
    if (python !== undefined) return hexByte(python);
  }
  if (m[1] !== undefined) return hexByte(m[1]);
  if (m[2] !== undefined) return ((hexByte(m[2]) & 0x1f) << 6) | (hexByte(m[3]!) & 0x3f);
  if (m[4] !== undefined) return ((hexByte(m[4]) & 0x0f) << 12) | ((hexByte(m[5]!) & 0x3f) << 6) | (hexByte(m[6]!) & 0x3f);
  if (m[7] !== undefined) return ((hexByte(m[7]) & 0x07) << 18) | ((hexByte(m[8]!) & 0x3f) << 12) | ((hexByte(m[9]!) & 0x3f) << 6) | (hexByte(m[10]!) & 0x3f);
  if (m[11] !== undefined) return hexByte(m[11]);
  if (m[12] !== undefined) return Number.parseInt(m[12], 10);
  if (m[13] !== undefined || m[14] !== undefined) return hexByte(m[13] ?? m[14]!);
  // A JSON short escape or a named reference: no digit, read as a separator.
  return 0x20;
}

/**
 * The text with each escape of a digit past ASCII written as that digit (its ASCII one), and where
 * each stands in the text as received ([written start, written end, received start, received end],
 * in order); undefined when the text holds none (then it is read as it is).
 */
export function withAsciiDigitEscapes(text: string): Rewritten | undefined {
  if (!MAY_ESCAPE_DIGIT.test(text)) return undefined;
  return rewritten(text, ESCAPE, (codePoint, match) => {
    if (codePoint >= 0x660) return asciiDigitOf(codePoint);
    return codePoint < 0x80 && unreadAsciiForm(match) ? ASCII_WRITTEN[codePoint] : undefined;
  });
}

/**
 * An escape of an ASCII character in a form cpf.ts's DIGIT and SEPARATOR do not read as written: a
 * JavaScript code point escape (`\u{35}`, `\u{2e}`), an HTML reference without its `;` (`&#53`,
 * `&#x2E`), Python's `\U00000035` or `escape()`'s `%u0035`. Written out as the character
 * (ASCII_WRITTEN); what those read themselves (`\u0035`, `%35`, `&#53;`, `&#46;`) stays as written.
 */
function unreadAsciiForm(match: RegExpExecArray): boolean {
  if (match.groups?.python !== undefined || match.groups?.percentUnit !== undefined) return true;
  const escape = match[0];
  return escape.endsWith('}') || (escape.startsWith('&#') && !escape.endsWith(';'));
}

/**
 * What withAsciiDigitEscapes writes for an ASCII character escaped in an unread form: a digit or a
 * separator as itself, the three that begin an escape (`\`, `%`, `&`) as a space (a separator, which
 * begins none), a letter not at all (kept escaped: it parts digits as it is).
 */
const ASCII_WRITTEN: readonly (string | undefined)[] = Array.from({ length: 0x80 }, (_, c) => {
  const character = String.fromCharCode(c);
  if (/[A-Za-z]/.test(character)) return undefined;
  return '\\%&'.includes(character) ? ' ' : character;
});

const LETTER_OR_NUMBER = /^[\p{L}\p{N}]$/u;

/**
 * For the scrubber, which reads whatever is neither a letter nor a number as a gap between digits:
 * the text with each escaped digit written as that digit (ASCII's too: one escape, one digit), and
 * each escaped character that is neither a letter nor a number written as a space (`%2E`,
 * `\u002e`, `&#x2E;`, `%5C`, a lone surrogate half: their letters would end a run; a space keeps
 * the text one byte a character for the regex that reads it); undefined when nothing changes.
 */
export function withEscapesRead(text: string): Rewritten | undefined {
  return rewritten(text, ANY_ESCAPE, readForScrubber);
}

/** withEscapesRead with each percent escape read as text percent-encoded any number of times more would hold it; undefined when the text holds no `%25`. */
export function withEscapesReadEncodedAgain(text: string): Rewritten | undefined {
  return text.includes('%25') ? rewritten(text, ANY_ESCAPE_ENCODED_AGAIN, readForScrubber) : undefined;
}

/** What withEscapesRead writes for an escaped character (ASCII's looked up: a query string's `%20`, `%2F`). */
function readForScrubber(codePoint: number): string | undefined {
  if (codePoint < 0x80) return ASCII_READ[codePoint];
  const digit = asciiDigitOf(codePoint);
  if (digit !== undefined) return digit;
  if (codePoint >= 0xd800 && codePoint <= 0xdfff) return ' ';
  if (codePoint > 0x10ffff) return undefined;
  return LETTER_OR_NUMBER.test(String.fromCodePoint(codePoint)) ? undefined : ' ';
}

/** readForScrubber's answer for each ASCII character: a digit as itself, a letter kept escaped, anything else a space. */
const ASCII_READ: readonly (string | undefined)[] = Array.from({ length: 0x80 }, (_, c) => {
  const character = String.fromCharCode(c);
  if (/[0-9]/.test(character)) return character;
  return /[A-Za-z]/.test(character) ? undefined : ' ';
});

/** A text with escapes written out, and where each stands in the text as received (receivedSpans). */
export interface Rewritten {
  text: string;
  moved: number[];
}

/**
 * The text with each escape that `read` reads written as what it returns. The sticky regex is tried
 * only where an escape can begin (a `\`, `%` or `&`), not at every position.
 */
function rewritten(text: string, escape: RegExp, read: (codePoint: number, match: RegExpExecArray) => string | undefined): Rewritten | undefined {
  let written = '';
  let cursor = 0;
  const moved: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x5c && c !== 0x25 && c !== 0x26) continue;
    escape.lastIndex = i;
    const match = escape.exec(text);
    if (match === null) continue;
    let end = i + match[0].length;
    let codePoint = codePointOf(match);
    if (isHighHalf(codePoint)) {
      // A high half right before a low one, however each is written: one character.
      escape.lastIndex = end;
      const low = escape.exec(text);
      const lowPoint = low === null ? 0 : codePointOf(low);
      if (low !== null && isLowHalf(lowPoint)) {
        codePoint = joinedHalves(codePoint, lowPoint);
        end += low[0].length;
      }
    }
    const as = read(codePoint, match);
    if (as !== undefined) {
      written += text.slice(cursor, i) + as;
      moved.push(written.length - as.length, written.length, i, end);
      cursor = end;
    }
    i = end - 1;
  }
  return moved.length === 0 ? undefined : { text: written + text.slice(cursor), moved };
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
