#!/usr/bin/env python3
"""igprof -mp --unwind fast and --unwind libunwind must record the same
stacks: the call trees of the two dumps, with their counters, are equal.

Each program runs once per method, without address randomisation (setarch
-R) so that programs which hash pointers allocate the same way each time.
Dumps are compared after removing what legitimately differs between two
runs: pids and times, and leak addresses (leak sizes are kept, as a sorted
list per node). Frames are module-relative (F<n>+offset), so any
difference in a walked stack shows up as a difference in the tree.

The two runs of a program must differ in nothing but the walker: python3
runs with a fixed hash seed, writes no bytecode (the first run would leave
.pyc files the second reads), imports no site module, and both runs get
environments of the same size.

usage: methods_agree.py IGPROF CXX_PROGRAM [--program NAME=PATH]... [--no-unwind-data NAME]...
  --program: run PATH for NAME (sqlite3, python3), e.g. a cross build's
  target programs instead of the host's
  --no-unwind-data: NAME's code carries no unwind data on this target (no
  walker passes its frames): its dumps must still be identical, but need
  not hold the 200 call-tree nodes asked of the others
"""
import os
import re
import subprocess
import sys
import tempfile

PROGRAMS = [
    ['sqlite3', ':memory:',
     'create table t(a integer primary key, b text);'
     'with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000) '
     'insert into t select x, hex(x * 7919) from c;'
     'create index tb on t(b); select count(*), max(b) from t;'],
    # -B: no bytecode written by the first run for the second to read; -S -s:
    # no site module, no user site (their .pth files import other modules).
    # A minimal standard library (a cross guest root's) may lack json.
    ['python3', '-B', '-S', '-s', '-c', 'import re\n'
     'try:\n    from json import dumps\nexcept ImportError:\n    dumps = repr\n'
     'd = {str(i): [i] * (i % 7) for i in range(20000)}\n'
     's = dumps(d)\nprint(len(s), len(re.findall(r"\\d+", s)))'],
]
METHODS = ['fast', 'libunwind']
ABS = re.compile(r'N=\(@\?0x[0-9a-f]+\)')
LEAKS = re.compile(r'((?:;LK=\(0x[0-9a-f]+,[0-9a-f]+\))+)')
LEAK = re.compile(r';LK=\(0x[0-9a-f]+,([0-9a-f]+)\)')


def normalise(path):
    out = []
    with open(path, errors='replace') as f:
        for line in f:
            if line.startswith('P=('):
                continue  # pid, program name, time
            line = ABS.sub('N=(@?)', line.rstrip('\n'))
            m = LEAKS.search(line)
            if m:
                sizes = sorted(LEAK.findall(m.group(1)), key=lambda s: int(s, 16))
                line = line[:m.start()] + ';LK=' + ','.join(sizes) + line[m.end():]
            out.append(line)
    return out


def run(igprof, method, argv, tmp):
    """All dumps of the run (one per process), normalised, in a stable order."""
    # Both runs see environments of the same size (the dump path and the
    # method are in $IGPROF, and programs copy their environment): the
    # output directory's name has a fixed length and IGPROF_TEST_PAD makes
    # up for the method's name.
    outdir = os.path.join(tmp, 'run-' + ('f' if method == 'fast' else 'l'))
    os.mkdir(outdir)
    pad = 'x' * (max(len(m) for m in METHODS) - len(method))
    # IGPROF_WALK_PROLOGUES=0: on ARM32 the fast walker would go on past the
    # frames without unwind entries, where libunwind's walk ends, by reading
    # their prologues (walk.prologue_* test those frames); here both walkers
    # end there.
    env = dict(os.environ, PYTHONHASHSEED='0', PYTHONDONTWRITEBYTECODE='1',
               IGPROF_TEST_PAD=pad, IGPROF_WALK_PROLOGUES='0')
    # Without address randomisation: cc1plus hashes pointers, so its
    # allocations differ from run to run when the layout does.
    r = subprocess.run(['setarch', '-R', igprof, '-mp', '--unwind', method, '-o',
                        os.path.join(outdir, 'ig.%p'), '--'] + argv,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp)
    if r.returncode != 0:
        sys.exit(f'FAIL: {argv[0]} under --unwind {method} exited {r.returncode}: {r.stderr!r}')
    dumps = []
    for name in os.listdir(outdir):
        with open(os.path.join(outdir, name), errors='replace') as f:
            program = f.readline()
        program = re.sub(r'ID=[0-9a-f]+|T=[0-9.]+', '', program)
        dumps.append((program, normalise(os.path.join(outdir, name))))
    dumps.sort()
    return [l for program, lines in dumps for l in [program.strip()] + lines], r.stdout


def main():
    args = sys.argv[1:]
    paths, no_unwind = {}, set()
    while len(args) > 2 and (args[-2] == '--program' and '=' in args[-1] or args[-2] == '--no-unwind-data'):
        if args[-2] == '--program':
            name, path = args[-1].split('=', 1)
            paths[name] = path
        else:
            no_unwind.add(args[-1])
        args = args[:-2]
    names = [p[0] for p in PROGRAMS]
    if len(args) != 2 or any(name not in names for name in list(paths) + list(no_unwind)):
        sys.exit('usage: methods_agree.py IGPROF CXX_PROGRAM [--program NAME=PATH]... [--no-unwind-data NAME]...')
    few = set()
    for argv in PROGRAMS:
        if argv[0] in no_unwind:
            few.add(paths.get(argv[0], argv[0]))
        argv[0] = paths.get(argv[0], argv[0])
    igprof = os.path.abspath(args[0])
    # Our own C++ workload (exceptions, qsort callbacks, inlining); compilers
    # are no good here: their allocations follow the profiler's own mmaps.
    PROGRAMS.append([os.path.abspath(args[1])])
    failures = 0
    for argv in PROGRAMS:
        with tempfile.TemporaryDirectory() as tmp:
            fast, out_fast = run(igprof, 'fast', argv, tmp)
            slow, out_slow = run(igprof, 'libunwind', argv, tmp)
            frames = sum(1 for l in fast if l.startswith('C'))
            if out_fast != out_slow:
                print(f'FAIL: {argv[0]}: program output differs between methods')
                failures += 1
            elif fast != slow:
                diff = [(a, b) for a, b in zip(fast, slow) if a != b][:3]
                print(f'FAIL: {argv[0]}: dumps differ ({len(fast)} vs {len(slow)} lines); first:')
                for a, b in diff:
                    print(f'  fast:      {a[:200]}\n  libunwind: {b[:200]}')
                failures += 1
            elif frames < 200 and (argv[0] not in few or frames == 0):
                print(f'FAIL: {argv[0]}: only {frames} call-tree nodes, the test proves little')
                failures += 1
            elif frames < 200:
                print(f'ok: {argv[0]}: identical dumps, {frames} call-tree nodes (its code has no unwind data here)')
            else:
                print(f'ok: {argv[0]}: identical dumps, {frames} call-tree nodes')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
