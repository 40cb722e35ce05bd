import { backoff } from '../timing/backoff.js';

/** The first retry comes within seconds; the gap doubles after each failure, capped here. */
export const FIRST_RETRY_S = 1;
export const MAX_GAP_S = 600;

/** Seconds until the next attempt after `attempts` failed ones (see backoff). */
export function retryDelayS(attempts: number, random: () => number = Math.random): number {
  return backoff(attempts, FIRST_RETRY_S, MAX_GAP_S, random);
}
