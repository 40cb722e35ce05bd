/** A delivery failing for less than this long (since it became due) is a blip (info); past it, warn. */
export const WARN_FAILING_AFTER_S = 60;

/** The level of a failed delivery attempt's log line: receivers restart, so early failures are info. */
export function failedAttemptLevel(queuedAt: Date, failedAt: Date): 'info' | 'warn' {
  return failedAt.getTime() - queuedAt.getTime() >= WARN_FAILING_AFTER_S * 1000 ? 'warn' : 'info';
}
