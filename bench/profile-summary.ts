import { readFileSync } from 'node:fs';

// `node dist/bench/profile-summary.js <file.cpuprofile>[,more...] [top] [--against=<file>[,more...]]`:
// where a `--profile` run's gateway (or `--probe-profile` runs, summed) spent its CPU, by self time
// per function and per package (or project file). With --against, the difference in milliseconds
// from the other set, largest first (the same runs of the other side of an A/B, say).

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const against = args.find((a) => a.startsWith('--against='))?.slice('--against='.length);
const [files, topArg] = args.filter((a) => !a.startsWith('--'));
if (!files) {
  process.stderr.write('usage: profile-summary <file.cpuprofile>[,more...] [top] [--against=<file.cpuprofile>[,more...]]\n');
  process.exit(2);
}
const top = Number(topArg ?? 25);
// Idle time and time spent descheduled inside a socket write say nothing about the gateway's own code.
const NOT_BUSY = new Set(['(idle)', 'writev', 'writeBuffer', 'writeUtf8String']);

function where(url: string): string {
  if (!url) return '(native/vm)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  if (url.startsWith('node:')) return url;
  const dist = url.indexOf('/dist/');
  return dist >= 0 ? url.slice(dist + 1) : url;
}

interface Summary {
  total: number;
  busy: number;
  functions: Map<string, number>;
  packages: Map<string, number>;
}

/** Self time (microseconds) of the profiles in a comma-separated list, summed. */
function summarise(list: string): Summary {
  const summary: Summary = { total: 0, busy: 0, functions: new Map(), packages: new Map() };
  for (const file of list.split(',')) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    profile.samples.forEach((id, i) => {
      const us = profile.timeDeltas[i] ?? 0;
      summary.total += us;
      const node = byId.get(id);
      if (!node) return;
      const { functionName, url, lineNumber } = node.callFrame;
      if (!url && NOT_BUSY.has(functionName)) return;
      summary.busy += us;
      const pkg = where(url);
      const fn = `${functionName || '(anonymous)'} ${pkg}${url ? `:${lineNumber + 1}` : ''}`;
      summary.functions.set(fn, (summary.functions.get(fn) ?? 0) + us);
      summary.packages.set(pkg, (summary.packages.get(pkg) ?? 0) + us);
    });
  }
  return summary;
}

const mine = summarise(files);
const other = against === undefined ? undefined : summarise(against);
const show = (title: string, m: Map<string, number>, o: Map<string, number> | undefined) => {
  process.stdout.write(`\n${title}\n`);
  if (!o) {
    for (const [name, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      process.stdout.write(`${((us / mine.busy) * 100).toFixed(1).padStart(5)}%  ${name}\n`);
    }
    return;
  }
  const rows = [...new Set([...m.keys(), ...o.keys()])].map((name) => [name, m.get(name) ?? 0, o.get(name) ?? 0] as const);
  for (const [name, a, b] of rows.sort((x, y) => y[1] - y[2] - (x[1] - x[2])).slice(0, top)) {
    process.stdout.write(`${((a - b) / 1000).toFixed(1).padStart(8)} ${(a / 1000).toFixed(1).padStart(8)} ${(b / 1000).toFixed(1).padStart(8)}  ${name}\n`);
  }
};
const busyLine = (s: Summary) => `${(s.total / 1e6).toFixed(1)} s sampled, ${(s.busy / 1e6).toFixed(2)} s busy`;
if (other) {
  process.stdout.write(`${busyLine(mine)}; against ${busyLine(other)} (idle and socket-write syscalls left out); ms: difference, these, those:\n`);
} else {
  process.stdout.write(`${busyLine(mine)} (idle and socket-write syscalls left out); shares of busy time:\n`);
}
show('self time by package / file', mine.packages, other?.packages);
show('self time by function', mine.functions, other?.functions);
