"""A small reader of igprof HEX dumps for the end-to-end tests.

Independent of the runtime and of igprof-analyse: it follows the grammar in
docs/dump-format.md (IgProf's HEX variant) and fails loudly on anything else,
so a test using it also checks that the dump is well formed.
"""
import gzip
import re

HEADER = re.compile(r'^P=\(HEX ID=([0-9a-f]+) N=\((.*)\) T=(\d+\.\d{6})\)$')
FN = re.compile(r'FN([0-9a-f]+)(?:=\(F([0-9a-f]+)(?:=\(([^)]*)\))?\+([0-9a-f]+) N=\(([^)]*)\)\))?\+(-?[0-9a-f]+)')
CTR = re.compile(r' V([0-9a-f]+)(?:=\(([A-Z_]+)\))?:\((-?[0-9a-f]+),(-?[0-9a-f]+),(-?[0-9a-f]+)\)((?:;LK=\(0x[0-9a-f]+,[0-9a-f]+\))*)')
LEAK = re.compile(r';LK=\(0x([0-9a-f]+),([0-9a-f]+)\)')


def unescape(s):
    return re.sub(r'%([0-9A-F]{2})', lambda m: chr(int(m.group(1), 16)), s)


class Node:
    def __init__(self, parent, fn, path, symbol):
        self.parent, self.fn, self.path, self.symbol = parent, fn, path, symbol
        self.counters = {}   # name -> (ticks, value, peak)
        self.leaks = []      # (addr, size)
        self.children = []

    def stack(self):
        n, out = self, []
        while n and n.fn is not None:
            out.append(n.symbol)
            n = n.parent
        return out  # innermost first


class Dump:
    def __init__(self, path):
        opener = gzip.open if path.endswith('.gz') else open
        with opener(path, 'rt', encoding='utf-8', errors='surrogateescape') as f:
            lines = f.read().split('\n')
        if lines and lines[-1] == '':
            lines.pop()
        m = HEADER.match(lines[0]) if lines else None
        if not m:
            raise ValueError(f'{path}: bad header {lines[:1]!r}')
        self.pid, self.program, self.period = int(m.group(1), 16), unescape(m.group(2)), float(m.group(3))
        self.root = Node(None, None, '', '<root>')
        self.nodes = []
        files, fns, counters = {}, {}, {}
        stack = [self.root]
        for lineno, line in enumerate(lines[1:], 2):
            m = re.match(r'C([0-9a-f]+) ', line)
            if not m:
                raise ValueError(f'{path}:{lineno}: not a stack line: {line!r}')
            depth = int(m.group(1), 16)
            if depth < 1 or depth > len(stack):
                raise ValueError(f'{path}:{lineno}: depth jump to {depth}')
            rest = line[m.end():]
            f = FN.match(rest)
            if not f:
                raise ValueError(f'{path}:{lineno}: bad FN in {rest!r}')
            fid = int(f.group(1), 16)
            if f.group(2) is not None:
                if fid in fns:
                    raise ValueError(f'{path}:{lineno}: FN{fid:x} defined twice')
                fileid = int(f.group(2), 16)
                if f.group(3) is not None:
                    if fileid in files:
                        raise ValueError(f'{path}:{lineno}: F{fileid:x} defined twice')
                    files[fileid] = unescape(f.group(3))
                elif fileid not in files:
                    raise ValueError(f'{path}:{lineno}: F{fileid:x} used before definition')
                fns[fid] = (files[fileid], unescape(f.group(5)))
            elif fid not in fns:
                raise ValueError(f'{path}:{lineno}: FN{fid:x} used before definition')
            del stack[depth:]
            node = Node(stack[-1], fid, *fns[fid])
            stack[-1].children.append(node)
            stack.append(node)
            self.nodes.append(node)
            rest = rest[f.end():]
            while rest:
                c = CTR.match(rest)
                if not c:
                    raise ValueError(f'{path}:{lineno}: bad counter text {rest!r}')
                cid = int(c.group(1), 16)
                if c.group(2):
                    counters[cid] = c.group(2)
                elif cid not in counters:
                    raise ValueError(f'{path}:{lineno}: V{cid:x} used before definition')
                node.counters[counters[cid]] = tuple(int(c.group(i), 16) for i in (3, 4, 5))
                node.leaks += [(int(a, 16), int(s, 16)) for a, s in LEAK.findall(c.group(6))]
                rest = rest[c.end():]
        self.counter_names = set(counters.values())

    def by_leaf(self, counter):
        """{leaf symbol: [ticks, value, peak, leaks]} summed over call paths
        (MAX counters: max of values)."""
        out = {}
        for n in self.nodes:
            if counter not in n.counters:
                continue
            t, v, p = n.counters[counter]
            e = out.setdefault(n.symbol, [0, 0, 0, 0])
            e[0] += t
            e[1] = max(e[1], v) if counter.endswith('_MAX') else e[1] + v
            e[2] = max(e[2], p)
            if counter == 'MEM_LIVE':
                e[3] += len(n.leaks)
        return out
