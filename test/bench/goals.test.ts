import t from 'tap';
import type { AbResult, MeasuredRun, TargetFigures } from '../../bench/lib/compare.js';
import { abGoals, buffersFlatGoal, checkpointsOver, clockSpan, stateGoals } from '../../bench/lib/report.js';

// The bench's goals (`bench/lib/report.ts`): issue 16 asks the callback scenarios to lead under
// both load generators, so wrk's rounds are judged on the latency goals too, not only the ratio.

function run(p99: number, non2xx = 0): MeasuredRun {
  return {
    durationS: 8, requests: 1000, ok: 1000 - non2xx, rps: 125, autocannonRps: 125, autocannonDurationS: 8,
    p50: 5, p99, max: p99, non2xx, errors: 0, timeouts: 0, statusCodes: {}, exhausted: false, secondP99: [],
    startedAt: '2026-12-02T09:21:03.120Z', endedAt: '2026-12-02T09:21:13.480Z',
    cpuMsPerOk: null, dbCpuMsPerOk: null, walBytesPerOk: null,
    scheduler: { target: null, database: null, generator: null },
  };
}

function figures(p99: number): TargetFigures {
  const { rps, p50, max, non2xx, errors, timeouts, exhausted, cpuMsPerOk, dbCpuMsPerOk, walBytesPerOk } = run(p99);
  return { runs: [run(p99)], rps, p50, p99, max, non2xx, errors, timeouts, exhausted, cpuMsPerOk, dbCpuMsPerOk, walBytesPerOk };
}

function result(wrkP99s: number[] | null, wrkNon2xx = 0): AbResult {
  return {
    gateway: figures(20),
    baseline: figures(40),
    ratio: 2,
    roundRatios: [2],
    medianRatio: 2,
    cpuRatio: 0.5,
    wrk: wrkP99s && {
      gateway: wrkP99s.map((p99, i) => run(p99, i === 0 ? wrkNon2xx : 0)),
      baseline: wrkP99s.map(() => run(40)),
      ratio: 2,
      roundRatios: wrkP99s.map(() => 2),
    },
  };
}

const byGoal = (goals: ReturnType<typeof abGoals>) => new Map(goals.map((g) => [g.goal, g]));

t.test('a callback scenario\'s p99 under wrk is its worst wrk round, and missing it is MISSED', (t) => {
  const met = byGoal(abGoals('callback-push', result([21.5, 29.9]), 130));
  t.same(met.get('p99 <= 30 ms under wrk (worst round)'), { goal: 'p99 <= 30 ms under wrk (worst round)', measured: '29.9 ms', met: true });
  const missed = byGoal(abGoals('callback-push', result([21.5, 34.9]), 130));
  t.same(missed.get('p99 <= 30 ms under wrk (worst round)'), { goal: 'p99 <= 30 ms under wrk (worst round)', measured: '34.9 ms', met: false });
  t.equal(missed.get('p99 <= 30 ms')?.met, true, 'autocannon\'s own p99 goal is judged apart');
  t.end();
});

t.test('a non-2xx under wrk misses the callback goal', (t) => {
  t.same(byGoal(abGoals('callback', result([20, 20], 3), 130)).get('zero non-2xx under wrk'), { goal: 'zero non-2xx under wrk', measured: '3', met: false });
  t.equal(byGoal(abGoals('callback', result([20, 20]), 130)).get('zero non-2xx under wrk')?.met, true);
  t.end();
});

t.test('without a wrk run, or outside the callback scenarios, there is no wrk latency goal', (t) => {
  t.notOk(byGoal(abGoals('callback', result(null), 130)).has('p99 <= 30 ms under wrk (worst round)'), 'wrk not installed');
  t.notOk(byGoal(abGoals('submit', result([50]), 130)).has('p99 <= 30 ms under wrk (worst round)'), 'submit has no p99 goal');
  t.end();
});

t.test("a bench state is judged on issue 34's goals: 2x, p99 within 25 ms under both generators", (t) => {
  const goals = byGoal(stateGoals(result([21.5, 26]), 130));
  t.same(goals.get('throughput >= 2.0x baseline (median of rounds)'), { goal: 'throughput >= 2.0x baseline (median of rounds)', measured: '2x', met: true });
  t.equal(goals.get('p99 <= 25 ms (worst round)')?.met, true, 'autocannon 20 ms');
  t.same(goals.get('p99 <= 25 ms under wrk (worst round)'), { goal: 'p99 <= 25 ms under wrk (worst round)', measured: '26 ms', met: false });
  t.equal(byGoal(stateGoals(result(null), 130)).get('the same under wrk')?.met, null, 'without wrk: not judged, not met');
  t.end();
});

t.test("beside a p99 goal, the rounds over it and within it that one of the server's checkpoints ended in", (t) => {
  const watched = (p99: number, syncMs: number | null): MeasuredRun => ({ ...run(p99), checkpoint: syncMs === null ? null : { writeMs: 27_000, syncMs } });
  const runs = [watched(21.5, null), watched(31.2, 262), watched(26, null), watched(18, 240)];
  t.equal(checkpointsOver(runs, 25), '; a checkpoint ended in 1 of the 2 rounds over it, 1 of the 2 within it');
  t.equal(checkpointsOver(runs, 40), '', 'nothing over it: nothing said');
  t.equal(checkpointsOver([run(31.2), run(20)], 25), '', 'rounds not watched for checkpoints: nothing said');
  const wrkGoal = byGoal(stateGoals({ ...result([21.5, 26]), wrk: { ...result([21.5, 26]).wrk!, gateway: [watched(21.5, null), watched(26, 262)] } }, 130)).get('p99 <= 25 ms under wrk (worst round)');
  t.same(wrkGoal, { goal: 'p99 <= 25 ms under wrk (worst round)', measured: '26 ms; a checkpoint ended in 1 of the 1 rounds over it, 0 of the 1 within it', met: false }, 'said, and still missed');
  t.end();
});

t.test('buffers per callback across sizes: judged on two sizes, not judged on one', (t) => {
  t.equal(buffersFlatGoal([{ size: '10k', buffersPerOk: 95 }]).met, null);
  t.equal(buffersFlatGoal([{ size: '10k', buffersPerOk: 95 }, { size: '1m', buffersPerOk: 140 }]).met, true);
  t.same(buffersFlatGoal([{ size: '10k', buffersPerOk: 95 }, { size: '1m', buffersPerOk: 150 }]), {
    goal: 'buffers per callback within 1.5x between the smallest and largest size',
    measured: '10k: 95, 1m: 150',
    met: false,
  });
  t.end();
});

t.test("a round's wall-clock span, to find it in the server's log (results written before it have none)", async (t) => {
  t.equal(clockSpan(run(20)), '09:21:03-09:21:13');
  t.equal(clockSpan({}), '?-?');
});
