import { isTokenSegment, redactUrl, shownHostname } from '../observability/logger.js';
import { urlKeyer } from './url-key.js';

/** One configured receiver of outcome events. */
export interface WebhookTarget {
  /** What its rows name it by: a configured URL's keyed fingerprint (url-key.ts), an API endpoint's id. */
  key: string;
  /** The URL as stored and shown: no userinfo, query values and token-like path segments replaced. */
  shown: string;
  /** Where to POST: the URL without its userinfo (undici refuses credentials in a URL). */
  url: string;
  /** Basic credentials from the URL's userinfo, when it had some. */
  authorization: string | undefined;
  /** Every secret part of the URL, to scrub from error messages. */
  secrets: string[];
}

/**
 * The values a URL's path parameters (`;name=value`), token-like path segments (a Slack webhook's)
 * and bare query words carry: secrets to scrub like query values.
 */
function pathAndBareSecrets(u: URL): string[] {
  const inPath = [...u.pathname.matchAll(/;([^/]*)/g)].flatMap((m) => m[1]!.split(/[;=]/));
  const tokens = u.pathname.split('/').filter(isTokenSegment);
  const bare = u.search.slice(1).split('&').filter((part) => part !== '' && !part.includes('='));
  return [...inPath, ...tokens, ...bare, ...bare.map(decodedOrRaw)];
}

/** A percent-encoded text decoded, or as it is when an escape in it is malformed (`%zz`, which URLs allow). */
function decodedOrRaw(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A receiver of `raw`, named by `keyOf(raw)` (a UrlKeyer's key for a configured URL). */
export function webhookTarget(raw: string, keyOf: (url: string) => string): WebhookTarget {
  const u = new URL(raw);
  // A host name holding a CPF is shown masked (redactUrl), and scrubbed from error texts (getaddrinfo ENOTFOUND <host>).
  const cpfHost = shownHostname(u) !== u.hostname ? [u.hostname] : [];
  const secrets = [decodedOrRaw(u.username), decodedOrRaw(u.password), u.username, u.password, u.search.slice(1)]
    .concat([...u.searchParams.values()], pathAndBareSecrets(u), cpfHost)
    .filter((s) => s.length >= 3);
  // A malformed escape (a%zz) is sent as written: thrown, it stopped every read of the endpoints.
  const authorization =
    u.username || u.password ? `Basic ${Buffer.from(`${decodedOrRaw(u.username)}:${decodedOrRaw(u.password)}`).toString('base64')}` : undefined;
  if (authorization) secrets.push(authorization.slice('Basic '.length));
  u.username = '';
  u.password = '';
  u.hash = '';
  return {
    key: keyOf(raw),
    shown: redactUrl(raw),
    url: u.toString(),
    authorization,
    secrets: [...new Set(secrets)].sort((a, b) => b.length - a.length),
  };
}

/** The text with every secret of the target replaced. */
export function scrubTarget(text: string, target: Pick<WebhookTarget, 'secrets' | 'url' | 'shown'>): string {
  let clean = text.split(target.url).join(target.shown);
  for (const secret of target.secrets) clean = clean.split(secret).join('[redacted]');
  return clean;
}

/** The configured receivers, or none: keyed under the first CPF_HASH_KEY. */
export function webhookTargets(config: { eventWebhooks: { urls: readonly string[] } | undefined; cpfHashKeys: readonly string[] }): WebhookTarget[] {
  const urls = config.eventWebhooks?.urls ?? [];
  if (urls.length === 0) return [];
  const keyer = urlKeyer(config.cpfHashKeys);
  return urls.map((url) => webhookTarget(url, keyer.key));
}
