import dns from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { buildConnector } from 'undici';

/**
 * Addresses no receiver of pushed events is at: link-local (169.254.0.0/16, where cloud metadata
 * services answer with the instance's credentials, and fe80::/10) and "this network" (0.0.0.0/8, ::,
 * which Linux connects to the host itself). An endpoint is data an admin key can write at run time:
 * pointed there, every instance would POST signed events to the metadata service, from inside the
 * network it guards. Private and loopback addresses stay allowed: receivers inside the bank's
 * network (and sidecars) are where events go.
 */
const NEVER = new BlockList();
NEVER.addSubnet('169.254.0.0', 16, 'ipv4');
NEVER.addSubnet('0.0.0.0', 8, 'ipv4');
NEVER.addSubnet('fe80::', 10, 'ipv6');
NEVER.addAddress('::', 'ipv6');

export const NEVER_A_RECEIVER_MESSAGE = 'must not point at a link-local or unspecified address (169.254.0.0/16, fe80::/10, 0.0.0.0/8, ::)';

/** True for an IP address (v4, v6, v4-mapped v6, or a URL's bracketed host) no receiver is at; false for a name. */
export function isNeverAReceiver(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)?.[1];
  const address = mapped ?? bare;
  const family = isIP(address);
  if (family === 0) return false;
  return NEVER.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The error of a receiver at such an address, or whose name resolved to one; it names neither (a host may hold a CPF). */
export class NeverAReceiverError extends Error {
  readonly code = 'ERR_RECEIVER_ADDRESS';
  constructor() {
    super(`the receiver's host is, or resolves to, an address no receiver is at: ${NEVER_A_RECEIVER_MESSAGE.replace('must not point at ', '')}`);
  }
}

/**
 * dns.lookup for the push worker's connections: a name resolving to such an address fails the
 * attempt before a byte is sent (a literal address is refused when the endpoint is written).
 */
export const receiverLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, options, (err, address, family) => {
    if (err) return callback(err, address, family);
    const addresses = Array.isArray(address) ? address.map((a) => a.address) : [address];
    if (addresses.some(isNeverAReceiver)) return callback(new NeverAReceiverError(), address, family);
    callback(null, address, family);
  });
};

/**
 * The push worker's connector: receiverLookup for a name, and a literal address checked here, which
 * no lookup sees (an endpoint written before the refusal, or EVENT_WEBHOOK_URLS, may hold one).
 */
export function receiverConnector(options: { timeout: number }): buildConnector.connector {
  const connect = buildConnector({ timeout: options.timeout, lookup: receiverLookup });
  return (opts, callback) => (isNeverAReceiver(opts.hostname) ? callback(new NeverAReceiverError(), null) : connect(opts, callback));
}
