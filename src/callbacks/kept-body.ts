import { isUtf8 } from 'node:buffer';
import { findAndMaskCpfs } from '../cpf.js';
import { mapJsonText } from './json-text.js';

/** A callback's bytes as the gateway stores them, and the CPFs that were in them. */
export interface KeptBody {
  /** The bytes received, every CPF in them masked; the very bytes received when they held none. */
  bytes: Buffer;
  /** The masked bytes as text, when anything was masked. */
  text: string | null;
  /** The CPFs masked (11 digits each, distinct): only their keyed hashes are stored. */
  cpfs: string[];
}

type Encoding = 'utf8' | 'utf16le' | 'utf16be';
const BOM = '\uFEFF';

/**
 * A callback's bytes fit to store: a CPF the provider put in them (a field of its own, a
 * customerUuid that is one, free text; bare, formatted or escaped, as free text is masked:
 * cpf.ts's findAndMaskCpfs) has its digits replaced with '*'. Bytes that held none are kept
 * exactly as received. Bytes that held one are their text, masked, in their own encoding: UTF-16
 * (a byte order mark, or a NUL beside every ASCII character) as UTF-16, anything else as UTF-8 (a
 * byte that is not UTF-8 is stored as U+FFFD then). Bytes that may be UTF-16 (a NUL, a UTF-16 byte
 * order mark, or not UTF-8) and hold no CPF as first read are read in the other encodings too: UTF-16
 * whose text is mostly past ASCII has few NULs, and one with a byte order mark and only CJK or
 * fullwidth text has none. JSON whose escapes write a CPF the text does not show (`\u0665`,
 * another script's digits; `\u00a0`, a separator past ASCII; a surrogate pair) is stored as that
 * JSON written again, every string, key and number masked.
 */
export function keptBody(raw: Buffer): KeptBody {
  for (const encoding of encodingsOf(raw)) {
    const masked = maskWithEscapes(decode(raw, encoding));
    if (masked.cpfs.length > 0) return { bytes: encode(masked.text, encoding, raw), text: masked.text, cpfs: masked.cpfs };
  }
  return { bytes: raw, text: null, cpfs: [] };
}

/** The encoding the bytes most likely are first, then the others they may be. */
function encodingsOf(raw: Buffer): Encoding[] {
  const first = bomOf(raw) ?? utf16Of(raw);
  const mayBeUtf16 = raw.length >= 2 && (raw.includes(0) || bomOf(raw) !== undefined || !isUtf8(raw));
  if (!mayBeUtf16) return [first];
  return [first, ...(['utf16le', 'utf16be', 'utf8'] as const).filter((e) => e !== first)];
}

function bomOf(raw: Buffer): Encoding | undefined {
  if (raw[0] === 0xff && raw[1] === 0xfe) return 'utf16le';
  if (raw[0] === 0xfe && raw[1] === 0xff) return 'utf16be';
  if (raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf) return 'utf8';
  return undefined;
}

/** UTF-16 (an odd last byte aside, kept as it is) in one order or the other, or UTF-8. */
function decode(raw: Buffer, encoding: Encoding): string {
  if (encoding === 'utf8') return raw.toString('utf8');
  const even = raw.subarray(0, raw.length - (raw.length % 2));
  return encoding === 'utf16le' ? even.toString('utf16le') : Buffer.from(even).swap16().toString('utf16le');
}

function encode(text: string, encoding: Encoding, raw: Buffer): Buffer {
  if (encoding === 'utf8') return Buffer.from(text, 'utf8');
  const units = Buffer.from(text, 'utf16le');
  const ordered = encoding === 'utf16be' ? units.swap16() : units;
  return raw.length % 2 === 0 ? ordered : Buffer.concat([ordered, raw.subarray(raw.length - 1)]);
}

/** findAndMaskCpfs, and for JSON with escapes, what its escapes decode to (JSON written again, masked, when that holds a CPF the text did not show). */
function maskWithEscapes(text: string): { text: string; cpfs: string[] } {
  const masked = findAndMaskCpfs(text);
  if (!text.includes('\\')) return masked;
  const bom = text.startsWith(BOM) ? BOM : '';
  let value: unknown;
  try {
    value = JSON.parse(text.slice(bom.length));
  } catch {
    return masked;
  }
  // The masked text decoded: clean unless an escape wrote a CPF (or masking a number left no JSON).
  try {
    if (maskDecoded(JSON.parse(masked.text.slice(bom.length)), new Set()).cpfs.size === 0) return masked;
  } catch {
    // a number masked: written again below
  }
  const decoded = maskDecoded(value, new Set());
  const again = findAndMaskCpfs(bom + JSON.stringify(decoded.value));
  return { text: again.text, cpfs: [...new Set([...masked.cpfs, ...decoded.cpfs, ...again.cpfs])] };
}

/** A parsed JSON value with every CPF in its strings, keys and numbers masked (a number that held one becomes its masked text). */
function maskDecoded(value: unknown, cpfs: Set<string>): { value: unknown; cpfs: Set<string> } {
  const mask = (text: string) => {
    const found = findAndMaskCpfs(text);
    for (const cpf of found.cpfs) cpfs.add(cpf);
    return found.text;
  };
  const maskNumber = (n: number) => {
    const text = String(n);
    const masked = mask(text);
    return masked === text ? n : masked;
  };
  return { value: mapJsonText(value, mask, maskNumber), cpfs };
}

/** UTF-16 when the bytes are an even number, most of them pairs of an ASCII byte and a NUL (in one order or the other). */
function utf16Of(raw: Buffer): Encoding {
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
