// The NOTIFY channels of the gateway: each carries one kind of notification, its payload keys, one per line.

/** Committed callback results (payload: their customerUuids, one per line); long-polls on every instance wake up. */
export const RESULTS_CHANNEL = 'underwriting_results';
