import { INVISIBLE_FORMAT } from '../cpf.js';

/**
 * Digit runs that could hold a CPF: 11 or more digits, each apart from the next by any number of
 * separators (white space, dot, dash, underscore, slash, comma, colon, semicolon, bar, parentheses, or an invisible
 * character: INVISIBLE), so "123.456.789-01", "123 456 789 01", "123....456....789....01" and a CPF inside a
 * longer number all match; a decimal digit of any script counts (fullwidth ０-９, Arabic-Indic ٠-٩,
 * Devanagari ०-९, ...), and fullwidth separators (．－／＿) as theirs. A raw body is
 * bytes as sent, so a digit or a separator may also be escaped: a JSON escape (\u0035, \uff15, \u002e), a
 * percent escape (%35, %2E; a fullwidth digit's UTF-8, %EF%BC%95), JSON's escaped slash (\/), each escape also escaped again (\\u0035, a JSON text inside a JSON string) or an HTML character reference (&#53;, &#x35;), as the scrubber of logs reads
 * them (observability/scrub.ts). A false positive only hides digits of a view. No text reads as both a
 * separator and a digit, so a run is read one way only and one that falls short of 11 digits is
 * given back once: time linear in the body, however long its separators.
 */
/**
 * What shows as nothing between two digits, so a reader sees them side by side: control characters
 * (the NUL after each digit of a body sent as UTF-16), invisible format characters (soft hyphen,
 * zero-width space and joiners, direction marks, word joiner) and U+FFFD, which a byte that is not
 * UTF-8 (a Latin-1 no-break space) becomes. The log scrubber (observability/scrub.ts) reads them as gaps too.
 */
const INVISIBLE = String.raw`\u0000-\u0008\u000E-\u001F\u007F-\u009F${INVISIBLE_FORMAT}\uFFFD`;
// An escape's backslashes (`\\+`) are read only from the first of a run ((?<!\\)): read from each, a long run
// of backslashes (a stored raw body) costs time quadratic in its length.
const DIGIT = String.raw`(?:\p{Nd}|(?<!\\)\\+u00?3[0-9]|(?<!\\)\\+u[fF][fF]1[0-9]|(?<!\\)\\+x3[0-9]|%3[0-9]|%[eE][fF]%[bB][cC]%9[0-9]|&#0*(?:4[89]|5[0-7]);|&#[xX]0*3[0-9];)`;
const SEPARATOR = String.raw`(?:[\s./_\-,;:|()\uFF0D\uFF0E\uFF0F\uFF3F${INVISIBLE}]|(?<!\\)\\+/|(?<!\\)\\+u00(?:2[0dDeEfF]|5[fF])|\\u[fF][fF](?:0[dDeEfF]|3[fF])|%2[0dDeEfF]|%5[fF])`;
const CPF_LIKE = new RegExp(`${DIGIT}(?:${SEPARATOR}*${DIGIT}){10,}`, 'gu');
/** Within a run: a separator (kept, escape and all) or a digit (masked). */
const ONE_TOKEN = new RegExp(`(${SEPARATOR})|${DIGIT}`, 'gu');

/** Replaces every digit of a CPF-like run with '*' (an escaped digit, escape and all), keeping its separators. */
export function maskCpfLike(text: string): string {
  return text.replace(CPF_LIKE, (run) => run.replace(ONE_TOKEN, (token: string, separator: string | undefined) => separator ?? '*'));
}

/** Replaces every CPF-like run (as above, escapes included) with the given text, whole. */
export function redactCpfLike(text: string, redacted: string): string {
  return text.replace(CPF_LIKE, redacted);
}
