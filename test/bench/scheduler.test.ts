import { Worker } from 'node:worker_threads';
import t from 'tap';
import { schedPerSecond, schedTimesMs, schedTimesOf } from '../../bench/lib/processes.js';

// The bench's run-queue figures (`bench/lib/compare.ts`): what each process spent on a CPU and
// waiting for one, read from /proc. Linux only, like the bench.

function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

t.test('a process\'s time on a CPU counts all its threads, not only the main one', async (t) => {
  const before = schedTimesMs(process.pid);
  t.ok(before, 'this process\'s scheduler times are known');
  // 150 ms of CPU on another thread of this process: /proc/<pid>/schedstat alone would miss it.
  // CPU, not wall-clock, time: on a loaded machine 150 ms of spinning got 62-131 ms of a CPU. The
  // process's CPU is the worker's while the main thread only awaits it. (Read while the thread
  // still lives: an ended thread's time leaves /proc with it.)
  const worker = new Worker(
    `const used = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
     const end = used() + 150; while (used() < end);
     require('node:worker_threads').parentPort.postMessage('done'); setInterval(() => {}, 1000)`,
    { eval: true },
  );
  await new Promise((resolve) => worker.once('message', resolve));
  const after = schedTimesMs(process.pid)!;
  await worker.terminate();
  t.ok(after.runMs - before!.runMs >= 140, `on a CPU ${Math.round(after.runMs - before!.runMs)} ms (the worker used 150)`);
  t.ok(after.waitMs >= before!.waitMs, 'time waiting for a CPU never goes back');
});

t.test('per second: processes started meanwhile count whole, gone ones and unknown pids are left out', (t) => {
  spin(20);
  const known = schedTimesOf([process.pid, 2 ** 30]);
  t.same([...known.keys()], [process.pid], 'a pid that does not exist is left out');
  const before = new Map([[1, { runMs: 100, waitMs: 10 }]]);
  const after = new Map([
    [1, { runMs: 300, waitMs: 50 }],
    [2, { runMs: 100, waitMs: 30 }],
  ]);
  t.same(schedPerSecond(before, after, 2), { runMs: 150, waitMs: 35 });
  t.equal(schedPerSecond(before, new Map(), 2), null, 'nothing known after: no figure');
  t.equal(schedPerSecond(before, after, 0), null, 'no time: no figure');
  t.end();
});
