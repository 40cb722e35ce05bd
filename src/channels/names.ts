// The NOTIFY channels of the gateway: each carries one kind of notification, its payload keys, one per line.

/** A committed callback result (payload: the customerUuid); long-polls on every instance wake up. */
export const RESULTS_CHANNEL = 'underwriting_results';
