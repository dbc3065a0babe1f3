#!/usr/bin/env python3
"""Real programs under `igprof -mp`: stdout, stderr and exit status must be
identical to a native run, output files byte-identical, and every process of
the run must leave a well-formed dump with allocations in it.

Usage: real.py --bin BUILD/bin NAME
"""
import argparse
import filecmp
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import igdump  # noqa: E402
import target  # noqa: E402

from checks import check, eq, failures, status  # noqa: E402,F401


def run(cmd, cwd, stdin=None):
    return subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, timeout=300)


def compare(a, name, cmd, stdin=None, setup=None, outputs=(), min_dumps=1):
    """Run cmd natively in one directory and profiled in another."""
    base = tempfile.mkdtemp(prefix=f'igprof-real-{name}-')
    try:
        nat, prof = os.path.join(base, 'native'), os.path.join(base, 'profiled')
        os.mkdir(os.path.join(base, 'dumps'))
        for d in (nat, prof):
            os.mkdir(d)
            if setup:
                setup(d)
        n = run(cmd, nat, stdin)
        p = run([a.igprof, '-mp', '-o', os.path.join(base, 'dumps', 'igprof.%p'), '--'] + cmd, prof, stdin)
        check(p.returncode == n.returncode, f'{name}: exit status {p.returncode} vs native {n.returncode}')
        check(p.stdout == n.stdout, f'{name}: stdout differs ({len(p.stdout)} vs {len(n.stdout)} bytes)')
        check(p.stderr == n.stderr, f'{name}: stderr differs: {p.stderr[-300:]!r} vs {n.stderr[-300:]!r}')
        for f in outputs:
            check(filecmp.cmp(os.path.join(nat, f), os.path.join(prof, f), shallow=False),
                  f'{name}: output file {f} differs')
        files = glob.glob(os.path.join(base, 'dumps', 'igprof.*'))
        check(len(files) >= min_dumps, f'{name}: {len(files)} dumps, expected at least {min_dumps}')
        calls = 0
        for f in files:
            try:
                d = igdump.Dump(f)
                calls += sum(v[0] for v in d.by_leaf('MEM_TOTAL').values())
            except ValueError as e:
                check(False, f'{name}: malformed dump: {e}')
        check(calls > 0, f'{name}: no allocations recorded')
        print(f'{name}: exit {p.returncode}, {len(p.stdout)} bytes of stdout, {len(files)} dumps, {calls} allocations')
    finally:
        shutil.rmtree(base)


SQL = b"""create table t(id integer primary key, name text, v real);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 5000)
insert into t(name, v) select 'n' || (x % 97), x * 0.5 from c;
create index t_name on t(name);
select name, count(*), sum(v) from t group by name order by 2 desc, 1 limit 5;
select count(distinct name) from t;
"""

MAKEFILE = """CC = gcc
OBJS = main.o util.o
prog: $(OBJS)
\t$(CC) -o $@ $(OBJS)
%.o: %.c util.h
\t$(CC) -O1 -c $< -o $@
check: prog
\t./prog 7
"""


def make_project(d):
    open(os.path.join(d, 'Makefile'), 'w').write(MAKEFILE)
    open(os.path.join(d, 'util.h'), 'w').write('int square(int x);\n')
    open(os.path.join(d, 'util.c'), 'w').write('#include "util.h"\nint square(int x) { return x * x; }\n')
    open(os.path.join(d, 'main.c'), 'w').write(
        '#include <stdio.h>\n#include <stdlib.h>\n#include "util.h"\n'
        'int main(int c, char **v) { int n = c > 1 ? atoi(v[1]) : 3; printf("%d\\n", square(n)); return 0; }\n')


def cxx_source(d):
    open(os.path.join(d, 'x.cpp'), 'w').write(
        '#include <map>\n#include <string>\n#include <vector>\n'
        'std::map<std::string, std::vector<int>> f(int n) {\n'
        '  std::map<std::string, std::vector<int>> m;\n'
        '  for (int i = 0; i < n; ++i) m[std::to_string(i)].push_back(i);\n  return m;\n}\n')


CASES = {
    'sqlite3': lambda a: compare(a, 'sqlite3', ['sqlite3', ':memory:'], stdin=SQL),
    'python3': lambda a: compare(a, 'python3', [a.python, '-c',
                                 'import json,collections\n'
                                 'c = collections.Counter(json.dumps(list(range(i)))[-3:] for i in range(2000))\n'
                                 'print(sorted(c.items())[:5], len(c))']),
    'perl': lambda a: compare(a, 'perl', ['perl', '-e',
                              'my %h; $h{$_} = "x" x ($_ % 50) for 1..20000; '
                              'my $t = 0; $t += length $h{$_} for keys %h; print scalar(keys %h), " $t\\n"']),
    'sort': lambda a: compare(a, 'sort', ['sort', '-n', '-r'],
                              stdin=''.join(f'{(i * 7919) % 10007}\n' for i in range(20000)).encode()),
    'pipeline': lambda a: compare(a, 'pipeline', ['sh', '-c', 'seq 1 5000 | sort -r | head -3; exit 5'],
                                  min_dumps=3),
    'make': lambda a: compare(a, 'make', ['make', '-j2', 'check'], setup=make_project,
                              outputs=('prog', 'main.o', 'util.o'), min_dumps=6),
    'g++': lambda a: compare(a, 'g++', ['g++', '-O1', '-c', 'x.cpp', '-o', 'x.o'], setup=cxx_source,
                             outputs=('x.o',), min_dumps=3),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('name', choices=sorted(CASES))
    a = ap.parse_args()
    a.igprof = os.path.join(os.path.abspath(a.bin), 'igprof')
    a.target = target.setup(a.bin)
    a.python = a.target.python() if a.target.cross else 'python3'
    CASES[a.name](a)
    return status()


if __name__ == '__main__':
    sys.exit(main())
