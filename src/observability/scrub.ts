// The one scrubber for text from outside (a provider's error body, an error message, a URL) before
// it is stored in a row or written to a log: no CPF in any form, none of our secrets.
import querystring from 'node:querystring';
import { receivedSpans, type Rewritten, withEscapesRead, withEscapesReadEncodedAgain } from '../digit-escapes.js';

export const REDACTED = '[redacted]';

/**
 * One digit as it may be written: any number character (ASCII, fullwidth, Arabic-Indic, Devanagari
 * or any other script's decimal digit, a superscript), or a JSON/JS or HTML hex escape of an ASCII
 * or fullwidth digit (\u0037, \uff17, \x37, &#x37;). A percent escape (%37) and an HTML decimal
 * reference (&#55;) need no form of their own: the gap takes their `%`, `&#` and `;`, and their
 * digits count as digits (two where one was meant: over-eager, never under).
 */
const DIGIT = String.raw`(?:\p{N}|\\u00?3[0-9]|\\u[fF][fF]1[0-9]|\\x3[0-9]|&#[xX]0*3[0-9];)`;
/**
 * Between two digits of one number: any number of characters that are neither letters nor
 * digits, a `\` or `&` only where it does not begin a digit's escape. A gap never takes what a
 * digit could begin with, so a run is read one way only and a run that ends short of 11 digits is
 * given back once: time linear in the text, however long its gaps.
 */
const GAP = String.raw`(?:[^\p{L}\p{N}\\&]|\\(?!u00?3[0-9]|u[fF][fF]1[0-9]|x3[0-9])|&(?!#[xX]0*3[0-9];))*`;
/** The `%` or `&#` before a run's first digit and the `;` after its last, so they go with the run. */
const OPENING = String.raw`(?:%(?=3[0-9])|&#(?=0*(?:4[89]|5[0-7]);))?`;
const CLOSING = String.raw`(?:(?<=&#0*(?:4[89]|5[0-7]));)?`;
/**
 * Eleven or more digits with nothing but gaps between them, whatever separates them and however
 * many ("714 287 938 60", "714/287/938/60", "714....287....938....60", "714.287.938-60"), in any
 * script and however they are escaped: a CPF is 11 digits, and a longer run may hold one.
 * Over-eager on purpose (a long timestamp or a list of numbers may go too): a CPF must never pass.
 */
const DIGIT_RUN = new RegExp(`${OPENING}${DIGIT}(?:${GAP}${DIGIT}){10,}${CLOSING}`, 'gu');
/** DIGIT_RUN as a test: whether the text holds one at all (most do not). */
const HAS_DIGIT_RUN = new RegExp(DIGIT_RUN.source, 'u');

/** Text from outside, fit to store or log: CPF-like digit runs and the given secrets replaced, cut to maxChars. */
export function scrubText(text: string, secrets: ReadonlyArray<string | undefined> = [], maxChars = Infinity): string {
  let clean = text;
  for (const secret of secrets) if (secret && clean.includes(secret)) clean = clean.replaceAll(secret, REDACTED);
  clean = withoutDigitRuns(clean);
  return clean.length > maxChars ? clean.slice(0, maxChars) : clean;
}

/**
 * The text with DIGIT_RUN's runs redacted: those of the text as it is, and those of the text read
 * with its escapes written out (digit-escapes.ts, withEscapesRead), where the letters of an escaped
 * digit or separator (`\u0665`, `%D9%A5`, `&#x665;`, `%2E`, `\u002d`) would end a run and a run of
 * them may hold no ASCII digit; and, for text holding `%25`, read as text percent-encoded again
 * (withEscapesReadEncodedAgain: `714%252E287…`). All: as written, an escape's own digits count too
 * (`714%28793860` shows the digits of a CPF whatever `%28` stands for). Over-eager, never under.
 */
function withoutDigitRuns(text: string): string {
  if (tooFewDigitsForARun(text)) return text;
  const mayEscape = text.includes('\\') || text.includes('%') || text.includes('&');
  // The escapes read once, and (text holding `%25`) read as text percent-encoded again would hold them.
  const readings = mayEscape ? [withEscapesRead(text), withEscapesReadEncodedAgain(text)].filter((r): r is Rewritten => r !== undefined && HAS_DIGIT_RUN.test(r.text)) : [];
  if (readings.length === 0) return text.replace(DIGIT_RUN, REDACTED);
  let runs = spansOf(text);
  for (const reading of readings) runs = joined(receivedSpans(spansOf(reading.text), reading.moved), runs);
  let out = '';
  let cursor = 0;
  for (let i = 0; i < runs.length; i += 2) {
    out += text.slice(cursor, runs[i]) + REDACTED;
    cursor = runs[i + 1]!;
  }
  return out + text.slice(cursor);
}

/** Where DIGIT_RUN's runs stand in the text: [start, end) pairs, in order. */
function spansOf(text: string): number[] {
  const spans: number[] = [];
  for (const run of text.matchAll(DIGIT_RUN)) spans.push(run.index, run.index + run[0].length);
  return spans;
}

/**
 * True when the text cannot hold a run of 11 digits in either reading: every digit DIGIT reads holds
 * an ASCII digit or a character past ASCII, and every escape withEscapesRead writes as a digit
 * begins with a `\`, `%` or `&`. Most short text (a path, a message) is decided here, with no regex.
 */
function tooFewDigitsForARun(text: string): boolean {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (((c >= 48 && c <= 57) || c >= 0x80 || c === 0x5c || c === 0x25 || c === 0x26) && ++count >= 11) return false;
  }
  return true;
}

/** Two lists of [start, end) spans, each in order, as one in order with overlapping or touching spans joined. */
function joined(a: readonly number[], b: readonly number[]): number[] {
  const all: Array<[number, number]> = [];
  for (let i = 0; i < a.length; i += 2) all.push([a[i]!, a[i + 1]!]);
  for (let i = 0; i < b.length; i += 2) all.push([b[i]!, b[i + 1]!]);
  all.sort((x, y) => x[0] - y[0]);
  const out: number[] = [];
  for (const [start, end] of all) {
    if (out.length > 0 && start <= out[out.length - 1]!) out[out.length - 1] = Math.max(out[out.length - 1]!, end);
    else out.push(start, end);
  }
  return out;
}

/**
 * Text percent-decoded as far as a reader would take it: up to three rounds (an escape escaped again,
 * `%252E`), escape by escape, so that one malformed escape (a lone %) keeps none of the others
 * encoded. scrubText reads `%2E` as a digit and a letter: what it must see through an encoding, it
 * is given decoded too (a logged path, a tracestate entry).
 */
export function percentDecoded(text: string): string {
  let plain = text;
  for (let i = 0; i < 3 && plain.includes('%'); i++) {
    const next = querystring.unescape(plain);
    if (next === plain) break;
    plain = next;
  }
  return plain;
}
