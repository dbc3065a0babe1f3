#!/usr/bin/env python3
"""Write a synthetic igprof dump (HEX format, as our runtime writes it) with
BRANCH**LEVELS distinct leaf stacks: a fixed 3-frame prefix, then LEVELS
levels where each node has BRANCH children and every node is a chain of CHAIN
frames. Function names come from a pool of NFUNCS symbols in 40 libraries.
MODE "callgraph" (default): each function calls a fixed set of BRANCH callees,
as in a real program, so there are about NFUNCS*BRANCH distinct call edges.
MODE "random": every frame is a random function, so nearly every edge of the
tree is a distinct caller/callee pair (a worst case for the call-graph report).
Deterministic. Usage: gen_dump.py OUT [BRANCH LEVELS CHAIN NFUNCS [MODE]]"""
import sys

out = open(sys.argv[1], "w", buffering=1 << 20)
args = sys.argv[2:] or ["10", "6", "3", "20000"]
branch, levels, chain, nfuncs = (int(a) for a in args[:4])
mode = args[4] if len(args) > 4 else "callgraph"
out.write("P=(HEX ID=1 N=(bench) T=0.010000)\n")
defined_fn, defined_file, seed = {}, {}, [12345]

def rnd():
    seed[0] = (seed[0] * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
    return seed[0] >> 33

def fn(f):
    # ids are handed out in order of first use, as the runtime (and IgProf) do
    if f in defined_fn:
        return "FN%x+%x" % (defined_fn[f], rnd() & 0xff)
    fid = defined_fn[f] = len(defined_fn)
    lib = f % 40
    if lib in defined_file:
        fdef = "F%x" % defined_file[lib]
    else:
        defined_file[lib] = len(defined_file)
        fdef = "F%x=(/usr/lib/bench/lib%d.so)" % (defined_file[lib], lib)
    return "FN%x=(%s+%x N=(_ZN5bench4funcEi%d))+%x" % (fid, fdef, f * 64, f, rnd() & 0xff)

counters_defined = [False]
def leaf_counters():
    v = (rnd() % 4096) + 1
    if counters_defined[0]:
        return " V0:(1,%x,%x) V1:(1,%x,%x)" % (v, v, v // 2, v // 2)
    counters_defined[0] = True
    return " V0=(MEM_TOTAL):(1,%x,%x) V1=(MEM_LIVE):(1,%x,%x)" % (v, v, v // 2, v // 2)

for d, f in enumerate((0, 1, 2), 1):
    out.write("C%x %s\n" % (d, fn(f)))

def callee(parent, i):
    # distinct callees for distinct i under one parent, so every leaf stack stays distinct
    if mode == "random":
        return 3 + rnd() % nfuncs
    return 3 + (parent * 7919 + i * 104729) % nfuncs

def walk(level, depth, parent):
    for i in range(branch):
        f = parent
        for c in range(chain):
            f = callee(f, i if c == 0 else 0)
            tail = leaf_counters() if level == levels - 1 and c == chain - 1 else ""
            out.write("C%x %s%s\n" % (depth + c + 1, fn(f), tail))
        if level + 1 < levels:
            walk(level + 1, depth + chain, f)

walk(0, 3, 2)
out.close()
