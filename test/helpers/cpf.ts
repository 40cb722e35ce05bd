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
