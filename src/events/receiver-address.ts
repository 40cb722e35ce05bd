import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { buildConnector } from 'undici';
import { isNeverAReceiver, NEVER_A_RECEIVER_MESSAGE } from '../http/receiver-address.js';

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
