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

/**
 * A process with the probe loaded that burns CPU in a named function, a line on stdout after each
 * few milliseconds of it: the test counts work done, not time passed (a loaded CI host gives the
 * process little of a wall-clock interval).
 */
const BUSY = `
let sink = 0;
// The timer's own callback, so that no caller can inline it out of the profile.
function spinForTheProbe() { for (let i = 0; i < 1e6; i++) sink += Math.sqrt(i); process.stdout.write('spun\\n'); }
const timer = setInterval(spinForTheProbe, 1);
process.on('SIGTERM', () => { clearInterval(timer); process.exitCode = sink > 0 ? 0 : 1; });
`;

t.test('each interval between SIGUSR2s leaves its own profile, and the summary tells two sets apart', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'probe-profile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['--import', PROBE, '--input-type=module', '-e', BUSY], {
    env: { ...process.env, PROBE_FILE: path.join(dir, 'probe.jsonl'), PROBE_PROFILE: path.join(dir, 'side') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  let spun = 0;
  let wanted = 0;
  let reached: (() => void) | undefined;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    spun += chunk.split('spun').length - 1;
    if (reached && spun >= wanted) {
      reached();
      reached = undefined;
    }
  });
  /** Resolves once the child has spun `more` times since the last call. */
  const spin = (more: number) =>
    new Promise<void>((resolve) => {
      wanted = spun + more;
      if (spun >= wanted) resolve();
      else reached = resolve;
    });
  const lines = async () => (await readFile(path.join(dir, 'probe.jsonl'), 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
  // The first signal starts the first interval (the time since start is not kept), as the harness's before a run.
  for (let n = 1; n <= 3; n++) {
    // Each interval holds 30 spins of work (some 100 ms of CPU) however slowly the host runs it.
    await spin(30);
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
    const profile = JSON.parse(await readFile(path.join(dir, file), 'utf8')) as { nodes: unknown[]; samples: number[]; timeDeltas: number[] };
    t.ok(profile.samples.length > 0 && profile.samples.length === profile.timeDeltas.length, `${file} holds samples`);
  }

  // Which functions a loaded host's sampler catches is luck (Node 24 gave a busy loop 0.1 ms in
  // some runs): what is asserted is the summary's own arithmetic, whatever it lists.
  const one = path.join(dir, 'side-1.cpuprofile');
  const both = `${one},${path.join(dir, 'side-2.cpuprofile')}`;
  const alone = spawnSync(process.execPath, [SUMMARY, both, '1000'], { encoding: 'utf8' });
  t.equal(alone.status, 0, alone.stderr);
  t.match(alone.stdout, /s sampled, [\d.]+ s busy/, 'two profiles summed');
  const against = spawnSync(process.execPath, [SUMMARY, both, '1000', `--against=${one}`], { encoding: 'utf8' });
  t.equal(against.status, 0, against.stderr);
  t.match(against.stdout, /; against .* s busy/, 'the header names the other set');
  // Two tables (by package, by function), each sorted by difference, largest first.
  const tables = against.stdout.split(/\nself time by [^\n]*\n/).slice(1).map((table) =>
    table
      .split('\n')
      .map((line) => /^\s*(-?[\d.]+)\s+([\d.]+)\s+([\d.]+)\s{2}\S/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [Number(m[1]), Number(m[2]), Number(m[3])] as const),
  );
  t.equal(tables.length, 2, 'by package and by function');
  const rows = tables.flat();
  t.ok(rows.length > 0, 'the difference has rows');
  // Each figure is printed rounded to 0.1 ms on its own: a difference may be 0.1 off.
  t.ok(rows.every(([difference, mine, theirs]) => Math.abs(mine - theirs - difference) < 0.11), 'every row: difference = these - those');
  // Both intervals against the first alone: no function can have less self time in the sum.
  t.ok(rows.every(([difference]) => difference >= 0), 'no row is negative: the sum holds the first interval whole');
  // Sorted by difference, largest first.
  for (const table of tables) t.ok(table.every(([difference], i) => i === 0 || difference <= (table[i - 1]?.[0] ?? 0)), 'largest difference first');
});

/** Another process writes the files: polled every 20 ms, for at most 10 s. */
async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('the probe did not write what it was asked to within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
