/**
 * Digit runs that could hold a CPF: 11 or more digits, each apart from the next by at most three
 * separators (white space, dot, dash, underscore, slash), so "123.456.789-01", "123 456 789 01" and a CPF inside a
 * longer number all match; fullwidth digits and separators (０-９, ．－／＿) count as theirs. A false positive
 * only hides digits of a view.
 */
const CPF_LIKE = /[0-9\uFF10-\uFF19](?:[\s./_\-\uFF0D\uFF0E\uFF0F\uFF3F]{0,3}[0-9\uFF10-\uFF19]){10,}/g;

/** Replaces every digit of a CPF-like run with '*', keeping its separators. */
export function maskCpfLike(text: string): string {
  return text.replace(CPF_LIKE, (run) => run.replace(/[0-9\uFF10-\uFF19]/g, '*'));
}
