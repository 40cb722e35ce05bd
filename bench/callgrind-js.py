#!/usr/bin/env python3
"""Names the JIT-compiled JavaScript of a callgrind dump, using V8's perf map (docs/tracing.md, Cost).

Callgrind shows JIT code as ???:0xADDR (the address of the first block it met in it); a gateway run
with --perf-basic-prof (tracing-instructions.js --perf-map) leaves /tmp/perf-<pid>.map, each JIT
code object's start, size and name. Self instructions are summed by JavaScript function and by
package (node_modules/<package>, dist/<dir>, node:internal), with everything else (V8's builtins,
the GC, the compiler, libc, Node's C++) kept by its symbol.
Usage: python3 bench/callgrind-js.py DUMP MAP N [DUMP2 MAP2 N2]   (N: answers in the dump)
With a second dump, prints the difference per package and per function (second minus first), per answer.
"""
import bisect, os, re, subprocess, sys
from collections import defaultdict

def load_map(path):
    entries = []
    with open(path, errors='replace') as f:
        for order, line in enumerate(f):
            parts = line.rstrip('\n').split(' ', 2)
            if len(parts) < 3: continue
            try: start, size = int(parts[0], 16), int(parts[1], 16)
            except ValueError: continue
            entries.append((start, start + size, order, parts[2]))
    entries.sort()
    return entries, [e[0] for e in entries]

def lookup(index, addr):
    entries, starts = index
    i = bisect.bisect_right(starts, addr) - 1
    best = None
    # Code may be freed and its space reused: the latest object that covers the address wins.
    for j in range(i, max(-1, i - 400), -1):
        s, e, order, name = entries[j]
        if s <= addr < e and (best is None or order > best[0]): best = (order, name)
    return best[1] if best else None

PKG = [
    (re.compile(r'node_modules/(@[^/]+/[^/]+|[^/]+)/'), lambda m: m.group(1)),
    (re.compile(r'/dist/(src|bench)/([^/ :]+)'), lambda m: f'gateway {m.group(1)}/{m.group(2)}'),
    (re.compile(r'node:([\w/]+)'), lambda m: 'node:' + m.group(1).split('/')[0] + ('/' + m.group(1).split('/')[1] if m.group(1).startswith('internal/') else '')),
]

def package(name):
    for pattern, label in PKG:
        m = pattern.search(name)
        if m: return label(m)
    return 'other JS' if name.startswith('JS:') or 'Function:' in name else name.split(':')[0]

def function(name):
    name = re.sub(r'file://\S*/node_modules/', '', name)
    name = re.sub(r'file://\S*/dist/', 'dist/', name)
    return name

def read(dump, mapfile, n):
    out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', dump], capture_output=True, text=True).stdout
    index = load_map(mapfile)
    by_fn, by_pkg = defaultdict(float), defaultdict(float)
    total = 0
    for line in out.splitlines():
        m = re.match(r'^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$', line)
        if not m: continue
        ir = int(m.group(1).replace(',', ''))
        fn = m.group(2).strip()
        if 'PROGRAM TOTALS' in line:
            total = ir
            continue
        a = re.match(r'^\?\?\?:0x([0-9a-fA-F]+)', fn)
        if a:
            name = lookup(index, int(a.group(1), 16)) or 'unmapped JIT code'
            by_fn[function(name)] += ir / n
            by_pkg['JS ' + package(name)] += ir / n
        else:
            sym = re.sub(r"'\d+$", '', re.sub(r'^\?\?\?:', '', re.sub(r'\s*\[[^\]]*\]$', '', fn)))
            by_fn[sym] += ir / n
            by_pkg['native ' + bucket(sym)] += ir / n
    return total / n, by_fn, by_pkg

BUCKETS = [
    ('JIT compiler', re.compile(r'compiler::|maglev|Maglev|baseline::|Baseline(Batch)?Compiler|Turboshaft|turboshaft|RegExpCompiler|Parser|Scanner|BytecodeGenerator|interpreter::')),
    ('garbage collector', re.compile(r'Scavenge|Heap::|heap::|Marking|Sweeper|MarkCompact|Evacuat|GC|ConcurrentMarking|MemoryAllocator|Compactor|cppgc')),
    ('bytecode handlers', re.compile(r'Builtins_.*Handler')),
    ('V8 builtins', re.compile(r'Builtins_')),
    ('V8 runtime', re.compile(r'Runtime_|v8::internal::')),
    ('libc', re.compile(r'libc\.so|ld-linux|libpthread|^_?_?(mem|str|malloc|free|calloc|realloc)')),
]

def bucket(sym):
    for name, pattern in BUCKETS:
        if pattern.search(sym): return name
    return 'other native'

def show(title, d, limit):
    print(title)
    for k, v in sorted(d.items(), key=lambda kv: -abs(kv[1]))[:limit]:
        try: print(f'  {v:>12,.0f}  {k[:150]}')
        except BrokenPipeError: sys.exit(0)

args = sys.argv[1:]
first = read(args[0], args[1], int(args[2]))
if len(args) < 6:
    print(f'{first[0]:,.0f} instructions per answer')
    show('by package', first[2], 40)
    show('by function', first[1], int(os.environ.get('TOP', 60)))
else:
    second = read(args[3], args[4], int(args[5]))
    print(f'{first[0]:,.0f} -> {second[0]:,.0f} instructions per answer ({second[0] - first[0]:+,.0f})')
    pk = defaultdict(float)
    for k, v in first[2].items(): pk[k] -= v
    for k, v in second[2].items(): pk[k] += v
    show('difference by package (second - first)', pk, 40)
    fn = defaultdict(float)
    for k, v in first[1].items(): fn[k] -= v
    for k, v in second[1].items(): fn[k] += v
    show('difference by function', fn, int(os.environ.get('TOP', 80)))
