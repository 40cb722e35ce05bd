/** The first retry comes within seconds; the gap doubles after each failure, capped here. */
export const FIRST_RETRY_S = 1;
export const MAX_GAP_S = 600;

/**
 * Seconds until the next attempt after `attempts` failed ones: exponential, with jitter (between
 * half and all of the step), so that receivers coming back are not hit by a synchronised wave.
 */
export function retryDelayS(attempts: number, random: () => number = Math.random): number {
  const step = Math.min(MAX_GAP_S, FIRST_RETRY_S * 2 ** Math.max(0, attempts - 1));
  return step / 2 + random() * (step / 2);
}
