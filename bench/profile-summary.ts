import { readFileSync } from 'node:fs';

// `node dist/bench/profile-summary.js <file.cpuprofile> [top]`: where a `--profile` run's gateway
// spent its CPU, by self time per function and per package (or project file).

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

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: profile-summary <file.cpuprofile> [top]\n');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
// Idle time and time spent descheduled inside a socket write say nothing about the gateway's own code.
const NOT_BUSY = new Set(['(idle)', 'writev', 'writeBuffer', 'writeUtf8String']);
let busy = total;

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

const functions = new Map<string, number>();
const packages = new Map<string, number>();
for (const [id, us] of self) {
  const node = byId.get(id);
  if (!node) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  const pkg = where(url);
  const fn = `${functionName || '(anonymous)'} ${pkg}${url ? `:${lineNumber + 1}` : ''}`;
  if (!url && NOT_BUSY.has(functionName)) {
    busy -= us;
    continue;
  }
  functions.set(fn, (functions.get(fn) ?? 0) + us);
  packages.set(pkg, (packages.get(pkg) ?? 0) + us);
}
const show = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [name, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${((us / busy) * 100).toFixed(1).padStart(5)}%  ${name}\n`);
  }
};
process.stdout.write(
  `${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy (idle and socket-write syscalls left out); shares of busy time:\n`,
);
show('self time by package / file', packages);
show('self time by function', functions);
