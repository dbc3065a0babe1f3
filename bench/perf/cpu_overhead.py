#!/usr/bin/env python3
"""CPU-time overhead of profilers on the shared workloads.

Companion to bench/overhead.sh (wall time): the same alternation (native,
tool1, tool2, ... per round, one warm-up round not counted), but each run's
cost is the user + system CPU time of the whole process tree (wait4 rusage
of the child, which includes every waited-for descendant). On a machine
shared with other jobs, wall time mostly measures the neighbours; CPU time
mostly measures the program and its profiler.

Usage: cpu_overhead.py [--runs N] [--workloads a,b] [--shared DIR]
                       --tool 'NAME=command prefix' [--tool ...]
%o in a prefix becomes a fresh scratch directory for that run's output.
Prints a markdown table: median CPU ratio to native [min-max], median
native CPU seconds.
"""
import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def workload(shared, name, action):
    out = subprocess.run([os.path.join(shared, 'bench', 'workloads', name + '.sh'), action],
                         check=True, capture_output=True, text=True).stdout
    return out


def run_once(prefix, cmd, env, scratch):
    out = tempfile.mkdtemp(dir=scratch)
    line = prefix.replace('%o', out) + ' ' + cmd
    p = subprocess.Popen(['bash', '-c', line], cwd=out, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors='replace')
    p.stderr.close()
    shutil.rmtree(out, ignore_errors=True)
    if p.returncode != 0:
        sys.exit(f'cpu_overhead.py: {line!r} exited {p.returncode}: {err[-400:]}')
    return usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--workloads', default='sqlite,python,gzip,xz')
    ap.add_argument('--shared', default=os.environ.get('SHARED', os.path.join(ROOT, '..', 'shared')))
    ap.add_argument('--tool', action='append', default=[], required=True)
    a = ap.parse_args()
    tools = [t.split('=', 1) for t in a.tool]
    if any(len(t) != 2 for t in tools):
        sys.exit('cpu_overhead.py: --tool needs NAME=PREFIX')
    scratch = tempfile.mkdtemp(prefix='igprof-cpubench.')
    print('| workload | native CPU s | ' + ' | '.join(n for n, _ in tools) + ' |')
    print('|---|---|' + '---|' * len(tools))
    try:
        for wl in a.workloads.split(','):
            workload(a.shared, wl, 'setup')
            cmd = workload(a.shared, wl, 'cmd').strip()
            env = dict(os.environ)
            for line in workload(a.shared, wl, 'env').splitlines():
                if '=' in line:
                    k, v = line.split('=', 1)
                    env[k] = v
            natives, ratios = [], [[] for _ in tools]
            for rnd in range(a.runs + 1):
                n = run_once('', cmd, env, scratch)
                for i, (_, prefix) in enumerate(tools):
                    t = run_once(prefix, cmd, env, scratch)
                    if rnd:
                        ratios[i].append(t / n)
                if rnd:
                    natives.append(n)
            cells = [f'{statistics.median(r):.3f} [{min(r):.3f}–{max(r):.3f}]' for r in ratios]
            print(f'| {wl} | {statistics.median(natives):.2f} | ' + ' | '.join(cells) + ' |', flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == '__main__':
    main()
