import { BlockList, isIP } from 'node:net';

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
