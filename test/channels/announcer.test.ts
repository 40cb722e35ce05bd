import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import t from 'tap';
import { announcer, unpackKeys } from '../../src/channels/announcer.js';
import { acquireListener } from '../../src/channels/lease.js';
import { freshDatabase } from '../helpers/database.js';
import { captureLogs } from '../helpers/logs.js';

// Under callback load a commit ends every few milliseconds; each NOTIFY statement costs every
// listening backend and instance, so an announcer spaces its statements and what comes meanwhile
// shares the next one. After a quiet spell the first goes at once.

const database = await freshDatabase(t);

t.test('the first announcement goes at once; the next ones wait for the spacing and share one notification', async (t) => {
  const { logger } = captureLogs();
  const lease = acquireListener(database, 'spacing_test', logger);
  t.teardown(() => lease.release());
  const { listener } = lease;
  if (!listener.listening) await once(listener, 'listening');
  // Long enough that "at once" holds on a host running both suites (a .ci/run at load 8-10 took
  // 1,017 ms for the first NOTIFY to come back through LISTEN; one beside other test runs, 3,376 ms).
  const spacingMs = 10_000;
  const sender = announcer(database.notifyDb, 'spacing_test', logger, spacingMs);
  t.teardown(() => sender.close());

  const start = performance.now();
  let heard = once(listener, 'notification');
  sender.announce('first');
  t.same(await heard, ['first']);
  const firstAt = performance.now() - start;

  heard = once(listener, 'notification');
  sender.announce('second');
  sender.announce('third');
  const [payload] = (await heard) as [string];
  const nextAt = performance.now() - start;

  t.same(unpackKeys(payload), ['second', 'third'], 'what was announced meanwhile shares one notification');
  t.ok(firstAt < spacingMs, `the first went at once (${Math.round(firstAt)} ms)`);
  t.ok(nextAt >= spacingMs, `the next waited for the spacing (${Math.round(nextAt)} ms after the first was announced)`);
});
