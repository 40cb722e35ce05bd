import { once } from 'node:events';
import pino from 'pino';
import t from 'tap';
import { ChannelListener } from '../../src/channels/listener.js';
import { longPoll } from '../../src/channels/longpoll.js';

// A long-poll between two reads (woken sooner than its minimum interval between reads allows) ends
// as soon as its client leaves or the app starts closing, not when that interval is over: the event
// feed's long-polls read at most every 50 ms, and a client that left held its waiter that long.

/** A long-poll on key 'k' that is never ready, woken once after its first read, so that it waits out a minute between reads. */
async function pollBetweenReads(closing: AbortSignal, abandoned: AbortSignal) {
  const listener = new ChannelListener('test_longpoll', pino({ level: 'silent' }));
  let reads = 0;
  const waiting = once(listener, 'waiting');
  const poll = longPoll({ listener, closing }, 'k', 600, {
    read: async () => ++reads,
    ready: () => false,
    onWaiting: () => {},
    minReadIntervalMs: 60_000,
    abandoned,
  });
  await waiting;
  listener.wake('k');
  // The wake is taken at once; the poll is then in its wait between reads.
  await new Promise((resolve) => setImmediate(resolve));
  return { poll, waiters: () => listener.waiterCount };
}

/** The poll's answer, or 'still waiting' after 5 s. */
const within5s = <T>(p: Promise<T>) => Promise.race([p, new Promise<'still waiting'>((resolve) => setTimeout(resolve, 5_000, 'still waiting').unref())]);

t.test('a client that leaves between two reads frees its waiter at once', async (t) => {
  const [closing, abandoned] = [new AbortController(), new AbortController()];
  const { poll, waiters } = await pollBetweenReads(closing.signal, abandoned.signal);
  t.equal(waiters(), 1);
  abandoned.abort(new Error('client left'));
  t.equal(await within5s(poll), 2, 'answered with the read after the client left (the feed refuses it in its read limiter)');
  t.equal(waiters(), 0, 'the waiter is gone');
});

t.test('an app that starts closing between two reads answers at once', async (t) => {
  const [closing, abandoned] = [new AbortController(), new AbortController()];
  const { poll } = await pollBetweenReads(closing.signal, abandoned.signal);
  closing.abort();
  t.equal(await within5s(poll), 2, 'answered with what is stored');
});
