import type { Kysely } from 'kysely';
import type { Tables } from '../../db/types.js';
import { LEGACY_KEY, type UrlKeyer } from '../url-key.js';
import { renameEndpointKeys, storedEndpointKeys } from './sql.js';

/**
 * Re-keys the rows of configured endpoints still named by an older key (url-key.ts): every key in
 * the legacy form (the URL's unsalted SHA-256, whichever URL it was: its keyed form is computed
 * from the legacy key alone), and this instance's configured URLs' keys under another entry of
 * CPF_HASH_KEY (rotation). Run before an instance writes its configured endpoints' rows. The
 * number of keys renamed (0, and one read, when there is nothing to do).
 */
export async function rekeyEndpoints(db: Kysely<Tables>, keyer: UrlKeyer, configuredUrls: readonly string[]): Promise<number> {
  const previous = configuredUrls.flatMap((url) => keyer.previous(url).map((from) => [from, keyer.key(url)] as const));
  const stored = await storedEndpointKeys(db, previous.map(([from]) => from), true);
  const renames = new Map<string, string>();
  for (const [from, to] of previous) if (stored.includes(from)) renames.set(from, to);
  for (const key of stored) if (LEGACY_KEY.test(key) && !renames.has(key)) renames.set(key, keyer.fromLegacy(key));
  if (renames.size > 0) await renameEndpointKeys(db, renames);
  return renames.size;
}
