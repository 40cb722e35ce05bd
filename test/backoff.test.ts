import t from 'tap';
import { backoff } from '../src/timing/backoff.js';

// The one backoff of the gateway: event delivery retries, the token client, the LISTEN reconnect.

t.test('the n-th wait doubles from the first, stops at the cap, and is jittered between half and all of its step', (t) => {
  t.equal(backoff(1, 100, 2000, () => 0), 50);
  t.equal(backoff(1, 100, 2000, () => 1), 100);
  t.equal(backoff(3, 100, 2000, () => 1), 400);
  t.equal(backoff(3, 100, 2000, () => 0.5), 300);
  t.equal(backoff(30, 100, 2000, () => 1), 2000, 'capped');
  t.equal(backoff(30, 100, 2000, () => 0), 1000, 'jittered below the cap too');
  t.equal(backoff(0, 100, 2000, () => 1), 100, 'n below 1 counts as the first');
  const waits = Array.from({ length: 200 }, () => backoff(4, 100, 2000));
  t.ok(waits.every((w) => w >= 400 && w <= 800), 'Math.random by default, within the step');
  t.ok(new Set(waits).size > 1, 'not the same wait every time');
  t.end();
});
