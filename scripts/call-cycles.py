#!/usr/bin/env python3
"""Which files of libigprof.so call each other in a cycle.

Reads the runtime's object files from a build (nm: the symbols each file
defines and the ones it uses), draws an edge A -> B when A uses a function or
variable B defines, and prints every strongly connected component of more
than one file: files that reach each other through calls, so none of them
can be read, tested or replaced without the others. A layered design has
none (the core never calls a module; a module calls the core).

Usage: scripts/call-cycles.py [BUILD_DIR] [--edges]
  BUILD_DIR  a configured and built tree (default: build)
  --edges    also print, for each cycle, the edges inside it and the
             symbols behind each edge
Exit status: 0 when there is no cycle, 1 when there is one, 2 on bad input.
"""
import os
import subprocess
import sys


def objects(build):
    """The runtime's and the fast walker's object files, by source path
    (relative to src/). A build tree can hold stale objects of files that
    moved or went: only objects whose source exists count, the newest one
    for each source."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = {}
    for root, _dirs, files in os.walk(build):
        for target in ('igprof_runtime_objects.dir', 'igprof_walk_fast.dir'):
            marker = '/CMakeFiles/' + target
            if marker not in root + '/':
                continue
            srcdir = os.path.relpath(root[:root.index(marker)], build)
            base = root[:root.index(marker) + len(marker)]
            for f in files:
                if not f.endswith('.c.o'):
                    continue
                path = os.path.join(root, f)
                # CMake writes ../ as __/ in object paths.
                rel = os.path.relpath(path, base)[:-2].replace('__/', '../')
                source = os.path.normpath(os.path.join(top, srcdir, rel))
                if not os.path.exists(source):
                    continue
                name = os.path.relpath(source, os.path.join(top, 'src'))
                if name not in found or os.path.getmtime(path) > os.path.getmtime(found[name]):
                    found[name] = path
    return found


def symbols(path):
    out = subprocess.run(['nm', '--defined-only', '-g', path], capture_output=True,
                         text=True, check=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}
    out = subprocess.run(['nm', '--undefined-only', path], capture_output=True,
                         text=True, check=True).stdout
    used = {line.split()[-1] for line in out.splitlines() if line.split()}
    return defined, used


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, result = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                result.append(sorted(comp))
    return result


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    show_edges = '--edges' in sys.argv[1:]
    build = args[0] if args else 'build'
    objs = objects(build)
    if not objs:
        print(f'call-cycles.py: no runtime objects under {build} (build it first)', file=sys.stderr)
        return 2
    defs, uses = {}, {}
    owner = {}
    for src, path in objs.items():
        defs[src], uses[src] = symbols(path)
        for s in defs[src]:
            owner[s] = src
    edges = {src: set() for src in objs}
    why = {}
    for src in objs:
        for s in uses[src]:
            dst = owner.get(s)
            if dst and dst != src:
                edges[src].add(dst)
                why.setdefault((src, dst), []).append(s)
    cycles = [c for c in components(objs, edges) if len(c) > 1]
    print(f'{len(objs)} files, {sum(len(e) for e in edges.values())} edges, '
          f'{len(cycles)} cycle(s)')
    for c in cycles:
        print(f'cycle of {len(c)} files: {" ".join(c)}')
        if show_edges:
            inside = set(c)
            for a in c:
                for b in sorted(edges[a] & inside):
                    print(f'  {a} -> {b}: {" ".join(sorted(why[(a, b)]))}')
    return 1 if cycles else 0


if __name__ == '__main__':
    sys.exit(main())
