// Kept free of the DOM: the gateway's tests import it too.

/**
 * Eleven or more digits with any number of separators (spaces, dots, dashes, underscores, slashes) between two
 * (a longer run is hidden too): "52998224725", "529.982.247-25", "529 982 247 25", "529....982....247....25";
 * a decimal digit of any script counts (fullwidth ０-９, Arabic-Indic ٠-٩, Devanagari ०-९, ...), and
 * fullwidth separators (．－／＿) as theirs: the rule of the gateway's own views (src/stats/mask.ts). A
 * separator is never a digit, so a run is read one way only: time linear in the text.
 */
const CPF_LIKE = /(?<!\p{Nd})\p{Nd}(?:[\s./_\-\uFF0D\uFF0E\uFF0F\uFF3F]*\p{Nd}){10,}(?!\p{Nd})/gu;

/** Hides every CPF-like run in a text, digit by digit, keeping its separators (so its shape stays readable). */
export function maskCpfLike(text: string): string {
  return text.replace(CPF_LIKE, (run) => run.replace(/\p{Nd}/gu, '•'));
}
