import { createHmac } from 'node:crypto';

/** Keyed hash (HMAC-SHA-256, hex) that finds stored requests by CPF without storing the CPF. */
export function hashCpf(cpf: string, key: string): string {
  return createHmac('sha256', key).update(cpf).digest('hex');
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

/** Digits, each from the next by at most two of `.`, `-` or a space: how people write a CPF in free text. */
const DIGIT_RUN = /[0-9](?:[.\- ]{0,2}[0-9])*/g;

/**
 * Free text with every CPF in it masked: any 11 consecutive digits of a run (written with or
 * without dots, dashes and spaces) whose check digits hold become `*`, the separators stay. Every
 * window of a longer run is tried, so no CPF hides behind a digit typed before it.
 */
export function maskCpfsInText(text: string): string {
  return text.replace(DIGIT_RUN, (run) => {
    const at: number[] = [];
    for (let i = 0; i < run.length; i++) if (run[i]! >= '0' && run[i]! <= '9') at.push(i);
    if (at.length < 11) return run;
    const digits = at.map((i) => run[i]).join('');
    const chars = run.split('');
    let masked = false;
    for (let start = 0; start + 11 <= digits.length; start++) {
      if (!isValidCpf(digits.slice(start, start + 11))) continue;
      for (let k = start; k < start + 11; k++) chars[at[k]!] = '*';
      masked = true;
    }
    return masked ? chars.join('') : run;
  });
}
