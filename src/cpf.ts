import { createHash, createHmac, hash } from 'node:crypto';
import { asciiDigitOf, isDecimalDigit, receivedSpans, withAsciiDigitEscapes } from './digit-escapes.js';

/** Keyed hash (HMAC-SHA-256, hex) that finds stored requests by CPF without storing the CPF. */
export function hashCpf(cpf: string, key: string): string {
  return createHmac('sha256', key).update(cpf).digest('hex');
}

const BLOCK = 64;
const CPF_DIGITS = 11;

/**
 * hashCpf under one key, for many CPFs (a campaign's lines): the same HMAC-SHA-256 (RFC 2104)
 * computed as two one-shot hashes over buffers made once, the key's inner and outer pads already
 * in place, instead of an Hmac object (and its key set-up) per CPF. The buffers are written and
 * hashed synchronously, so one hasher may serve every caller of a process. Anything but 11 ASCII
 * digits goes through hashCpf.
 */
export function cpfHasher(key: string): (cpf: string) => string {
  let keyBytes = Buffer.from(key, 'utf8');
  if (keyBytes.length > BLOCK) keyBytes = createHash('sha256').update(keyBytes).digest();
  const inner = Buffer.alloc(BLOCK + CPF_DIGITS);
  const outer = Buffer.alloc(BLOCK + 32);
  for (let i = 0; i < BLOCK; i++) {
    const k = keyBytes[i] ?? 0;
    inner[i] = k ^ 0x36;
    outer[i] = k ^ 0x5c;
  }
  return (cpf) => {
    if (cpf.length !== CPF_DIGITS || !/^[0-9]{11}$/.test(cpf)) return hashCpf(cpf, key);
    inner.write(cpf, BLOCK, 'latin1');
    hash('sha256', inner, 'buffer').copy(outer, BLOCK);
    return hash('sha256', outer, 'hex');
  };
}

/** "12345678901" -> "***.456.789-**": enough for a person to recognise, not enough to use. */
export function maskCpf(cpf: string): string {
  return `***.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-**`;
}

/** The CPF's keyed hash under every configured key (newest first): rotation keeps old rows findable. */
export function hashCpfUnderEvery(cpf: string, keys: readonly string[]): string[] {
  return keys.map((key) => hashCpf(cpf, key));
}

/** "12345678901" -> "123.456.789-01", the way people (and some systems) write it. */
export function formatCpf(cpf: string): string {
  return `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`;
}

/** True when 11 digits are a CPF: both check digits hold (the Receita's mod-11 rule). */
export function isValidCpf(digits: string): boolean {
  if (!/^[0-9]{11}$/.test(digits)) return false;
  const check = (length: number) => {
    let sum = 0;
    for (let i = 0; i < length; i++) sum += Number(digits[i]) * (length + 1 - i);
    return ((sum * 10) % 11) % 10;
  };
  return check(9) === Number(digits[9]) && check(10) === Number(digits[10]);
}

/**
 * One digit as it may be typed or carried: a decimal digit of any script (ASCII, fullwidth ０-９ as
 * an East Asian keyboard types them, Arabic-Indic ٠-٩, Devanagari ०-९, ...), or an ASCII or
 * fullwidth digit escaped the way text that went through JSON, a URL or HTML carries it (\u0037,
 * \\u0037 escaped twice, \uff17, \x37, %37, %EF%BC%97, &#55;, &#x37;). Another script's digit
 * escaped (\u0665, %D9%A5, &#1637;) is read once written as the digit it stands for (digit-escapes.ts).
 */
// An escape's backslashes (`\\+`) are read only from the first of a run ((?<!\\)): read from each, a long run
// of backslashes (a stored raw body) costs time quadratic in its length.
const DIGIT = String.raw`(?:\p{Nd}|(?<!\\)\\+u00(?:3[0-9])|(?<!\\)\\+u[fF][fF]1[0-9]|(?<!\\)\\+x3[0-9]|%3[0-9]|%[eE][fF]%[bB][cC]%9[0-9]|&#0*(?:4[89]|5[0-7]);|&#[xX]0*3[0-9];)`;
/**
 * Between two groups of a CPF written 3-3-3-2: anything that is neither a letter nor a digit (a
 * dot, dash, slash, comma, white space, ...), or such a character escaped (%2E, \u002e, \/, &#46;).
 * `%`, `\` and `&` only as the start of an escape, so an escaped digit is never read as a separator
 * and a digit.
 */
const SEPARATOR = String.raw`(?:[^\p{L}\p{N}%\\&]|(?<!\\)\\+/|%(?:[01][0-9a-fA-F]|2[0-9a-fA-F]|5[fF])|(?<!\\)\\+u00(?:[01][0-9a-fA-F]|2[0-9a-fA-F]|5[fF])|&#0*(?:3[2-9]|4[0-7]|95);|&#[xX]0*(?:2[0-9a-fA-F]|5[fF]);)`;
/**
 * Invisible format characters, as a regex character class's contents: soft hyphen, zero-width space
 * and joiners, direction marks and embeddings, word joiner and invisible operators. Between two
 * digits they show them side by side (the BOM, U+FEFF, is white space to a regex: \s).
 */
export const INVISIBLE_FORMAT = String.raw`\u00AD\u200B-\u200F\u202A-\u202E\u2060-\u2064`;
/**
 * Between any two digits: a dot, dash, underscore, slash or white space (fullwidth too), or one of
 * them escaped; or an invisible format character (INVISIBLE_FORMAT). Narrower than SEPARATOR:
 * read between any digits, a comma or a parenthesis would join
 * numbers that merely stand near each other (`Tel (11) 92351-9085`, `Av. Paulista, 2546, 14384-077`)
 * into runs of which one in a hundred passes the check digits by chance, and stored text would be
 * masked for no CPF.
 */
const NARROW_SEPARATOR = String.raw`(?:[.\-_/\s\uFF0D\uFF0E\uFF0F\uFF3F${INVISIBLE_FORMAT}]|(?<!\\)\\+/|%(?:09|2[0dDeEfF]|5[fF])|(?<!\\)\\+u00(?:09|2[0dDeEfF]|5[fF])|&#0*(?:9|32|4[5-7]|95);|&#[xX]0*(?:9|2[0dDeEfF]|5[fF]);)`;
/**
 * Digits, each from the next by at most two narrow separators (bare, 712.345.678-17, escaped), or
 * a CPF's four groups 3-3-3-2, each from the next by any number of any separator (712 . 345 . 678
 * - 17, 712,345,678,17, 712....345....678....17), not part of a longer number: how people write a
 * CPF in free text, and how text that was escaped carries one. No text reads as both a SEPARATOR
 * and a DIGIT, so a run is read one way only and one that falls short is given back once: time
 * linear in the text, however long its separators.
 */
const GROUPS = String.raw`(?<!\p{Nd})${DIGIT}{3}(?:${SEPARATOR}+${DIGIT}{3}){2}${SEPARATOR}+${DIGIT}{2}(?!\p{Nd})`;
const DIGIT_RUN = new RegExp(`${GROUPS}|${DIGIT}(?:${NARROW_SEPARATOR}{0,2}${DIGIT})*`, 'gu');
/**
 * The grouped form alone, read besides DIGIT_RUN: a chain of digits DIGIT_RUN takes can hold the
 * first group of a CPF written in groups, which that reading never sees (`017.278--319;940 - 33`:
 * the chain 017.278--319 ends at `;`, and 278 is where the CPF's groups begin).
 */
const GROUP_RUN = new RegExp(GROUPS, 'gu');
/** Within a run: a separator (kept) or a digit (its token masked). */
const RUN_TOKEN = new RegExp(`(${SEPARATOR})|${DIGIT}`, 'gu');

/** A customerUuid that is a CPF (11 digits once its dashes and underscores go, check digits holding). */
export function customerUuidIsCpf(customerUuid: string): boolean {
  return isValidCpf(customerUuid.replace(/[-_]/g, ''));
}

/**
 * Free text with every CPF in it masked: any 11 consecutive digits of a run (written with or
 * without dots, dashes, underscores, slashes and white space, ASCII, fullwidth or escaped; or as
 * groups 3-3-3-2 with any separators: DIGIT_RUN) whose check digits hold become `*`, the
 * separators stay. Every
 * window of a longer run is tried, so no CPF hides behind a digit typed before it.
 */
export function maskCpfsInText(text: string): string {
  return findAndMaskCpfs(text).text;
}

/**
 * maskCpfsInText's masking, and the CPFs it masked (11 ASCII digits each, distinct, in order of
 * appearance): a callback's bytes are stored masked, and what they held is kept as keyed hashes.
 */
export function findAndMaskCpfs(text: string): { text: string; cpfs: string[] } {
  if (plainTextWithoutCpfRun(text) || fewerDigitsThanACpf(text)) return { text, cpfs: [] };
  // Read with other scripts' escaped digits written as the digits they are; masked where they stand as received.
  const escaped = withAsciiDigitEscapes(text);
  const source = escaped?.text ?? text;
  const found = new Set<string>();
  // A reading of a text: where its masked digit tokens stand, [start, end) pairs in order.
  const read = (reading: RegExp, source: string): number[] => {
    const masked: number[] = [];
    for (const run of source.matchAll(reading)) {
      const spans: number[] = [];
      let digits = '';
      for (const token of run[0].matchAll(RUN_TOKEN)) {
        if (token[1] !== undefined) continue;
        spans.push(run.index + token.index, run.index + token.index + token[0].length);
        digits += digitOfToken(token[0]);
      }
      let maskedTo = 0;
      for (let start = 0; start + 11 <= digits.length; start++) {
        const cpf = digits.slice(start, start + 11);
        if (!isValidCpf(cpf)) continue;
        found.add(cpf);
        for (let k = Math.max(start, maskedTo); k < start + 11; k++) masked.push(spans[2 * k]!, spans[2 * k + 1]!);
        maskedTo = start + 11;
      }
    }
    return masked;
  };
  // The grouped form is read on the text as received (a CPF whose groups begin inside a chain,
  // `017.278--319;940 - 33`, or whose first digits end another CPF, `111.444.777.351; 234; 567; 08`)
  // and on it with the chains' CPFs starred in place, token for character (a CPF in groups right
  // against one in a chain, `52998224725111;444;777;35`, has a digit beside it only in the first).
  // The masks are joined.
  const readAll = (of: string): number[][] => {
    const chains = read(DIGIT_RUN, of);
    const readings = [chains, read(GROUP_RUN, of)];
    if (chains.length > 0) readings.push(read(GROUP_RUN, starred(of, chains)));
    return readings;
  };
  // With escapes written out, the text with its escapes as they came is read too: there an escape's
  // last hex digits and the digits after it may show a CPF (`\U0001d7d52998224725`, `%u00052998224725`).
  const received = escaped ? [...readAll(source).map((spans) => receivedSpans(spans, escaped.moved)), ...readAll(text)] : readAll(text);
  if (found.size === 0) return { text, cpfs: [] };
  return { text: maskedAt(text, received), cpfs: [...found] };
}

/** The text with each [start, end) span (in order, none overlapping) replaced by as many `*`. */
function starred(text: string, spans: readonly number[]): string {
  let out = '';
  let cursor = 0;
  for (let i = 0; i < spans.length; i += 2) {
    out += `${text.slice(cursor, spans[i]!)}${'*'.repeat(spans[i + 1]! - spans[i]!)}`;
    cursor = spans[i + 1]!;
  }
  return out + text.slice(cursor);
}

/**
 * The text with each digit token that one of the readings masked ([start, end) pairs, each list in
 * order) replaced by one `*`. Two readings' tokens are the same, one inside the other (the `5` of
 * `&#53;`) or apart: a token inside one already replaced is skipped.
 */
function maskedAt(text: string, readings: readonly (readonly number[])[]): string {
  const next = readings.map(() => 0);
  let out = '';
  let cursor = 0;
  for (;;) {
    let pick = -1;
    for (let r = 0; r < readings.length; r++) {
      if (next[r]! < readings[r]!.length && (pick === -1 || readings[r]![next[r]!]! < readings[pick]![next[pick]!]!)) pick = r;
    }
    if (pick === -1) break;
    const start = readings[pick]![next[pick]!]!;
    const end = readings[pick]![next[pick]! + 1]!;
    next[pick]! += 2;
    if (start < cursor) continue;
    out += `${text.slice(cursor, start)}*`;
    cursor = end;
  }
  return out + text.slice(cursor);
}

/** The most digits in one run DIGIT_RUN or GROUP_RUN reads in the text (what plainTextWithoutCpfRun must agree with). */
export function longestDigitRun(text: string): number {
  let longest = 0;
  for (const [run] of [...text.matchAll(DIGIT_RUN), ...text.matchAll(GROUP_RUN)]) {
    let digits = 0;
    for (const [, separator] of run.matchAll(RUN_TOKEN)) if (separator === undefined) digits += 1;
    longest = Math.max(longest, digits);
  }
  return longest;
}

/**
 * True when the text is plain ASCII that cannot escape a digit (no `%`, `\` or `&`) and holds
 * neither run DIGIT_RUN reads with 11 digits or more: digits chained by at most two narrow
 * separators (PLAIN_KIND), or four maximal groups of 3, 3, 3 and 2 digits each apart from the next by
 * one or more characters that are neither letters nor digits. Decided in one pass, without the regex: a provider's JSON (timestamps with `:` in them)
 * and most free text are plain. Anything else (an escape, a character past ASCII) is false: the
 * regex decides.
 */
export function plainTextWithoutCpfRun(text: string): boolean {
  let chain = 0;
  let narrowGap = 0;
  // The group form: the last four groups chained (g1 oldest), the current group, the gap since the last.
  let g1 = 0;
  let g2 = 0;
  let g3 = 0;
  let g4 = 0;
  let group = 0;
  let gap = 0;
  let gapOk = true;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 32;
    const kind = c < 0x80 ? PLAIN_KIND[c]! : ESCAPE_OR_BEYOND;
    if (kind === DIGIT_KIND) {
      chain = chain > 0 && narrowGap <= 2 ? chain + 1 : 1;
      narrowGap = 0;
      if (chain >= CPF_DIGITS) return false;
      // A group starts: it continues the chain of groups only when separators alone stand since the last.
      if (group === 0 && !(gapOk && gap >= 1)) g1 = g2 = g3 = g4 = 0;
      group += 1;
      continue;
    }
    if (kind === ESCAPE_OR_BEYOND) return false;
    narrowGap = kind === NARROW_KIND ? narrowGap + 1 : 3;
    if (group > 0) {
      g1 = g2;
      g2 = g3;
      g3 = g4;
      g4 = group;
      if (g1 === 3 && g2 === 3 && g3 === 3 && g4 === 2) return false;
      group = 0;
      gap = 0;
      gapOk = true;
    }
    if (kind === LETTER_KIND) gapOk = false;
    gap += 1;
  }
  return true;
}

/** What each ASCII character is to plainTextWithoutCpfRun. */
const [OTHER_KIND, DIGIT_KIND, NARROW_KIND, LETTER_KIND, ESCAPE_OR_BEYOND] = [0, 1, 2, 3, 4] as const;
const PLAIN_KIND = Uint8Array.from({ length: 0x80 }, (_, c) => {
  if (c >= 48 && c <= 57) return DIGIT_KIND;
  if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122)) return LETTER_KIND;
  if (c === 37 || c === 92 || c === 38) return ESCAPE_OR_BEYOND;
  // NARROW_SEPARATOR's plain characters: . - _ / and white space.
  if (c === 46 || c === 45 || c === 95 || c === 47 || c === 32 || (c >= 9 && c <= 13)) return NARROW_KIND;
  return OTHER_KIND;
});

/** The ASCII digit a digit token (DIGIT) stands for: its last digit, or for an HTML decimal reference its code. */
function digitOfToken(token: string): string {
  const plain = asciiDigitOf(token.codePointAt(0)!);
  if (plain !== undefined) return plain;
  const decimal = /^&#0*(\d+);$/.exec(token);
  if (decimal) return String.fromCharCode(Number(decimal[1]));
  const hex = token.replace(/;$/, '');
  return hex.at(-1)!;
}

/**
 * True when an identifier a client chose (a request id) holds a CPF, however its digits are
 * separated: a run of `.`, `_`, `:` and `-` reads as one dash, so `529...982:247_25` is seen as the
 * CPF it is. A request id is logged and echoed as sent, so one that holds a CPF is replaced. About 1
 * in 100 runs of 11 digits passes the check by chance: fit to replace an id, never to refuse a request.
 */
export function identifierHoldsCpf(id: string): boolean {
  const asText = id.replace(/[._:-]+/g, '-');
  return maskCpfsInText(asText) !== asText;
}

/**
 * True when the text holds fewer than 11 digits in all: it cannot hold a CPF (most free text; no regex
 * run). No script's digits come before U+0660 but ASCII's: accented letters cost no look-up.
 */
function fewerDigitsThanACpf(text: string): boolean {
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // `&#` and `\u{` count as one: a hexadecimal reference to another script's digit may hold no ASCII digit (`&#xaea;`, `\u{aea}`: Gujarati 4).
    const digit =
      (c >= 48 && c <= 57) ||
      (c === 38 && text.charCodeAt(i + 1) === 35) ||
      (c === 92 && text.charCodeAt(i + 1) === 117 && text.charCodeAt(i + 2) === 123) ||
      (c >= 0x660 && isDecimalDigit(text.codePointAt(i)!));
    if (digit && ++digits >= CPF_DIGITS) return false;
  }
  return true;
}
