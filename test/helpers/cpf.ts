/** A valid CPF from 9 digits: the two check digits computed (the Receita's mod-11 rule). */
export function cpfFrom(nine: string): string {
  let digits = nine;
  for (const length of [9, 10]) {
    let sum = 0;
    for (let i = 0; i < length; i++) sum += Number(digits[i]) * (length + 1 - i);
    digits += String(((sum * 10) % 11) % 10);
  }
  return digits;
}

/** A valid CPF from a number: distinct numbers (below 900,000,000) give distinct CPFs. */
export function cpfOf(n: number): string {
  return cpfFrom(String(100_000_000 + (n % 900_000_000)).padStart(9, '0'));
}

/** The code point of the digit zero of a few scripts whose decimal digits a CPF may be written in. */
export const DIGIT_ZEROS = {
  arabicIndic: 0x660,
  persian: 0x6f0,
  devanagari: 0x966,
  bengali: 0x9e6,
  thai: 0xe50,
  fullwidth: 0xff10,
  mathematicalBold: 0x1d7ce,
} as const;

/** Text with its ASCII digits written in another script's (given by the code point of its zero). */
export function inScript(text: string, zero: number): string {
  return text.replace(/[0-9]/g, (d) => String.fromCodePoint(zero + Number(d)));
}

/** Text with the digits of every script of DIGIT_ZEROS read as ASCII ones: the digits a reader sees in it. */
export function asciiDigits(text: string): string {
  return text.replace(/\p{Nd}/gu, (d) => {
    const c = d.codePointAt(0)!;
    const zero = Object.values(DIGIT_ZEROS).find((z) => c >= z && c <= z + 9);
    return zero === undefined ? d : String(c - zero);
  });
}
