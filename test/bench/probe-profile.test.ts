import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

// `npm run bench -- --probe-profile`: the probe (bench/probe.ts) keeps a CPU profile of each interval
// between the harness's SIGUSR2s, and bench/profile-summary.ts sets one side's runs beside the other's.

const PROBE = fileURLToPath(new URL('../../bench/probe.js', import.meta.url));
const SUMMARY = fileURLToPath(new URL('../../bench/profile-summary.js', import.meta.url));

/** A process with the probe loaded that burns CPU in a named function until it is told to stop. */
const BUSY = `
function spinForTheProbe() { let x = 0; for (let i = 0; i < 2e5; i++) x += Math.sqrt(i); return x; }
process.stdout.write('ready\\n');
const timer = setInterval(spinForTheProbe, 1);
process.on('SIGTERM', () => clearInterval(timer));
`;

t.test('each interval between SIGUSR2s leaves its own profile, and the summary tells two sets apart', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'probe-profile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['--import', PROBE, '--input-type=module', '-e', BUSY], {
    env: { ...process.env, PROBE_FILE: path.join(dir, 'probe.jsonl'), PROBE_PROFILE: path.join(dir, 'side') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  await once(child.stdout, 'data');
  const lines = async () => (await readFile(path.join(dir, 'probe.jsonl'), 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
  // The first signal starts the first interval (the time since start is not kept), as the harness's before a run.
  for (let n = 1; n <= 3; n++) {
    // An interval of some 300 ms of work: what is measured, not a wait for something to happen.
    await new Promise((resolve) => setTimeout(resolve, 300));
    child.kill('SIGUSR2');
    await until(async () => (await lines()) >= n);
  }
  // The profiler writes each interval's profile once it has stopped: the last one too.
  await until(async () => (await readdir(dir)).includes('side-2.cpuprofile'));
  child.kill('SIGTERM');
  await exited;

  const files = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile')).sort();
  t.same(files, ['side-1.cpuprofile', 'side-2.cpuprofile'], 'one profile per interval after the first signal, none for the time before it');
  for (const file of files) {
    const profile = JSON.parse(await readFile(path.join(dir, file), 'utf8')) as { nodes: { callFrame: { functionName: string } }[]; samples: number[] };
    t.ok(profile.samples.length > 0, `${file} holds samples`);
    t.ok(
      profile.nodes.some((n) => n.callFrame.functionName === 'spinForTheProbe'),
      `${file} saw the busy function`,
    );
  }

  const one = path.join(dir, 'side-1.cpuprofile');
  const both = `${one},${path.join(dir, 'side-2.cpuprofile')}`;
  const alone = spawnSync(process.execPath, [SUMMARY, both, '5'], { encoding: 'utf8' });
  t.equal(alone.status, 0, alone.stderr);
  t.match(alone.stdout, /spinForTheProbe/, 'two profiles summed name the busy function');
  // Both intervals against the first alone: the busy function's difference is the second interval's share, above zero.
  const against = spawnSync(process.execPath, [SUMMARY, both, '40', `--against=${one}`], { encoding: 'utf8' });
  t.equal(against.status, 0, against.stderr);
  const row = against.stdout.split('\n').find((line) => line.includes('spinForTheProbe'));
  t.ok(row, 'the difference lists the busy function');
  const [difference, mine, theirs] = (row ?? '').trim().split(/\s+/).map(Number);
  t.ok(difference !== undefined && difference > 0, `its difference is positive: ${row}`);
  t.equal(Math.round(((mine ?? 0) - (theirs ?? 0)) * 10) / 10, difference, 'difference = these - those');
});

/** Another process writes the files: polled every 20 ms, for at most 10 s. */
async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('the probe did not write what it was asked to within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
