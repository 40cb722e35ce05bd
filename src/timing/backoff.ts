/**
 * The wait before the n-th retry (n from 1): exponential from `first`, capped at `cap`, with jitter
 * (between half and all of the step) so that parties coming back after an outage are not retried
 * in a synchronised wave. In whatever unit first and cap are given.
 */
export function backoff(n: number, first: number, cap: number, random: () => number = Math.random): number {
  const step = Math.min(cap, first * 2 ** Math.max(0, n - 1));
  return step / 2 + random() * (step / 2);
}
