import { findAndMaskCpfs } from '../cpf.js';

/** A callback's bytes as the gateway stores them, and the CPFs that were in them. */
export interface KeptBody {
  /** The bytes received, every CPF in them masked; the very bytes received when they held none. */
  bytes: Buffer;
  /** The masked bytes as text, when anything was masked. */
  text: string | null;
  /** The CPFs masked (11 digits each, distinct): only their keyed hashes are stored. */
  cpfs: string[];
}

/**
 * A callback's bytes fit to store: a CPF the provider put in them (a field of its own, a
 * customerUuid that is one, free text; bare, formatted or escaped, as free text is masked:
 * cpf.ts's findAndMaskCpfs) has its digits replaced with '*'. Bytes that held none are kept
 * exactly as received. Bytes that held one are their text, masked, in their own encoding: UTF-16
 * (a NUL beside every ASCII character) as UTF-16, anything else as UTF-8 (a byte that is not UTF-8
 * is stored as U+FFFD then).
 */
export function keptBody(raw: Buffer): KeptBody {
  const encoding = utf16Of(raw);
  const text = encoding === 'utf16le' ? raw.toString('utf16le') : encoding === 'utf16be' ? Buffer.from(raw).swap16().toString('utf16le') : raw.toString('utf8');
  const masked = findAndMaskCpfs(text);
  if (masked.cpfs.length === 0) return { bytes: raw, text: null, cpfs: [] };
  const encoded = encoding === 'utf8' ? Buffer.from(masked.text, 'utf8') : Buffer.from(masked.text, 'utf16le');
  return { bytes: encoding === 'utf16be' ? encoded.swap16() : encoded, text: masked.text, cpfs: masked.cpfs };
}

/** UTF-16 when the bytes are an even number, most of them pairs of an ASCII byte and a NUL (in one order or the other). */
function utf16Of(raw: Buffer): 'utf8' | 'utf16le' | 'utf16be' {
  if (raw.length < 2 || raw.length % 2 !== 0 || !raw.includes(0)) return 'utf8';
  let le = 0;
  let be = 0;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i + 1] === 0 && raw[i] !== 0) le += 1;
    else if (raw[i] === 0 && raw[i + 1] !== 0) be += 1;
  }
  const pairs = raw.length / 2;
  return le * 2 > pairs ? 'utf16le' : be * 2 > pairs ? 'utf16be' : 'utf8';
}
