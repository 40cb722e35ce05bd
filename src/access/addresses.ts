import { BlockList, isIP } from 'node:net';

const IPV4_MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** An IPv4-mapped IPv6 address (::ffff:1.2.3.4) is the IPv4 address it carries. */
export function normalizeAddress(address: string): string {
  const mapped = IPV4_MAPPED.exec(address);
  return mapped?.[1] ?? address;
}

/** Allowlist verdicts remembered per address, at most (then forgotten all at once). */
const VERDICTS_KEPT = 4096;

export type AddressMatcher = (address: string | undefined) => boolean;

/** Builds a matcher over IPs and CIDRs (validated by the configuration), IPv4 and IPv6. */
export function addressMatcher(entries: readonly string[]): AddressMatcher {
  const list = new BlockList();
  for (const entry of entries) {
    const [raw, prefix] = entry.split('/');
    const address = normalizeAddress(raw ?? '');
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address, family);
    else {
      // An IPv4-mapped IPv6 CIDR (::ffff:10.0.0.0/104) means the IPv4 CIDR it covers.
      const bits = Number(prefix) - (address !== raw ? 96 : 0);
      list.addSubnet(address, Math.max(0, bits), family);
    }
  }
  const check = (candidate: string): boolean => {
    const address = normalizeAddress(candidate);
    const family = isIP(address);
    if (family === 0) return false;
    return list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
  // Peers repeat, and BlockList.check builds a SocketAddress per call (visible in the CPU profile under load):
  // verdicts are remembered, a bounded number of them (the list never changes while running).
  const verdicts = new Map<string, boolean>();
  return (candidate) => {
    if (!candidate) return false;
    let verdict = verdicts.get(candidate);
    if (verdict === undefined) {
      verdict = check(candidate);
      if (verdicts.size >= VERDICTS_KEPT) verdicts.clear();
      verdicts.set(candidate, verdict);
    }
    return verdict;
  };
}

/**
 * X-Forwarded-For kept only as far as it holds addresses: reading from the right (the hops
 * nearest us), everything from the first entry that is not an IP address leftwards is dropped, so
 * the client address Fastify derives (and logs, stores, audits) is always an address, never text
 * someone typed (a CPF, say). Undefined when nothing is left.
 */
export function forwardedAddressesOnly(header: string): string | undefined {
  const entries = header.split(',').map((e) => e.trim());
  let keep = entries.length;
  while (keep > 0 && isIP(entries[keep - 1]!) !== 0) keep -= 1;
  const kept = entries.slice(keep);
  return kept.length > 0 ? kept.join(', ') : undefined;
}
