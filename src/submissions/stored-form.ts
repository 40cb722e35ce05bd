import { hashCpf, maskCpf, maskCpfsInText } from '../cpf.js';
import type { Srd, UnderwritingRequest } from '../provider/schemas.js';

/** What is stored of a submit's personal data: the CPF only hashed and masked, srd with any CPF in its text masked. */
export interface StoredForm {
  cpfHash: string;
  cpfMasked: string;
  srd: Srd | undefined;
}

/** `hash`: the CPF's keyed hash under CPF_HASH_KEY's first key (hashCpf, or a cpfHasher of that key for many bodies). */
export function storedForm(body: UnderwritingRequest, cpfHashKey: string, hash: (cpf: string) => string = (cpf) => hashCpf(cpf, cpfHashKey)): StoredForm {
  return { cpfHash: hash(body.cpf), cpfMasked: maskCpf(body.cpf), srd: maskSrdText(body.srd) };
}

/** srd as stored (so as returned and pushed): a CPF typed into one of its text fields is masked. The same object when none is. */
export function maskSrdText(srd: Srd | undefined): Srd | undefined {
  if (!srd?.address) return srd;
  let address: Record<string, unknown> | undefined;
  for (const [field, value] of Object.entries(srd.address)) {
    if (typeof value !== 'string') continue;
    const masked = maskCpfsInText(value);
    if (masked !== value) (address ??= { ...srd.address })[field] = masked;
  }
  return address === undefined ? srd : { ...srd, address: address as NonNullable<Srd['address']> };
}
