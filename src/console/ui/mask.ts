// Kept free of the DOM: the gateway's tests import it too.

/**
 * Eleven or more digits with up to three separators (spaces, dots, dashes, underscores, slashes) between two
 * (a longer run is hidden too): "52998224725", "529.982.247-25", "529 982 247 25"; fullwidth digits and
 * separators (０-９, ．－／＿) count as theirs.
 */
const CPF_LIKE = /(?<![0-9\uFF10-\uFF19])[0-9\uFF10-\uFF19](?:[\s./_\-\uFF0D\uFF0E\uFF0F\uFF3F]{0,3}[0-9\uFF10-\uFF19]){10,}(?![0-9\uFF10-\uFF19])/g;

/** Hides every CPF-like run in a text, digit by digit, keeping its separators (so its shape stays readable). */
export function maskCpfLike(text: string): string {
  return text.replace(CPF_LIKE, (run) => run.replace(/[0-9\uFF10-\uFF19]/g, '•'));
}
