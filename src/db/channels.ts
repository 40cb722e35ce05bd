/**
 * PostgreSQL NOTIFY channel on which a committed callback result is announced (payload: the
 * customerUuid), so that long-polls on every instance sharing the database wake up.
 */
export const RESULTS_CHANNEL = 'underwriting_results';
