// What the pacing pool runs (DatabaseHandle.pacingDb): the statements its plan tests check
// (test/db/plan-states-pacing.test.ts) and the only ones it may prepare (test/submissions/forwarder-pool.test.ts).

/** Each statement of a forward, with its parameters; `$id` is a request the transaction made `submitting`. */
export const FORWARD = (id: number, now: string, slots: number): Array<[string, unknown[]]> => [
  ['any_queued', []],
  // Once per process (the pacer's first ask), in proportion to PROVIDER_MAX_IN_FLIGHT: not flat (ONCE_PER_PROCESS).
  ['provider_ensure_slots', [slots]],
  ['provider_take_slot', [200, slots, 5, 'holder-1', 10_000, 1]],
  ['claim_next_queued', [now, 0]],
  ['mark_forwarded', [202, now, id, 0, 'holder-1']],
  ['mark_submit_failed', [503, 'did not answer', now, id]],
  ['return_to_queue', [id, '\\x00', now, 503, 'refused', true]],
  ['provider_return_slot', [0, 'holder-1', 'failed', false, 5, 30, 1]],
];

/** The statements the pacing pool may run, by name. */
export const PACED_STATEMENTS = FORWARD(0, '', 1).map(([name]) => name);

/** Run once per process, not per call: the plan tests check their plan, not that their cost is flat. */
export const ONCE_PER_PROCESS = ['provider_ensure_slots'];
