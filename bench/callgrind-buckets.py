#!/usr/bin/env python3
"""Sums a callgrind dump's self instructions (callgrind_annotate --inclusive=no) into coarse buckets.

JIT-compiled JavaScript has no symbols under callgrind (it shows as ??? in no object), so a
package's share cannot be read here: only what kind of work the process did (docs/tracing.md, Cost).
Usage: python3 bench/callgrind-buckets.py DUMP [N]   (N: answers in the dump, for per-answer figures)
"""
import re, subprocess, sys

BUCKETS = [
    ('JIT compiler (TurboFan/Maglev/baseline)', re.compile(r'compiler::|maglev|Maglev|baseline::|Baseline(Batch)?Compiler|Turboshaft|turboshaft|RegExpCompiler|Parser|Scanner|BytecodeGenerator|interpreter::')),
    ('garbage collector', re.compile(r'Scavenge|Heap::|heap::|Marking|Sweeper|MarkCompact|Evacuat|GC|ConcurrentMarking|MemoryAllocator|Compactor|cppgc')),
    ('V8 builtins and interpreter (ICs, Builtins_*)', re.compile(r'Builtins_|Runtime_|v8::internal::')),
    ('JIT-compiled JavaScript (no symbols)', re.compile(r'^\?\?\?:0x|^\?\?\?:\?\?\? *$|\[\?\?\?\]$')),
    ('kernel entry / libc (syscalls, malloc, memcpy)', re.compile(r'libc\.so|ld-linux|libpthread')),
    ('zlib / OpenSSL / llhttp / libuv / Node C++', re.compile(r'libz|libcrypto|libssl|llhttp|uv_|node::|\[/usr/bin/node\]')),
]

def main():
    dump = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', dump], capture_output=True, text=True).stdout
    totals = {name: 0 for name, _ in BUCKETS}
    totals['other'] = 0
    total = 0
    for line in out.splitlines():
        m = re.match(r'^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$', line)
        if not m or 'PROGRAM TOTALS' in line:
            if m: total = int(m.group(1).replace(',', ''))
            continue
        ir = int(m.group(1).replace(',', ''))
        fn = m.group(2)
        for name, pattern in BUCKETS:
            if pattern.search(fn):
                totals[name] += ir
                break
        else:
            totals['other'] += ir
    print(f'{dump}: {total:,} instructions, {total / n:,.0f} per answer')
    for name, ir in totals.items():
        print(f'  {name:50s} {ir / n:>12,.0f} per answer  {100 * ir / max(total, 1):5.1f}%')

main()
