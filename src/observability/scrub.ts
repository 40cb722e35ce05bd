// The one scrubber for text from outside (a provider's error body, an error message, a URL) before
// it is stored in a row or written to a log: no CPF in any form, none of our secrets.
import querystring from 'node:querystring';

export const REDACTED = '[redacted]';

/**
 * One digit as it may be written: plain, fullwidth, a JSON/JS escape (\u0037, \x37), percent-encoded
 * (%37) or an HTML entity (&#55; &#x37;).
 */
const DIGIT = String.raw`(?:[0-9\uFF10-\uFF19]|\\u00?3[0-9]|\\x3[0-9]|%3[0-9]|&#0*(?:4[89]|5[0-7]);|&#[xX]0*3[0-9];)`;
/** Between two digits of one number: at most three characters that are neither letters nor digits. */
const GAP = String.raw`[^\p{L}\p{N}]{0,3}`;
/**
 * Eleven or more digits in a row, whatever separates them ("714 287 938 60", "714/287/938/60",
 * "714.287.938-60") and however they are escaped: a CPF is 11 digits, and a longer run may hold one.
 * Over-eager on purpose (a long timestamp or an address list may go too): a CPF must never pass.
 */
const DIGIT_RUN = new RegExp(`${DIGIT}(?:${GAP}${DIGIT}){10,}`, 'gu');

/** Text from outside, fit to store or log: CPF-like digit runs and the given secrets replaced, cut to maxChars. */
export function scrubText(text: string, secrets: ReadonlyArray<string | undefined> = [], maxChars = Infinity): string {
  let clean = text;
  for (const secret of secrets) if (secret && clean.includes(secret)) clean = clean.replaceAll(secret, REDACTED);
  clean = clean.replace(DIGIT_RUN, REDACTED);
  return clean.length > maxChars ? clean.slice(0, maxChars) : clean;
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
