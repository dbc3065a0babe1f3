#!/usr/bin/env python3
"""igprof -pp on walk_dlclose_prog: after 50 dlopen/dlclose rounds, the CPU
burnt in burn_leaf must be sampled with whole stacks (burn_leaf, burn_mid,
burn_outer, main). The fast walker refuses to derive recipes while a
dlclose is under way; if the end of a close were ever missed, every later
signal walk would stop at its first, not yet cached, frame.

usage: pp_after_dlclose.py IGPROF PROGRAM PLUGIN
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

NODE = re.compile(r'^C([0-9a-f]+) FN([0-9a-f]+)(=\(.*? N=\((.*?)\)\))?\+[0-9a-f]+(.*)$')
TICKS = re.compile(r'V0(?:=\(PERF_TICKS\))?:\(([0-9a-f]+),')


def samples(path):
    """(stack of symbol names, innermost first, ticks) for every node with ticks."""
    names, stack, out = {}, [], []
    with open(path, errors='replace') as f:
        for line in f:
            m = NODE.match(line.rstrip('\n'))
            if not m:
                continue
            depth, fn = int(m.group(1), 16), m.group(2)
            if m.group(4) is not None:
                names[fn] = m.group(4)
            del stack[depth - 1:]
            stack.append(names.get(fn, '?'))
            t = TICKS.search(m.group(5))
            if t:
                out.append((list(reversed(stack)), int(t.group(1), 16)))
    return out


def main():
    igprof, program, plugin = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([igprof, '-pp', '-o', os.path.join(tmp, 'ig.%p'), '--', program,
                            plugin, '50'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0 or r.stdout.strip() != '50 rounds':
            print(f'FAIL: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}')
            return 1
        dumps = glob.glob(os.path.join(tmp, 'ig.*'))
        if len(dumps) != 1:
            print(f'FAIL: expected one dump, found {dumps}')
            return 1
        whole = cut = 0
        for stack, ticks in samples(dumps[0]):
            if not stack[0].startswith('burn_leaf'):
                continue
            names = [s.split('.')[0] for s in stack[:4]]
            if names == ['burn_leaf', 'burn_mid', 'burn_outer', 'main']:
                whole += ticks
            else:
                cut += ticks
                print('cut or wrong stack:', ' <- '.join(stack))
        print(f'burn_leaf samples: {whole} with the whole stack, {cut} without')
        # 0.4 s of CPU at 200 Hz is 80 samples; allow for a loaded machine.
        if cut != 0 or whole < 40:
            print('FAIL')
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
