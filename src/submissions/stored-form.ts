import { hashCpf, maskCpf, maskCpfsInText } from '../cpf.js';
import type { Srd, UnderwritingRequest } from '../provider/schemas.js';

/** What is stored of a submit's personal data: the CPF only hashed and masked, srd with any CPF in its text masked. */
export interface StoredForm {
  cpfHash: string;
  cpfMasked: string;
  srd: Srd | undefined;
}

export function storedForm(body: UnderwritingRequest, cpfHashKey: string): StoredForm {
  return { cpfHash: hashCpf(body.cpf, cpfHashKey), cpfMasked: maskCpf(body.cpf), srd: maskSrdText(body.srd) };
}

/** srd as stored (so as returned and pushed): a CPF typed into one of its text fields is masked. */
export function maskSrdText(srd: Srd | undefined): Srd | undefined {
  if (!srd?.address) return srd;
  const address = Object.fromEntries(
    Object.entries(srd.address).map(([field, value]) => [field, typeof value === 'string' ? maskCpfsInText(value) : value]),
  );
  return { ...srd, address };
}
