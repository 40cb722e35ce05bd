import t from 'tap';
import { BENCH_OPTIONS } from '../bench/lib/options.js';
import { readCommandLine } from '../src/cli.js';

const bench = { command: 'bench', summary: 's', accepts: (a: string) => BENCH_OPTIONS.test(a) };

t.test('every option the bench reads is accepted on its command line', async (t) => {
  // --tracing was read by the harness but refused by the command line ("unknown option").
  for (const option of ['--quick', '--profile', '--probe', '--own-postgres', '--only=callback,submit', '--long-poll-callbacks=32', '--delivery-rate=500', '--rate=400', '--tracing', '--tracing=on', '--tracing=off', '--tracing=aa']) {
    t.match(readCommandLine(bench, [option]), { run: true }, option);
  }
});

t.test('misspelt options are refused', async (t) => {
  for (const option of ['--tracing=maybe', '--trace', '--only=', '--delivery-rate=fast']) {
    t.match(readCommandLine(bench, [option]), { run: false, exitCode: 2 }, option);
  }
});
