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
