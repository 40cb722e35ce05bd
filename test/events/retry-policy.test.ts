import t from 'tap';
import { FIRST_RETRY_S, MAX_GAP_S } from '../../src/events/backoff.js';
import { attemptOutcome, parseRetryAfter } from '../../src/events/retry-policy.js';

// The retry policy is a pure function of the attempt, the receiver's answer, the time and the horizon.

const queuedAt = new Date('2026-01-01T00:00:00Z');
const delivery = { id: 7, token: 'lease', queuedAt, attempts: 0 };
const at = (s: number) => new Date(queuedAt.getTime() + s * 1000);
const policy = { horizonS: 3600, stopping: false, random: () => 1 };

t.test('a 2xx is delivered, with nothing left to try', (t) => {
  const { result, finished } = attemptOutcome(delivery, { httpStatus: 204, error: null }, at(1), policy);
  t.equal(result, 'delivered');
  t.same(finished, { id: 7, token: 'lease', status: 'delivered', at: at(1), httpStatus: 204, error: null, nextAt: null });
  t.end();
});

t.test('a failure within the horizon stays pending, due again after the backoff', (t) => {
  const { result, finished } = attemptOutcome(delivery, { httpStatus: 500, error: 'the receiver answered HTTP 500' }, at(10), policy);
  t.equal(result, 'failed');
  t.equal(finished.status, 'pending');
  t.equal(finished.error, 'the receiver answered HTTP 500');
  const gapS = (finished.nextAt!.getTime() - at(10).getTime()) / 1000;
  t.ok(gapS > 0 && gapS <= FIRST_RETRY_S * 2, `the first retry comes within seconds (${gapS} s)`);
  const late = attemptOutcome({ ...delivery, attempts: 40 }, { httpStatus: null, error: 'ECONNREFUSED' }, at(10), { ...policy, horizonS: 100_000 });
  t.ok((late.finished.nextAt!.getTime() - at(10).getTime()) / 1000 <= MAX_GAP_S, 'the gap is capped');
  t.end();
});

t.test("a Retry-After longer than the backoff is respected, but never past the horizon", (t) => {
  const asked = attemptOutcome(delivery, { httpStatus: 429, error: 'the receiver answered HTTP 429', retryAfterS: 120 }, at(10), policy);
  t.same(asked.finished.nextAt, at(130));
  const capped = attemptOutcome(delivery, { httpStatus: 503, error: 'the receiver answered HTTP 503', retryAfterS: 7200 }, at(10), policy);
  t.same(capped.finished.nextAt, at(3600), 'due again at the horizon, where it is dead if it fails again');
  t.end();
});

t.test('a failure at or past the horizon is dead', (t) => {
  const { result, finished } = attemptOutcome(delivery, { httpStatus: 500, error: 'the receiver answered HTTP 500' }, at(3600), policy);
  t.equal(result, 'dead');
  t.same(finished, { id: 7, token: 'lease', status: 'dead', at: at(3600), httpStatus: 500, error: 'the receiver answered HTTP 500', nextAt: null });
  t.end();
});

t.test('an attempt cut short by a stopping instance is pending again at once, counted as no failure', (t) => {
  const { result, finished } = attemptOutcome(delivery, { httpStatus: null, error: 'aborted' }, at(5000), { ...policy, stopping: true });
  t.equal(result, 'interrupted');
  t.same(finished, { id: 7, token: 'lease', status: 'pending', at: at(5000), httpStatus: null, error: 'interrupted: the instance was stopping', nextAt: at(5000) });
  const delivered = attemptOutcome(delivery, { httpStatus: 200, error: null }, at(1), { ...policy, stopping: true });
  t.equal(delivered.result, 'delivered', 'a 2xx while stopping is delivered all the same');
  t.end();
});

t.test('Retry-After is read as seconds or as an HTTP date', (t) => {
  const now = new Date('2026-01-01T00:00:00Z');
  t.equal(parseRetryAfter('30', now), 30);
  t.equal(parseRetryAfter(['45'], now), 45);
  t.equal(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now), 60);
  t.equal(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now), 0, 'a date past is now');
  t.equal(parseRetryAfter('soon', now), undefined);
  t.equal(parseRetryAfter(undefined, now), undefined);
  t.end();
});
