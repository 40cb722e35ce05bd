import t from 'tap';
import { BENCH_OPTIONS } from '../../bench/lib/options.js';
import { stateRuns } from '../../bench/lib/states.js';
import { readCommandLine } from '../../src/config/cli.js';

const bench = { command: 'bench', summary: 's', accepts: (a: string) => BENCH_OPTIONS.test(a) };

t.test('every option the bench reads is accepted on its command line', async (t) => {
  // --tracing was read by the harness but refused by the command line ("unknown option").
  for (const option of ['--quick', '--profile', '--probe', '--own-postgres', '--only=callback,submit', '--long-poll-callbacks=32', '--delivery-rate=500', '--rate=400', '--tracing', '--tracing=on', '--tracing=off', '--tracing=aa', '--states=a,b,c,d', '--sizes=10k,100k,1m', '--only=campaign', '--lines=5000', '--outage-s=5', '--campaign-rps=50']) {
    t.match(readCommandLine(bench, [option]), { run: true }, option);
  }
});

t.test('misspelt options are refused', async (t) => {
  for (const option of ['--tracing=maybe', '--trace', '--only=', '--delivery-rate=fast', '--states=e', '--sizes=huge', '--lines=many', '--lines=', '--campaign-rps=fast']) {
    t.match(readCommandLine(bench, [option]), { run: false, exitCode: 2 }, option);
  }
});

t.test('the bench states run each asked state at each asked size; a small set by default', async (t) => {
  t.same(stateRuns(undefined, undefined), [{ state: 'a', size: '10k', requests: 10_000 }, { state: 'b', size: '10k', requests: 10_000 }]);
  t.same(stateRuns('c,d', '10k,1M').map((r) => `${r.state} ${r.requests}`), ['c 10000', 'c 1000000', 'd 10000', 'd 1000000']);
  t.throws(() => stateRuns('a,,x', undefined), /"x" is not one of a, b, c, d/);
  t.throws(() => stateRuns(undefined, '5k'), /"5k" is not one of 10k, 100k, 1m/);
});
