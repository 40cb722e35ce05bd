// Kept free of the DOM: the gateway's tests import it too.

/**
 * Eleven or more digits with up to three separators (spaces, dots, dashes, underscores, slashes) between two
 * (a longer run is hidden too): "52998224725", "529.982.247-25", "529 982 247 25".
 */
const CPF_LIKE = /(?<!\d)\d(?:[\s./_-]{0,3}\d){10,}(?!\d)/g;

/** Hides every CPF-like run in a text, digit by digit, keeping its separators (so its shape stays readable). */
export function maskCpfLike(text: string): string {
  return text.replace(CPF_LIKE, (run) => run.replace(/\d/g, '•'));
}
