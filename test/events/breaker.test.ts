import t from 'tap';
import { endpointBreaker, PROBES_PER_S, TRIP_AFTER_FAILURES, TRIP_AFTER_MS } from '../../src/events/breaker.js';

// The breaker alone (a pure piece of the delivery worker): when an endpoint is sent probes only.

const endpoint = (over: { rateLimitPerS?: number | null; failingSince?: Date | null } = {}) => ({ key: 'k1', rateLimitPerS: null, failingSince: null, ...over });

t.test('an endpoint keeps its own rate until its attempts have failed TRIP_AFTER_FAILURES times in a row', async (t) => {
  const breaker = endpointBreaker();
  for (let n = 1; n < TRIP_AFTER_FAILURES; n++) {
    breaker.record('k1', false);
    t.equal(breaker.rateOf(endpoint(), 0), null, `no rate after ${n} failures`);
  }
  breaker.record('k1', false);
  t.equal(breaker.rateOf(endpoint(), 0), PROBES_PER_S, 'probed only');
  t.equal(breaker.rateOf({ ...endpoint(), key: 'k2' }, 0), null, 'another endpoint is not');
  breaker.record('k1', true);
  t.equal(breaker.rateOf(endpoint(), 0), null, 'a 2xx opens it again');
});

t.test('a success in between starts the count again', async (t) => {
  const breaker = endpointBreaker();
  for (let n = 0; n < TRIP_AFTER_FAILURES - 1; n++) breaker.record('k1', false);
  breaker.record('k1', true);
  breaker.record('k1', false);
  t.equal(breaker.rateOf(endpoint(), 0), null);
});

t.test('failing (failing_since, any instance) for TRIP_AFTER_MS also makes it probed only, never faster than its own rate', async (t) => {
  const breaker = endpointBreaker();
  const since = new Date(1_000_000);
  t.equal(breaker.rateOf(endpoint({ failingSince: since }), since.getTime() + TRIP_AFTER_MS - 1), null);
  t.equal(breaker.rateOf(endpoint({ failingSince: since }), since.getTime() + TRIP_AFTER_MS), PROBES_PER_S);
  t.equal(breaker.rateOf(endpoint({ failingSince: since, rateLimitPerS: 20 }), since.getTime() + TRIP_AFTER_MS), PROBES_PER_S);
  t.equal(breaker.rateOf(endpoint({ rateLimitPerS: 20 }), 0), 20, 'a healthy endpoint keeps its rateLimitPerS');
});
