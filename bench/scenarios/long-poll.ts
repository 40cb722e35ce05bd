import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { Agent, request } from 'undici';
import { seedSubmitted } from '../lib/database.js';
import { callbackBody } from './callback.js';

// Many long-polls on pending customers, then their callbacks: how long after a callback's 2xx
// does the long-poll waiting for that customer answer?

export interface LongPollSettings {
  /** Customers `${prefix}0`.. are seeded for this round; each round needs its own. */
  prefix: string;
  count: number;
  waitS: number;
  /** At most this long for the gateway to hold every long-poll before the first callback. */
  settleMs: number;
  callbackConcurrency: number;
}

export interface LongPollFigures {
  count: number;
  opened: number;
  /** Answered (2xx) with the callback's result in the body. */
  answeredWithResult: number;
  answeredBeforeCallback: number;
  /** Long-polls the gateway said it held (its underwriting_longpoll_waiters gauge) when callbacks began. */
  waitingAtStart: number | null;
  failed: number;
  callbacksOk: number;
  callbacksFailed: number;
  /** Callbacks delivered per second while the long-polls were waiting. */
  callbackRate: number;
  /** Long-poll answer minus its callback's 2xx, in ms (negative: the answer came first). */
  delayMs: { min: number; p50: number; p99: number; max: number };
  withinGoal: number;
  goalMs: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const round1 = (v: number) => Math.round(v * 10) / 10;

/** Reads the gateway's waiter gauge until it reaches `count` or the time is up; null without the gauge. */
async function waitForWaiters(baseUrl: string, count: number, withinMs: number): Promise<number | null> {
  const deadline = Date.now() + withinMs;
  let seen: number | null = null;
  do {
    try {
      const res = await request(`${baseUrl}/metrics`);
      const text = await res.body.text();
      const match = /^underwriting_longpoll_waiters(?:\{[^}]*\})? (\d+)/m.exec(text);
      seen = match ? Number(match[1]) : null;
    } catch {
      seen = null;
    }
    if (seen === null || seen >= count) break;
    await sleep(100);
  } while (Date.now() < deadline);
  // Without the gauge there is nothing to await: give the gateway the whole settle time.
  if (seen === null) await sleep(Math.max(0, deadline - Date.now()));
  return seen;
}

export async function runLongPolls(pool: pg.Pool, baseUrl: string, settings: LongPollSettings): Promise<LongPollFigures> {
  const { count, waitS, prefix } = settings;
  await seedSubmitted(pool, prefix, count);
  const timeoutMs = (waitS + 15) * 1000;
  const pollAgent = new Agent({ headersTimeout: timeoutMs, bodyTimeout: timeoutMs, keepAliveTimeout: 1_000 });
  const callbackAgent = new Agent({ connections: settings.callbackConcurrency, keepAliveTimeout: 10_000 });

  const answeredAt = new Array<number>(count).fill(Number.NaN);
  const ackAt = new Array<number>(count).fill(Number.NaN);
  let callbacksStartedAt = Number.POSITIVE_INFINITY;
  let opened = 0;
  let withResult = 0;
  let early = 0;
  let failed = 0;

  const poll = async (i: number): Promise<void> => {
    try {
      const res = await request(`${baseUrl}/v1/underwritings/${prefix}${i}?wait=${waitS}`, { dispatcher: pollAgent });
      const at = performance.now();
      const body = (await res.body.json()) as { result?: unknown };
      if (res.statusCode !== 200) {
        failed++;
        return;
      }
      answeredAt[i] = at;
      if (at < callbacksStartedAt) early++;
      if (body.result !== null && body.result !== undefined) withResult++;
    } catch {
      failed++;
    }
  };

  // Open the long-polls in batches so the listen backlog never overflows.
  const polls: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    polls.push(poll(i));
    opened++;
    if (i % 100 === 99) await sleep(20);
  }
  const waitingAtStart = await waitForWaiters(baseUrl, count, settings.settleMs);

  callbacksStartedAt = performance.now();
  let next = 0;
  let callbacksOk = 0;
  let callbacksFailed = 0;
  const deliver = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      try {
        const res = await request(`${baseUrl}/v1/callbacks/underwriting`, {
          method: 'POST',
          dispatcher: callbackAgent,
          headers: { 'content-type': 'application/json' },
          body: callbackBody(`${prefix}${i}`, i),
        });
        const at = performance.now();
        await res.body.dump();
        if (res.statusCode >= 200 && res.statusCode < 300) {
          ackAt[i] = at;
          callbacksOk++;
        } else {
          callbacksFailed++;
        }
      } catch {
        callbacksFailed++;
      }
    }
  };
  await Promise.all(Array.from({ length: settings.callbackConcurrency }, deliver));
  const deliveredIn = performance.now() - callbacksStartedAt;

  await Promise.race([Promise.all(polls), sleep(timeoutMs + 5_000)]);
  await Promise.all([pollAgent.destroy(), callbackAgent.destroy()]);

  const delays = ackAt
    .map((ack, i) => (answeredAt[i] ?? Number.NaN) - ack)
    .filter((d) => Number.isFinite(d))
    .sort((a, b) => a - b);
  const goalMs = 100;
  return {
    count,
    opened,
    answeredWithResult: withResult,
    answeredBeforeCallback: early,
    waitingAtStart,
    failed,
    callbacksOk,
    callbacksFailed,
    callbackRate: round1(callbacksOk / (deliveredIn / 1000)),
    delayMs: {
      min: round1(delays[0] ?? Number.NaN),
      p50: round1(percentile(delays, 50)),
      p99: round1(percentile(delays, 99)),
      max: round1(delays[delays.length - 1] ?? Number.NaN),
    },
    withinGoal: delays.filter((d) => d <= goalMs).length,
    goalMs,
  };
}
