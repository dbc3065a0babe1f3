#!/usr/bin/env python3
"""End-to-end tests of `igprof -mp`: run test programs with known
allocations under the launcher, read the dumps with igdump.py and compare
every counter per function with figures worked out from the programs' code.

Usage: e2e.py --bin BUILD/bin --progs DIR SCENARIO
"""
import argparse
import glob
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import igdump  # noqa: E402
import target  # noqa: E402

PAGE = os.sysconf('SC_PAGE_SIZE')
from checks import check, eq, failures, status, run_scenario, scenarios  # noqa: E402,F401


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def dumps(pattern='igprof.*'):
    return sorted(f for f in glob.glob(pattern) if '.igprof-tmp.' not in f)


def one_dump(pattern):
    found = dumps(pattern)
    eq(len(found), 1, f'number of dumps matching {pattern}')
    return igdump.Dump(found[0]) if found else None


def expect_leaves(dump, expected, counter):
    """expected: {symbol: (ticks, value[, peak])} for counter, by leaf frame."""
    got = dump.by_leaf(counter)
    for sym, want in expected.items():
        have = got.get(sym)
        if have is None:
            check(want[0] == 0 and want[1] == 0, f'{counter} {sym}: missing, expected {want}')
            continue
        eq(tuple(have[:len(want)]), tuple(want), f'{counter} {sym}')


def expect_mem(dump, table):
    """table: {symbol: (calls, bytes, max, live_blocks, live_bytes)}"""
    expect_leaves(dump, {s: (t[0], t[1]) for s, t in table.items()}, 'MEM_TOTAL')
    expect_leaves(dump, {s: (t[0], t[2]) for s, t in table.items() if t[0]}, 'MEM_MAX')
    live = dump.by_leaf('MEM_LIVE')
    for sym, t in table.items():
        have = live.get(sym, [0, 0, 0, 0])
        eq((have[0], have[1]), (t[3], t[4]), f'MEM_LIVE {sym}')
        eq(have[3], t[3], f'MEM_LIVE {sym} number of ;LK entries')


def leaf_stack(dump, sym):
    for n in dump.nodes:
        if n.symbol == sym and n.counters:
            return n.stack()
    return []


# ---------------------------------------------------------------------------
# Scenarios

# memtest basic: each function's (calls, bytes, largest, live blocks, live
# bytes) but do_malloc's, which has malloc(0) calls too.
BASIC_MEM = {
    'do_calloc': (1, 300, 300, 1, 300),
    'do_memalign': (1, 1000, 1000, 0, 0),
    'do_aligned_alloc': (1, 256, 256, 1, 256),
    'do_posix_memalign': (1, 700, 700, 0, 0),
    'do_valloc': (1, 5000, 5000, 1, 5000),
    'do_pvalloc': (1, PAGE, PAGE, 1, PAGE),
    'do_reallocarray': (1, 77, 77, 1, 77),
    'do_realloc': (10, sum(range(10, 101, 10)), 100, 1, 100),
}


def scenario_basic(a):
    r = run([a.igprof, '-mp', a.memtest, 'basic'])
    eq(r.returncode, 0, 'exit status')
    d = one_dump('igprof.memtest.*')
    expect_mem(d, {'do_malloc': (6, 100 + 5 * 33, 100, 5, 5 * 33), **BASIC_MEM})
    eq(leaf_stack(d, 'do_calloc')[:4], ['do_calloc', 'every_function', 'basic', 'main'], 'stack of do_calloc')
    eq(leaf_stack(d, 'do_realloc')[:4], ['do_realloc', 'realloc_chain', 'basic', 'main'], 'stack of do_realloc')
    # MEM_LIVE peak of the realloc chain is its largest block (each step frees the last)
    peaks = [n.counters['MEM_LIVE'][2] for n in d.nodes if n.symbol == 'do_realloc' and 'MEM_LIVE' in n.counters]
    eq(peaks, [100], 'MEM_LIVE peak of do_realloc')
    # leak addresses are distinct and sizes match
    leaks = [lk for n in d.nodes if n.symbol == 'do_malloc' for lk in n.leaks]
    eq(sorted(s for _, s in leaks), [33] * 5, 'do_malloc leak sizes')
    eq(len({addr for addr, _ in leaks}), 5, 'distinct leak addresses')
    eq(d.program.endswith('memtest'), True, 'program name in header')
    eq(d.period, 0.0, 'T= for a memory profile')
    # -d accounts for the fast walker's work on the (only) thread: one walk
    # per recorded allocation, and every frame of every stack either stepped
    # by a recipe or by libunwind, after the first.
    for f in dumps():
        os.unlink(f)
    r = run([a.igprof, '-mp', '-d', a.memtest, 'basic'])
    d = one_dump('igprof.memtest.*')
    m = re.search(r'fast walker, this thread: (\d+) walks, (\d+) frames stepped, (\d+) by libunwind', r.stderr)
    check(m is not None, f'-d reports the walker: {r.stderr[-300:]!r}')
    if m:
        walks, stepped, unwinder = map(int, m.groups())
        calls = [(n.counters['MEM_TOTAL'][0], len(n.stack())) for n in d.nodes if 'MEM_TOTAL' in n.counters]
        eq(walks, sum(c for c, _ in calls), 'walks = allocations recorded')
        eq(walks + stepped + unwinder, sum(c * depth for c, depth in calls), 'frames walked = frames recorded')


WORD = 8  # the target's word size (main() sets it from the launcher)
ALIGN = 16  # glibc malloc's chunk alignment there (main(): 8 on ARM32)


def glibc_usable(n):
    # glibc malloc: chunk = request + one word of header (8 bytes on 64-bit
    # targets, 4 on i386 and ARM32), aligned, at least 4 words
    return max(4 * WORD, (n + WORD + ALIGN - 1) & ~(ALIGN - 1)) - WORD


def scenario_unwind(a):
    # both stack walkers give the same profile, frame for frame
    stacks = {}
    for method in ('libunwind', 'fast'):
        for prog in ([a.memtest, 'basic'], [a.memtest, 'threads'], [a.cxxtest]):
            r = run([a.igprof, '-mp', '--unwind', method, '-o', f'{method}.%p'] + prog)
            eq(r.returncode, 0, f'{method} {prog[-1]}: exit status')
            check('not built in' not in r.stderr, f'{method}: walker available')
        for f in dumps(f'{method}.*'):
            d = igdump.Dump(f)
            for n in d.nodes:
                if n.counters:
                    # unresolved frames are named by absolute address: differs with ASLR
                    frames = tuple('@?' if f.startswith('@?0x') else f for f in n.stack())
                    key = (os.path.basename(d.program), frames)
                    t = n.counters.get('MEM_TOTAL', (0, 0, 0))
                    prev = stacks.setdefault(method, {}).get(key, (0, 0))
                    stacks[method][key] = (prev[0] + t[0], prev[1] + t[1])
    lu, fast = stacks.get('libunwind', {}), stacks.get('fast', {})
    # ARM32: past a frame without unwind entries (EXIDX_CANTUNWIND: glibc's
    # start_thread), where libunwind's walk ends, the fast walker goes on by
    # reading prologues; its stacks are compared up to libunwind's end (the
    # longest of libunwind's stacks each begins with), counts summed there.
    if a.target.machine == target.EM_ARM:
        cut = {}
        for (prog, frames), v in fast.items():
            k = next(((prog, frames[:n]) for n in range(len(frames), 0, -1)
                      if (prog, frames[:n]) in lu), (prog, frames))
            prev = cut.get(k, (0, 0))
            cut[k] = (prev[0] + v[0], prev[1] + v[1])
        fast = cut
    mine = lambda m: {k: v for k, v in m.items() if any(s.startswith(('do_', 'thread_', '_Z')) for s in k[1])}
    eq(len(mine(lu)) > 10, True, 'stacks compared')
    eq(mine(fast), mine(lu), 'identical stacks and counts with --unwind fast and libunwind')


def scenario_overhead(a):
    for mode in ('include', 'delta'):
        r = run([a.igprof, '-mp', '-mo', mode, '-o', mode, a.memtest, 'basic'])
        eq(r.returncode, 0, f'-mo {mode}: exit status')
        d = igdump.Dump(mode)
        size = glibc_usable if mode == 'include' else (lambda n: glibc_usable(n) - n)
        # -mo delta records no call that adds nothing: on i386 calloc(300) has no
        # overhead (a 304-byte chunk), on ARM32 malloc(100) and calloc(300) neither
        calls = (lambda *ns: len(ns)) if mode == 'include' else (lambda *ns: sum(1 for n in ns if size(n)))
        want = {'do_malloc': (calls(100, *[33] * 5), size(100) + 5 * size(33)), 'do_calloc': (calls(300), size(300))}
        expect_leaves(d, want, 'MEM_TOTAL')
        expect_leaves(d, {'do_malloc': (5, 5 * size(33))}, 'MEM_LIVE')


def scenario_threads(a):
    r = run([a.igprof, '-mp', a.memtest, 'threads'])
    eq(r.returncode, 0, 'exit status')
    d = one_dump('igprof.memtest.*')
    sizes = [64 + t for t in range(4)]
    expect_mem(d, {'thread_alloc': (4000, 1000 * sum(sizes), 67, 400, 100 * sum(sizes))})
    eq(leaf_stack(d, 'thread_alloc')[:2], ['thread_alloc', 'thread_main'], 'thread stack')


def parent_and_child(a, scenario, *options):
    """Run a memtest scenario that forks once (it prints 'child PID') and return
    (parent dump, child dump, child pid); the dumps are None where missing."""
    r = run([a.igprof, '-mp', *options, a.memtest, scenario])
    eq(r.returncode, 0, 'exit status')
    child = int(r.stdout.split()[1])
    files = dumps('igprof.memtest.*')
    eq(len(files), 2, 'one dump per process')
    by_pid = {igdump.Dump(f).pid: igdump.Dump(f) for f in files}
    check(child in by_pid, f'child {child} has a dump')
    parent = [d for pid, d in by_pid.items() if pid != child]
    return (parent[0] if parent else None), by_pid.get(child), child


def scenario_phases(a):
    # One thread, then three, then a forked child with one: exact counts in each mode.
    parent, child, _ = parent_and_child(a, 'phases')
    if parent and child:
        expect_mem(parent, {'main_alloc': (500, 50000, 100, 0, 0),
                            'phase_alloc': (40000, 2000000, 50, 40000, 2000000),
                            'fork_child_alloc': (0, 0, 0, 0, 0)})
        # The child's profile starts from zero; frees of inherited blocks are ignored.
        expect_mem(child, {'fork_child_alloc': (10, 300, 30, 10, 300),
                           'main_alloc': (0, 0, 0, 0, 0), 'phase_alloc': (0, 0, 0, 0, 0)})


def scenario_fork(a):
    parent, child, pid = parent_and_child(a, 'fork')
    if parent and child:
        expect_mem(parent, {'parent_alloc': (5, 4000, 1000, 5, 4000), 'child_alloc': (0, 0, 0, 0, 0)})
        expect_mem(child, {'child_alloc': (4, 1000, 250, 4, 1000), 'parent_alloc': (0, 0, 0, 0, 0)})
        eq(os.path.exists(f'igprof.memtest.{pid}'), True, 'child dump named by its pid')


def scenario_fork_stress(a):
    r = run([a.igprof, '-mp', a.memtest, 'fork-stress'])
    eq((r.returncode, r.stdout, r.stderr), (0, 'children with a wrong status: 0\n', ''), 'fork while threads allocate')
    files = dumps('igprof.memtest.*')
    eq(len(files), 21, 'the parent and 20 children each wrote a dump')
    children = [d for d in map(igdump.Dump, files) if d.by_leaf('MEM_TOTAL').get('child_alloc')]
    eq(len(children), 20, 'child dumps')
    for d in children:
        expect_mem(d, {'child_alloc': (10, 1000, 100, 10, 1000)})


def scenario_dump_memory(a):
    """The final dump's working memory (what it adds to the process's peak,
    its pages resident at its end, which -d reports) grows by tens of bytes a
    node, not by a hundred: memtest wide 16 builds a tree of 3 x 2^16 nodes
    and more, every other block still live at the dump."""
    k = 16
    r = run([a.igprof, '-mp', '-d', '-o', 'wide.ig', a.memtest, 'wide', str(k)])
    eq((r.returncode, r.stdout), (0, f'stacks {1 << k}\n'), 'status and output')
    m = re.search(r'dump written: \S*/wide\.ig \(exit; (\d+) nodes, (\d+) live blocks, \d+ us, '
                  r'(-?\d+) KB of working memory\)', r.stderr)
    check(m is not None, f'-d reports the dump and its working memory: {r.stderr[-400:]!r}')
    if not m:
        return
    nodes, live, kb = int(m.group(1)), int(m.group(2)), int(m.group(3))
    lines = sum(1 for line in open('wide.ig') if line.startswith('C'))
    eq(nodes, lines, 'nodes reported: the lines of the dump')
    check(nodes >= 3 * (1 << k) - 1, f'a tree of at least 3 x 2^{k} - 1 nodes: {nodes}')
    eq(live, (1 << (k - 1)) + 1, 'live blocks at the dump: every other one, and stdout\'s buffer')
    # 8 bytes a node, 24 (12 on 32-bit machines) a node with counters (2^16
    # here) and a live block; the output buffer, call-site table and symbol
    # tables besides: at most 32 bytes a node and 1 MiB.
    check(0 <= kb * 1024 <= 32 * nodes + (1 << 20),
          f'working memory {kb} KB for {nodes} nodes: at most 32 bytes a node and 1 MiB')
    # The live table: 12 bytes an entry, a small shard at least two fifths
    # full (it doubles past four fifths), 256 shards of at least 64 entries.
    m = re.search(r'live table: (\d+) blocks in (\d+) KB', r.stderr)
    check(m is not None, f'-d reports the live table: {r.stderr[-400:]!r}')
    if m:
        eq(int(m.group(1)), live, 'live table: its blocks')
        check(int(m.group(2)) * 1024 <= 12 * (256 * 64 + 5 * (live + 256) // 2),
              f'live table of {m.group(2)} KB for {live} blocks: 12 bytes an entry, at least two fifths full')


def scenario_exec(a):
    r = run([a.igprof, '-mp', a.memtest, 'exec'])
    eq(r.returncode, 0, 'exit status')
    files = dumps('igprof.memtest.*')
    eq(len(files), 2, 'one dump per image (exec keeps the pid)')
    if len(files) == 2:
        first, second = igdump.Dump(files[0]), igdump.Dump(files[1])
        eq(first.pid, second.pid, 'same pid')
        expect_mem(first, {'before_exec_alloc': (1, 4321, 4321, 1, 4321), 'do_calloc': (0, 0, 0, 0, 0)})
        expect_mem(second, {'before_exec_alloc': (0, 0, 0, 0, 0), 'do_calloc': (1, 300, 300, 1, 300)})


def scenario_execvp(a):
    # execvp tries each PATH entry: failed attempts must not cost dumps
    r = run([a.igprof, '-mp', a.memtest, 'execvp', os.path.dirname(a.memtest)])
    eq(r.returncode, 0, 'exit status')
    files = dumps('igprof.memtest.*')
    eq([os.path.basename(f).split('.')[-1].split('-')[1:] for f in files], [[], ['2']],
       f'one dump before exec, one after, distinct names: {files}')
    if len(files) == 2:
        expect_mem(igdump.Dump(files[0]), {'before_exec_alloc': (1, 10, 10, 1, 10)})


def scenario_exit(a):
    r = run([a.igprof, '-mp', a.memtest, '_exit'])
    eq(r.returncode, 3, 'exit status of _exit(3)')
    d = one_dump('igprof.memtest.*')
    expect_mem(d, {'exit_alloc': (2, 1554, 777, 2, 1554)})


def scenario_abort(a):
    r = run([a.igprof, '-mp', a.memtest, 'abort'])
    eq(r.returncode, -signal.SIGABRT, 'death by abort() kept (igprof execs the program)')
    d = one_dump('igprof.memtest.*')
    expect_mem(d, {'exit_alloc': (1, 999, 999, 1, 999)})
    native = run([a.memtest, 'abort'])
    eq(native.returncode, -signal.SIGABRT, 'native abort dies by SIGABRT')


def scenario_segv(a):
    # the profiled program itself must die by SIGSEGV: run it without the launcher
    env = dict(os.environ, LD_PRELOAD=a.lib, IGPROF='mem')
    r = run([a.memtest, 'segv'], env=env)
    eq(r.returncode, -signal.SIGSEGV, 'death by SIGSEGV is kept')
    d = one_dump('igprof.memtest.*')
    expect_mem(d, {'exit_alloc': (1, 555, 555, 1, 555)})
    r = run([a.igprof, '-mp', a.memtest, 'segv-handler'])
    eq((r.returncode, r.stdout), (7, 'handler ran\n'), 'application SIGSEGV handler runs')


def scenario_signals(a):
    # terminated by SIGTERM (default action): dump first, then the same death
    p = subprocess.Popen([a.memtest, 'wait', 'ready'], env=dict(os.environ, LD_PRELOAD=a.lib, IGPROF='mem'))
    for _ in range(500):
        if os.path.exists('ready'):
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    eq(p.wait(timeout=60), -signal.SIGTERM, 'death by SIGTERM kept')
    d = one_dump('igprof.memtest.*')
    if d:
        expect_mem(d, {'exit_alloc': (2, 8192, 4096, 2, 8192)})
    for f in glob.glob('*'):
        os.unlink(f)
    # SIGPIPE in a pipeline: `yes` dies of it and still leaves its dump
    r = run([a.igprof, '-mp', 'sh', '-c', 'yes | head -2'])
    eq((r.returncode, r.stdout), (0, 'y\ny\n'), 'pipeline output')
    progs = sorted(igdump.Dump(f).program for f in dumps('igprof.*'))
    # The dump names the program by its argv[0]: what the shell gave, or
    # under qemu-user started by binfmt_misc without its P flag the path the
    # shell found.
    names = [a.target.program(p) if a.target.emulated else p for p in ('yes', 'head')]
    check(all(n in progs for n in names), f'dumps of yes and head: {progs}')


def scenario_dlopen(a):
    lib = os.path.join(os.path.abspath(a.progs), 'libownalloc.so')
    r = run([a.igprof, '-mp', '-d', a.memtest, 'dlopen', lib])
    eq((r.returncode, r.stdout), (0, 'own_alloc_test 1\n'), 'program output')
    check('allocator of' in r.stderr and 'hooked in slot 1' in r.stderr, f'-d reports the new allocator: {r.stderr[-400:]!r}')
    d = one_dump('igprof.memtest.*')
    if d:
        expect_mem(d, {'own_alloc': (10, 480, 48, 6, 288), 'exit_alloc': (1, 64, 64, 1, 64)})
        eq(leaf_stack(d, 'own_alloc')[:3], ['own_alloc', 'own_alloc_test', 'dlopen_own'], 'stack through the library')


def scenario_signal_view(a):
    native = run([a.memtest, 'signal-view'])
    eq(native.stdout.count('yes'), 3, 'native run sees its own dispositions')
    for opts in (['-mp'], ['-mp', '-S', 'USR1']):
        prof = run([a.igprof] + opts + [a.memtest, 'signal-view'])
        eq((prof.returncode, prof.stdout), (native.returncode, native.stdout), f'{opts}: same signal behaviour')
    # with -S USR1 the two raise(SIGUSR1) also gave checkpoint dumps; requests
    # that arrive while one is pending are served by one dump
    files = dumps('igprof.memtest.*')
    checkpoints = [f for f in files if f.endswith(('.1', '.2'))]
    check(len(files) - len(checkpoints) == 2 and 1 <= len(checkpoints) <= 2,
          f'two final dumps and one or two checkpoints: {files}')


def scenario_contract(a):
    native = run([a.memtest, 'contract'])
    prof = run([a.igprof, '-mp', a.memtest, 'contract'])
    eq((prof.returncode, prof.stdout), (native.returncode, native.stdout), 'libc contract under the profiler')
    check('ENOMEM' not in prof.stdout and 'errno=12' in prof.stdout, 'overflow reports ENOMEM (12)')
    # contract's own blocks: malloc(8) kept by the failed reallocarray and
    # freed by realloc(p, 0), malloc(0) and malloc(16) freed, and two leaked
    # where the target hands them out: aligned_alloc(3, 16)'s, and the
    # malloc of SIZE_MAX / 2 bytes, which only a 32-bit target can give
    # (2^31 - 1 bytes; i386 processes get 4 GiB of address space).
    d = one_dump('igprof.memtest.*')
    if d:
        aligned = int('aligned_alloc(3): ptr' in native.stdout)
        big = 2**31 - 1 if 'malloc huge: ptr' in native.stdout else 0
        blocks = 3 + aligned + (big > 0)
        expect_mem(d, {'contract': (blocks, 24 + 16 * aligned + big, max(16, big), blocks - 3, 16 * aligned + big)})


def scenario_checkpoints(a):
    # igprof_dump_now from the application
    r = run([a.igprof, '-mp', a.memtest, 'dump-now'])
    eq((r.returncode, r.stdout), (0, 'dump_now found\n'), 'igprof_dump_now is exported')
    ck = one_dump('checkpoint.*')
    fin = one_dump('igprof.memtest.*')
    if ck and fin:
        expect_mem(ck, {'exit_alloc': (1, 111, 111, 1, 111)})
        expect_mem(fin, {'exit_alloc': (2, 333, 222, 2, 333)})
    for f in glob.glob('*'):
        os.unlink(f)
    # -D flag file, then -S signal: each gives a distinct checkpoint dump
    for opt in (['-D', 'flag'], ['-D', 'flag.%p'], ['-S', 'USR1']):
        p = subprocess.Popen([a.igprof, '-mp'] + opt + [a.memtest, 'wait', 'ready'])
        for _ in range(500):
            if os.path.exists('ready') and open('ready').read().endswith('\n'):
                break
            time.sleep(0.01)
        pid = int(open('ready').read())
        for i in range(2):
            if opt[0] == '-D':
                flag = opt[1].replace('%p', str(pid))
                open(flag, 'w').close()
                for _ in range(200):
                    if not os.path.exists(flag):
                        break
                    time.sleep(0.01)
                check(not os.path.exists(flag), f'flag file {flag} deleted')
            else:
                os.kill(p.pid, signal.SIGUSR1)  # the launcher passes it on
            for _ in range(200):
                if len(dumps('igprof.memtest.*')) == i + 1:
                    break
                time.sleep(0.01)
        eq(p.wait(timeout=60), 0, f'{opt[0]}: program unaffected')
        files = dumps('igprof.memtest.*')
        eq(len(files), 3, f'{opt[0]}: two checkpoints and the final dump: {files}')
        for f in files:
            expect_mem(igdump.Dump(f), {'exit_alloc': (2, 8192, 4096, 2, 8192)})
        for f in glob.glob('*'):
            os.unlink(f)


def scenario_outputs(a):
    # -z: gzip stream, default name ends in .gz
    r = run([a.igprof, '-mp', '-z', a.memtest, 'basic'])
    eq(r.returncode, 0, 'exit status')
    d = one_dump('igprof.memtest.*.gz')
    if d:
        expect_mem(d, {'do_calloc': (1, 300, 300, 1, 300)})
    # -o with %p
    r = run([a.igprof, '-mp', '-o', 'out.%p', a.memtest, 'basic'])
    d = one_dump('out.[0-9]*')
    if d:
        eq(os.path.basename(dumps('out.[0-9]*')[0]), f'out.{d.pid}', '%p expands to the pid')
    # -o |command: the dump arrives on the command's stdin; the environment of
    # the command has no profiler in it
    r = run([a.igprof, '-mp', '-o', '|cat > piped.txt; echo "$IGPROF" > env.txt', a.memtest, 'basic'])
    eq(r.returncode, 0, 'exit status with a pipe output')
    d = igdump.Dump('piped.txt')
    expect_mem(d, {'do_calloc': (1, 300, 300, 1, 300)})
    eq(open('env.txt').read(), '\n', 'IGPROF not passed to the output command')
    # -o FILE without %p: an old file is replaced, never appended to
    open('fixed.out', 'w').write('stale')
    run([a.igprof, '-mp', '-o', 'fixed.out', a.memtest, 'basic'])
    expect_mem(igdump.Dump('fixed.out'), {'do_calloc': (1, 300, 300, 1, 300)})
    # an -o directory that does not exist: refused before the program runs
    r = run([a.igprof, '-mp', '-o', '/nonexistent-dir/prof.%p', a.memtest, 'exit', '5'])
    eq((r.returncode, r.stdout, r.stderr),
       (125, '', 'igprof: -o /nonexistent-dir/prof.%p: cannot write in /nonexistent-dir: No such file or directory\n'),
       'unwritable -o refused up front')
    # -t: processes whose name does not match are not profiled
    before = set(dumps('igprof.*'))
    r = run([a.igprof, '-mp', '-t', 'no-such-name', a.memtest, 'basic'])
    eq((r.returncode, set(dumps('igprof.*')) - before), (0, set()), '-t filters processes')
    # --depth: deeper stacks are cut and marked
    r = run([a.igprof, '-mp', '--depth', '3', '-o', 'shallow', a.memtest, 'basic'])
    d = igdump.Dump('shallow')
    deepest = max(len(n.stack()) for n in d.nodes)
    eq(deepest, 4, 'depth 3 plus the truncation marker')
    check(any(n.symbol == '@igprof_truncated_stack' for n in d.root.children), 'truncation marked at the root')


def scenario_launcher(a):
    r = run([a.igprof, '--help'])
    eq((r.returncode, r.stdout.startswith('Usage: igprof'), r.stderr), (0, True, ''), '--help on stdout, status 0')
    r = run([a.igprof, '-mx', 'true'])
    eq((r.returncode, r.stderr), (125, "igprof: unknown option '-mx' (see igprof --help)\n"), 'unknown option')
    r = run([a.igprof, '-mp', '-mo', 'lots', 'true'])
    eq((r.returncode, r.stderr), (125, 'igprof: -mo: bad argument, expected none, include or delta\n'), 'bad -mo')
    r = run([a.igprof, '-mp', '-S', 'KILL', 'true'])
    eq(r.returncode, 125, '-S KILL refused')
    r = run([a.igprof, '-mp', '-o'])
    eq(r.returncode, 125, 'missing argument')
    r = run([a.igprof, '-mp'])
    eq((r.returncode, r.stderr.splitlines()[0]), (125, 'igprof: no program to run'), 'no program: status 125')
    r = run([a.igprof, '-mp', '--', a.memtest, 'exit', '125'])
    eq((r.returncode, r.stderr), (125, ''), "the program's own 125: no igprof message")
    r = run([a.igprof, '-mp', 'no-such-command-xyz'])
    eq((r.returncode, r.stderr), (127, 'igprof: no-such-command-xyz: command not found\n'), 'command not found')
    r = run([a.igprof, '-mp', './no-such-file'])
    eq((r.returncode, r.stderr), (127, 'igprof: ./no-such-file: No such file or directory\n'), 'no such file')
    open('notexec', 'w').write('x')
    r = run([a.igprof, '-mp', './notexec'])
    eq((r.returncode, r.stderr), (126, 'igprof: ./notexec: Permission denied\n'), 'not executable')
    r = run([a.igprof, '-mp', a.memtest, 'exit', '42'])
    eq(r.returncode, 42, 'exit status passed through')
    r = run([a.igprof, '-mp', 'sh', '-c', 'kill -TERM $$'])
    eq(r.returncode, -signal.SIGTERM, 'death by a signal kept (igprof execs the program)')
    p = subprocess.Popen([a.igprof, '-mp', 'sh', '-c', 'echo $$'], stdout=subprocess.PIPE, text=True)
    eq(p.communicate(timeout=60)[0].strip(), str(p.pid), 'the program keeps the pid igprof was started with')
    r = run([a.igprof, '-mp', '--', 'sh', '-c', 'echo "$LD_PRELOAD|$IGPROF"'], env=dict(os.environ, LD_PRELOAD='/nonexistent/x.so'))
    pre, ig = r.stdout.strip().split('|')
    eq(pre.split(':')[0], '/nonexistent/x.so', 'existing LD_PRELOAD kept first')
    check(pre.endswith('/libigprof.so'), 'libigprof.so appended to LD_PRELOAD')
    eq(ig, 'mem', '$IGPROF for -mp')
    r = run([a.igprof, '-mp', '-o', "it's a file", 'sh', '-c', 'echo "$IGPROF"'])
    eq(r.stdout, "mem igprof:out='" + os.getcwd() + "/it\\'s a file'\n", 'quoted value in $IGPROF, made absolute')
    r = run(['sh', '-c', 'true'], env=dict(os.environ, LD_PRELOAD=a.lib, IGPROF='mem memory'))
    eq(r.returncode, 0, 'bad $IGPROF does not break the program')
    check("unknown module 'memory'" in r.stderr, f'bad $IGPROF is reported: {r.stderr!r}')


def scenario_cxx(a):
    r = run([a.igprof, '-mp', a.cxxtest])
    eq((r.returncode, r.stdout), (0, 'kept 4 widgets\n'), 'C++ program output')
    d = one_dump('igprof.cxxtest.*')
    if not d:
        return

    def caller_of(leaf, caller, window=1):
        t = [0, 0, 0, 0]
        for n in d.nodes:
            s = n.stack()
            if s[:1] == [leaf] and caller in s[1:1 + window]:
                tot, live = n.counters.get('MEM_TOTAL', (0, 0, 0)), n.counters.get('MEM_LIVE', (0, 0, 0))
                t = [t[0] + tot[0], t[1] + tot[1], t[2] + live[0], t[3] + live[1]]
        return t
    # operator new(size_t): _Znwm where size_t is unsigned long, _Znwj where it is unsigned int
    new = '_Znwm' if WORD == 8 else '_Znwj'
    eq(caller_of(new, '_Z12make_widgetsv'), [10, 480, 4, 192], 'operator new from make_widgets')
    # operator new[] tail-calls operator new on x86_64 (its frame is gone, the caller stays);
    # on i386 it calls it (its frame is between)
    eq(caller_of(new, '_Z10make_arrayv', 2), [1, 1000, 0, 0], 'operator new[] from make_array')
    eq(caller_of(new, '_Z11fill_vectorv', 8), [1, 4000, 0, 0], 'vector::reserve(1000)')
    # a map node: colour, three pointers, the pair of ints
    node = 4 * WORD + 8
    eq(caller_of(new, '_Z8fill_mapv', 12), [10, 10 * node, 0, 0], 'map nodes')
    eq(caller_of('__cxa_allocate_exception', '_Z7throweri')[0::2], [5, 0], 'five exceptions, all freed')


def scenario_sample(a):
    # examples/sample.c, the demo program: figures derived from its code
    r = run([a.igprof, '-mp', a.sample])
    eq((r.returncode, r.stdout), (0, '5001 distinct words\n'), 'sample output')
    d = one_dump('igprof.sample.*')
    words = [f'w{i}' for i in range(5000)] + ['common']
    copies = sum(len(w) + 1 for w in words)
    sizes = [4 * (2 * i if i else 1) for i in range(100000) if i & (i - 1) == 0]
    # glibc's strdup and __strdup are one function: the analyser names it by either
    # (x86_64's libc: strdup, i386's: __strdup)
    leaves = d.by_leaf('MEM_TOTAL')
    sd = '__strdup' if '__strdup' in leaves and 'strdup' not in leaves else 'strdup'
    expect_mem(d, {
        # struct entry: a pointer, an int, a pointer
        'add_word': (5001, 5001 * 3 * WORD, 3 * WORD, 5001, 5001 * 3 * WORD),
        sd: (5001, copies, max(len(w) + 1 for w in words), 5001, copies),
        'read_text': (5000, 5000 * 256, 256, 0, 0),
        'grow_array': (len(sizes), sum(sizes), max(sizes), 0, 0),
    })
    eq(leaf_stack(d, sd)[:4], [sd, 'add_word', 'read_text', 'main'], 'strdup stack')


# progs/sampled.c: (function, calls, bytes, largest, live blocks, live bytes)
SAMPLED_PROG = {
    'keep_small': (100000, 100000 * 64, 64, 100000, 100000 * 64),
    'temp_path': (100000, 100000 * 128, 128, 0, 0),
    'keep_mid': (20000, 20000 * 1000, 1000, 20000, 20000 * 1000),
    'resize_path': (80000, 40000 * (100 + 200), 200, 40000, 40000 * 200),
    'big_path': (200, 200 * 100000, 100000, 200, 200 * 100000),
}
SAMPLED_CALLS = {'keep_small': [(100000, 64)], 'temp_path': [(100000, 128)], 'keep_mid': [(20000, 1000)],
                 'resize_path': [(40000, 100), (40000, 200)], 'big_path': [(200, 100000)]}
SAMPLE_T = 1024


def scenario_sampled(a):
    """--sample T: Poisson sampling by bytes, each sampled allocation weighted
    by 1/p(s), p(s) = 1 - exp(-s/T). For n allocations of s bytes the
    estimate of their bytes has relative standard error sqrt((1-p)/(n p)):
    at T = 1024 that is 1.25% for keep_small (64 B, p = 0.061), 0.87% for
    temp_path, 0.55% for keep_mid, 0.9% for resize_path's 100 + 200 B and
    1.1% for its live 200 B blocks; big_path's 100000 B blocks are sampled
    with p = 1 - exp(-97.7), weight exactly 1. The ±5% bound is then at
    least 4 standard errors (a chance below 1e-4 per figure to fail with
    any seed); the counts (ticks) have the same errors plus the rounding of
    each weight to whole blocks (variance below 1/4 per sample: nothing
    next to these). With a fixed seed the run is reproducible."""
    import math
    prog = os.path.join(os.path.abspath(a.progs), 'sampled')
    # The exact run: every figure as the program's code gives it.
    r = run([a.igprof, '-mp', '-o', 'exact.dump', prog, 'keep'])
    eq((r.returncode, r.stdout), (0, '160200 blocks kept\n'), 'exact run')
    exact = igdump.Dump('exact.dump')
    expect_mem(exact, SAMPLED_PROG)

    def sampled(mode, seed, *extra):
        out = f'sampled-{mode}-{seed}.dump'
        r = run([a.igprof, '-mp', '--sample', str(SAMPLE_T), '--sample-seed', str(seed), *extra, '-o', out, prog, mode])
        eq(r.returncode, 0, f'sampled {mode} run, seed {seed}')
        return igdump.Dump(out), r

    def within(d, what, live):
        for counter in ('MEM_TOTAL', 'MEM_LIVE'):
            got = d.by_leaf(counter)
            for sym in SAMPLED_PROG:
                want = exact.by_leaf(counter).get(sym, [0, 0, 0])[:2]
                have = got.get(sym, [0, 0, 0])[:2]
                if counter == 'MEM_LIVE' and not live:
                    want = [0, 0]
                for i, unit in ((0, 'blocks'), (1, 'bytes')):
                    if sym == 'big_path' or want[i] == 0:
                        eq(have[i], want[i], f'{what}: {counter} {unit} of {sym} (exact)')
                    else:
                        check(abs(have[i] - want[i]) <= 0.05 * want[i],
                              f'{what}: {counter} {unit} of {sym}: {have[i]} within 5% of {want[i]}')
        # MEM_MAX: the largest allocation is a size, not an estimate
        mx = d.by_leaf('MEM_MAX')
        for sym, t in SAMPLED_PROG.items():
            eq(mx.get(sym, [0, 0])[1], t[2], f'{what}: MEM_MAX of {sym}')

    def marker(d):
        """The dump's @igprof_mem_sampling stack: (sampled, interval)."""
        nodes = [n for n in d.nodes if n.symbol == '@igprof_mem_sampling']
        eq(len(nodes), 1, 'one @igprof_mem_sampling stack')
        if not nodes:
            return 0, 0
        eq(nodes[0].parent.fn, None, '@igprof_mem_sampling is a depth-1 frame')
        return tuple(nodes[0].counters.get('MEM_SAMPLING', (0, 0, 0))[:2])

    d, r = sampled('keep', 7, '-d')
    within(d, 'keep, seed 7', live=True)
    samples, interval = marker(d)
    eq(interval, SAMPLE_T, 'the dump gives the mean interval')
    # The program's own allocations sampled: each call of s bytes with p(s).
    expected = sum(n * -math.expm1(-s / SAMPLE_T) for calls in SAMPLED_CALLS.values() for n, s in calls)
    sd = math.sqrt(sum(n * -math.expm1(-s / SAMPLE_T) * math.exp(-s / SAMPLE_T)
                       for calls in SAMPLED_CALLS.values() for n, s in calls))
    check(abs(samples - expected) < 6 * sd + 10,
          f'sampled allocations {samples}, expected {expected:.0f} ± {sd:.0f} (and a few of libc\'s)')
    # Only sampled allocations are walked: the walker's count is the dump's.
    m = re.search(r'fast walker, this thread: (\d+) walks', r.stderr)
    check(m is not None, f'-d reports the walker: {r.stderr[-300:]!r}')
    if m:
        eq(int(m.group(1)), samples, 'stack walks = sampled allocations')
    # Each sampled block's ;LK size is its estimate: they add up to MEM_LIVE.
    for n in d.nodes:
        if 'MEM_LIVE' in n.counters and n.symbol in SAMPLED_PROG:
            eq(sum(sz for _, sz in n.leaks), n.counters['MEM_LIVE'][1], f';LK sizes of {n.symbol} add up to MEM_LIVE')

    # A fixed seed makes the run reproducible; another seed samples others.
    again, _ = sampled('keep', 7)
    eq({k: v[:2] for k, v in again.by_leaf('MEM_TOTAL').items() if k in SAMPLED_PROG},
       {k: v[:2] for k, v in d.by_leaf('MEM_TOTAL').items() if k in SAMPLED_PROG}, 'same seed, same figures')
    other, _ = sampled('keep', 8)
    within(other, 'keep, seed 8', live=True)
    check(other.by_leaf('MEM_TOTAL')['keep_small'][:2] != d.by_leaf('MEM_TOTAL')['keep_small'][:2],
          'another seed samples other allocations')

    # Everything freed: the frees of sampled blocks are exact, MEM_LIVE is 0.
    d, r = sampled('free', 7, '--summary', 'always')
    within(d, 'free, seed 7', live=False)
    for n in d.nodes:
        if n.symbol in SAMPLED_PROG:
            eq(n.leaks, [], f'no live blocks left on {n.symbol}')
    check(re.search(r'heap figures estimated from \d+ allocations sampled, one per 1024 bytes on average', r.stderr)
          is not None, f'the summary says the run was sampled: {r.stderr!r}')

    # T = 1 byte: an allocation of s bytes is sampled with p = 1 - exp(-s),
    # weight 1 in doubles from 37 bytes (and 1.00005 for realloc_chain's
    # first 10: a chance of 1e-4 that it is missed or counted twice), so
    # every entry point of the malloc family, realloc's moves and the frees
    # give the exact figures.
    for f in dumps():
        os.unlink(f)
    r = run([a.igprof, '-mp', '--sample', '1', '--sample-seed', '1', a.memtest, 'basic'])
    eq(r.returncode, 0, '--sample 1 memtest basic')
    d = one_dump('igprof.memtest.*')
    if d:
        expect_mem(d, BASIC_MEM)

    # With threads (each its own countdown; frees across threads, the live
    # table's shards tested without their lock) and in a forked child: the
    # same exact figures at T = 1 (blocks of 30 bytes and more).
    for f in dumps():
        os.unlink(f)
    r = run([a.igprof, '-mp', '--sample', '1', a.memtest, 'threads'])
    eq(r.returncode, 0, '--sample 1 memtest threads')
    d = one_dump('igprof.memtest.*')
    sizes = [64 + t for t in range(4)]
    if d:
        expect_mem(d, {'thread_alloc': (4000, 1000 * sum(sizes), 67, 400, 100 * sum(sizes))})
    for f in dumps():
        os.unlink(f)
    parent, child, _ = parent_and_child(a, 'phases', '--sample', '1')
    if parent and child:
        expect_mem(parent, {'main_alloc': (500, 50000, 100, 0, 0),
                            'phase_alloc': (40000, 2000000, 50, 40000, 2000000),
                            'fork_child_alloc': (0, 0, 0, 0, 0)})
        expect_mem(child, {'fork_child_alloc': (10, 300, 30, 10, 300),
                           'main_alloc': (0, 0, 0, 0, 0), 'phase_alloc': (0, 0, 0, 0, 0)})
    for f in dumps():
        os.unlink(f)

    # igprof-analyse says the figures are estimates, and from what.
    an = os.path.join(os.path.abspath(a.bin), 'igprof-analyse')
    r = run([an, '-r', 'MEM_TOTAL', 'sampled-keep-7.dump'])
    eq(r.returncode, 0, 'igprof-analyse reads a sampled dump')
    eq(r.stdout.splitlines()[:2], ['Counter: MEM_TOTAL', f'Estimates, sampled: one allocation per {SAMPLE_T} bytes '
                                   f'on average, {samples} allocations sampled'], 'igprof-analyse says the profile is sampled')
    check('@igprof_mem_sampling' not in r.stdout, 'the marker is not a stack of the report')
    note = f'Estimates, sampled: one allocation per {SAMPLE_T} bytes on average, {samples} allocations sampled'
    r = run([an, '-r', 'MEM_LIVE', '--top', '3', 'sampled-keep-7.dump'])
    eq((r.returncode, r.stdout.splitlines()[:1]), (0, [f'# {note}']), 'igprof-analyse --top says the profile is sampled')
    r = run([an, '-r', 'MEM_TOTAL', '--json', 'sampled-keep-7.dump'])
    eq(r.returncode, 0, 'igprof-analyse --json of a sampled dump')
    eq(json.loads(r.stdout)['summary'].get('sampled'), {'interval': SAMPLE_T, 'allocations_sampled': samples, 'inputs': 1},
       'igprof-analyse --json says the profile is sampled')
    r = run([an, '-r', 'MEM_TOTAL', '--html', 'sampled-keep-7.dump'])
    check(r.returncode == 0 and f'<p id="sampling">{note}.</p>' in r.stdout, 'igprof-analyse --html says the profile is sampled')
    r = run([an, '-r', 'MEM_TOTAL', '--json', 'exact.dump'])
    eq((r.returncode, 'sampled' in json.loads(r.stdout or '{"summary": {}}')['summary']), (0, False),
       'an exact profile\'s JSON has no sampled member')

    # Bad values: refused before anything runs (status 125), as every option.
    for args, msg in ((['--sample', '0'], '--sample: bad argument, expected a size in bytes 1..1G, suffix k, M or G'),
                      (['--sample', '1x'], '--sample: bad argument, expected a size in bytes 1..1G, suffix k, M or G'),
                      (['--sample', '2G'], '--sample: bad argument, expected a size in bytes 1..1G, suffix k, M or G'),
                      (['--sample'], '--sample needs an argument (a size in bytes 1..1G, suffix k, M or G)'),
                      (['--sample', '1k', '--sample-seed', '-1'], '--sample-seed: bad argument, expected a number 0..2147483647'),
                      (['--sample', '1k', '--lifetimes', '5ms'], '--sample and --lifetimes do not combine (lifetimes need every block)')):
        for f in dumps():
            os.unlink(f)
        r = run([a.igprof, '-mp', *args, prog, 'keep'] if args != ['--sample'] else [a.igprof, '-mp', *args])
        eq((r.returncode, r.stdout, r.stderr), (125, '', f'igprof: {msg}\n'), f'igprof -mp {" ".join(args)}')
        eq(dumps(), [], f'igprof -mp {" ".join(args)}: nothing ran')
    # $IGPROF set by hand: the runtime refuses it too, the program runs unprofiled.
    for text, msg in (('mem mem:sample=0', "mem:sample must be a size in bytes 1..1G (suffix k, M or G), not '0'"),
                      ('mem mem:seed=x', "mem:seed must be a number 0..2147483647, not 'x'"),
                      ('mem mem:lifetimes=5ms mem:sample=1k', 'mem:sample and mem:lifetimes do not combine'),
                      ('mem mem:sample=1k mem:lifetimes=5ms', 'mem:sample and mem:lifetimes do not combine')):
        r = run([prog, 'keep'], env=dict(os.environ, LD_PRELOAD=a.lib, IGPROF=text))
        eq((r.returncode, r.stdout), (0, '160200 blocks kept\n'), f'{text}: the program runs')
        check(msg in r.stderr and 'profiling disabled' in r.stderr, f'{text}: refused: {r.stderr!r}')


def allocators(a, *names):
    """{name: library} of the allocators a scenario runs with; a missing one fails."""
    for name in names:
        check(name in a.allocator, f'{name} not found at build time: run scripts/deps.sh, then cmake again')
    return {n: a.allocator[n] for n in names if n in a.allocator}


def same_output(r, native, what):
    """The same exit status and stdout as the native run, line by line."""
    eq(r.returncode, native.returncode, f'{what}: exit status')
    got, want = r.stdout.splitlines(), native.stdout.splitlines()
    diff = [f'{g!r} instead of {w!r}' for g, w in zip(got, want) if g != w]
    check(not diff and len(got) == len(want),
          f'{what}: stdout differs from the native run ({len(got)} lines, {len(want)} expected): {diff[:3]}')


def scenario_errno(a):
    # Every malloc-family function's results and errno, on failure and on
    # success, exactly as without the profiler: with glibc's allocator and
    # with each other allocator preloaded, under -mp and under the tracer.
    prog = os.path.join(os.path.abspath(a.progs), 'allocerrno')
    native = run([prog])
    eq(native.returncode, 0, 'native run')
    check('posix_memalign(64,SIZE_MAX): rc=12 - errno=12\n' in native.stdout,
          f'glibc sets errno on this posix_memalign failure: {native.stdout!r}')
    for mode in (['-mp'], ['-mp', '-mo', 'include']):
        r = run([a.igprof] + mode + [prog])
        same_output(r, native, f'{mode}: results and errno')
    igtrace = os.path.join(os.path.dirname(a.igprof), 'igtrace')
    r = run([igtrace, '-tm', '-o', 'trace.%p', prog])
    same_output(r, native, 'igtrace -tm: results and errno')
    for name, lib in allocators(a, 'jemalloc', 'tcmalloc', 'tcmalloc_minimal', 'mimalloc').items():
        env = dict(os.environ, LD_PRELOAD=lib)
        native = run([prog], env=env)
        eq(native.returncode, 0, f'{name}: native run')
        r = run([a.igprof, '-mp', prog], env=env)
        same_output(r, native, f'{name}: results and errno under -mp')


# cxxalloc: (calls, bytes, max, live blocks, live bytes) by the function
# that called the operator (progs/cxxalloc.cpp).
CXXALLOC = {
    '_Z9alloc_newm': (4, 400, 100, 1, 100),
    '_Z15alloc_new_arraym': (4, 800, 200, 1, 200),
    '_Z17alloc_new_nothrowm': (2, 600, 300, 1, 300),
    '_Z23alloc_new_array_nothrowm': (2, 800, 400, 1, 400),
    '_Z17alloc_new_alignedm': (4, 2048, 512, 1, 512),
    '_Z23alloc_new_array_alignedm': (4, 2560, 640, 1, 640),
    '_Z25alloc_new_aligned_nothrowm': (2, 1536, 768, 1, 768),
    '_Z31alloc_new_array_aligned_nothrowm': (2, 1792, 896, 1, 896),
    '_Z12alloc_mallocm': (2, 2000, 1000, 1, 1000),
    '_Z11make_objectv': (3, 144, 48, 1, 48),
    '_Z9make_linev': (2, 256, 128, 1, 128),
    '_Z14after_failuresm': (5, 300, 60, 3, 180),
    # the library loaded with dlopen, which brings operators of its own
    '_Z13own_new_thingv': (8, 512, 64, 5, 320),
    '_Z13own_new_charsm': (2, 200, 100, 1, 100),
    '_Z12own_new_widev': (3, 384, 128, 2, 256),
}
CXXALLOC_PATHS = {
    '_Z9alloc_newm': ['_Z9alloc_newm', '_ZL9operatorsv', 'main'],
    '_Z31alloc_new_array_aligned_nothrowm': ['_Z31alloc_new_array_aligned_nothrowm', '_ZL9operatorsv', 'main'],
    '_Z9make_linev': ['_Z9make_linev', '_ZL11expressionsv', 'main'],
    '_Z13own_new_thingv': ['_Z13own_new_thingv', 'own_new_test', '_ZL6pluginPKc', 'main'],
}
ALLOCATOR_LIBS = ('libjemalloc.so', 'libtcmalloc', 'libmimalloc.so')


def mangled(name):
    """A C++ name above as the target mangles it: a last size_t parameter is
    'm' (unsigned long) on 64-bit targets, 'j' (unsigned int) on 32-bit ones."""
    return name[:-1] + 'j' if WORD == 4 and name.startswith('_Z') and name.endswith('m') else name


def allocation_site(node):
    """The call path of an allocation without the allocator's own frames:
    operator new/delete, the malloc family and whatever runs inside the
    allocator library (in libstdc++ only its operators: its exceptions'
    allocations are its own)."""
    frames, n = [], node
    while n and n.fn is not None:
        frames.append(n)
        n = n.parent
    k = 0
    while k < len(frames) and (re.match(r'_Z(nw|na|dl|da)|(__libc_)?(malloc|calloc|realloc|free|memalign|'
                                        r'posix_memalign|aligned_alloc|valloc|pvalloc)$', frames[k].symbol)
                               or os.path.basename(frames[k].path).startswith(ALLOCATOR_LIBS)):
        k += 1
    return [f.symbol for f in frames[k:]]


def expect_cxxalloc(d, what, with_plugin=True):
    """The dump of a cxxalloc run: each table row summed over the call paths
    whose first frame outside the allocator is that function."""
    got = {}
    for n in d.nodes:
        if 'MEM_TOTAL' not in n.counters and 'MEM_LIVE' not in n.counters:
            continue
        site = allocation_site(n)
        if not site or site[0] not in CXXALLOC:
            continue
        tot, mx = n.counters.get('MEM_TOTAL', (0, 0, 0)), n.counters.get('MEM_MAX', (0, 0, 0))
        live = n.counters.get('MEM_LIVE', (0, 0, 0))
        e = got.setdefault(site[0], [0, 0, 0, 0, 0, 0])
        e[0] += tot[0]
        e[1] += tot[1]
        e[2] = max(e[2], mx[1])
        e[3] += live[0]
        e[4] += live[1]
        e[5] += len(n.leaks)
        if site[0] in CXXALLOC_PATHS:
            want = CXXALLOC_PATHS[site[0]]
            eq(site[:len(want)], want, f'{what}: call path of {site[0]}')
    for sym, want in CXXALLOC.items():
        if not with_plugin and sym.startswith(('_Z13own', '_Z12own')):
            continue
        have = got.get(sym, [0] * 6)
        eq(tuple(have[:5]), want, f'{what}: {sym} (calls, bytes, max, live blocks, live bytes)')
        eq(have[5], want[3], f'{what}: {sym} ;LK entries')


def run_cxxalloc(a, what, prog, env=None):
    plugin = os.path.join(os.path.abspath(a.progs), 'libcxxownnew.so')
    native = run([prog, 'dlopen', plugin], env=env)
    throws = 0 if 'mimalloc' in what else 6
    # mimalloc's failing nothrow new sets errno on 64-bit targets only (left 0
    # without the profiler under qemu-i386 and qemu-arm)
    errno = 0 if 'mimalloc' in what and a.target.word == 4 else 12
    eq((native.returncode, native.stdout),
       (0, f'bad_alloc caught {throws} times; nothrow new: NULL errno={errno}\nown_new_test 13\n'),
       f'{what}: native run')
    for f in dumps():
        os.unlink(f)
    r = run([a.igprof, '-mp', '-d', '-o', 'prof.%p', prog, 'dlopen', plugin], env=env)
    same_output(r, native, what)
    check('cannot hook' not in r.stderr, f'{what}: every hook went in: {r.stderr[-600:]!r}')
    found = dumps('prof.*')
    eq(len(found), 1, f'{what}: one dump')
    if found:
        expect_cxxalloc(igdump.Dump(found[0]), what)
        os.unlink(found[0])
    return r


def scenario_cxx_alloc(a):
    # libstdc++'s operators go through malloc: counted there, once
    run_cxxalloc(a, 'libstdc++', os.path.join(os.path.abspath(a.progs), 'cxxalloc'))


def scenario_cxx_alloc_linked(a):
    for name in allocators(a, 'jemalloc', 'tcmalloc', 'tcmalloc_minimal', 'mimalloc'):
        run_cxxalloc(a, f'linked {name}', os.path.join(os.path.abspath(a.progs), f'cxxalloc-{name}'))


def scenario_cxx_alloc_preload(a):
    prog = os.path.join(os.path.abspath(a.progs), 'cxxalloc')
    for name, lib in allocators(a, 'jemalloc', 'tcmalloc', 'tcmalloc_minimal', 'mimalloc').items():
        run_cxxalloc(a, f'preloaded {name}', prog, env=dict(os.environ, LD_PRELOAD=lib))


def scenario_cxx_alloc_threads(a):
    # four threads allocating with new at once, releasing by delete and by
    # free, a failing new now and then (its exception crosses the
    # replacement): exact counts with each allocator's operators
    progs = os.path.abspath(a.progs)
    runs = [('libstdc++', os.path.join(progs, 'cxxalloc'))]
    runs += [(name, os.path.join(progs, f'cxxalloc-{name}'))
             for name in allocators(a, 'jemalloc', 'tcmalloc', 'tcmalloc_minimal', 'mimalloc')]
    sizes = [64 + t for t in range(4)]
    for round in range(a.rounds):
        for name, prog in runs:
            r = run([a.igprof, '-mp', '-o', 'threads.%p', prog, 'threads'])
            eq((r.returncode, r.stdout, r.stderr), (0, 'threads done\n', ''), f'{name}, round {round}: program output')
            found = dumps('threads.*')
            eq(len(found), 1, f'{name}, round {round}: one dump')
            for f in found:
                got = [0] * 6
                for n in igdump.Dump(f).nodes:
                    if allocation_site(n)[:2] == [mangled('_Z10thread_newm'), '_ZL11thread_mainib']:
                        tot, mx = n.counters.get('MEM_TOTAL', (0, 0, 0)), n.counters.get('MEM_MAX', (0, 0, 0))
                        live = n.counters.get('MEM_LIVE', (0, 0, 0))
                        got = [got[0] + tot[0], got[1] + tot[1], max(got[2], mx[1]), got[3] + live[0],
                               got[4] + live[1], got[5] + len(n.leaks)]
                eq(got, [8000, 2000 * sum(sizes), 67, 800, 200 * sum(sizes), 800],
                   f'{name}, round {round}: thread_new (calls, bytes, max, live blocks, live bytes, ;LK)')
                os.unlink(f)


def scenario_cxx_alloc_overhead(a):
    # -mo include counts what the operator's own allocator says a block
    # holds (its malloc_usable_size), or the size asked for where the
    # operators' library has none (the dlopen'd one)
    progs = os.path.abspath(a.progs)
    plugin = os.path.join(progs, 'libcxxownnew.so')
    runs = [('libstdc++', os.path.join(progs, 'cxxalloc'))]
    runs += [(name, os.path.join(progs, f'cxxalloc-{name}'))
             for name in allocators(a, 'jemalloc', 'tcmalloc', 'tcmalloc_minimal', 'mimalloc')]
    for name, prog in runs:
        m = re.fullmatch(r'usable (\d+)\n', run([prog, 'usable']).stdout)
        check(m is not None, f'{name}: usable size printed')
        if not m:
            continue
        usable = int(m.group(1))
        # include: the usable size, or as asked; delta: the overhead, or nothing
        for mode, new100, thing in (('include', [4, 4 * usable], [8, 512]),
                                    ('delta', [4, 4 * (usable - 100)] if usable > 100 else None, None)):
            r = run([a.igprof, '-mp', '-mo', mode, '-o', 'over.%p', prog, 'dlopen', plugin])
            eq(r.returncode, 0, f'{name} -mo {mode}: exit status')
            found = dumps('over.*')
            eq(len(found), 1, f'{name} -mo {mode}: one dump')
            for f in found:
                got = {}
                for n in igdump.Dump(f).nodes:
                    site = allocation_site(n)
                    if site and 'MEM_TOTAL' in n.counters:
                        e = got.setdefault(site[0], [0, 0])
                        e[0] += n.counters['MEM_TOTAL'][0]
                        e[1] += n.counters['MEM_TOTAL'][1]
                eq(got.get(mangled('_Z9alloc_newm')), new100, f'{name} -mo {mode}: alloc_new(100) x 4')
                eq(got.get('_Z13own_new_thingv'), thing, f'{name} -mo {mode}: the library without a usable size')
                os.unlink(f)


def scenario_go(a):
    # A cgo program: the Go runtime ends the process with a raw exit_group
    # (runtime.exit), which is hooked. Each way it ends leaves a dump with the
    # C allocations' exact counts; the exit status and output are the
    # program's own. The stripped build's runtime.exit is found by its code.
    progs = os.path.abspath(a.progs)
    for prog in ('gocgo', 'gocgo-stripped'):
        path = os.path.join(progs, prog)
        check(os.path.exists(path), f'{prog} not built: golang-go missing at build time (scripts/deps.sh)')
        if not os.path.exists(path):
            continue
        ends = (('return', 0), ('exit', 3), ('panic', 2), ('goexit', 4), ('threads', 0))
        for round, (mode, status) in ((r, e) for r in range(a.rounds) for e in ends):
            what = f'{prog} {mode}' + (f', round {round}' if a.rounds > 1 else '')
            native = run([path, mode])
            eq(native.returncode, status, f'{what}: native exit status')
            r = run([a.igprof, '-mp', '-d', '-o', 'go.%p', path, mode])
            eq((r.returncode, r.stdout), (status, native.stdout), f'{what}: exit status and output')
            check('go: hook runtime.exit: ok' in r.stderr, f'{what}: runtime.exit hooked: {r.stderr[-500:]!r}')
            if mode == 'panic':
                check('panic: boom\n' in r.stderr, f'{what}: the panic message')
            found = dumps('go.*')
            eq(len(found), 1, f'{what}: one dump')
            if not found:
                continue
            d = igdump.Dump(found[0])
            expect_mem(d, {
                'c_alloc': (10, 1045, 109, 5, 525),
                'c_goroutine_alloc': (1, 555, 555, 1, 555) if mode == 'goexit' else (0, 0, 0, 0, 0),
                'c_thread_alloc': ((4000, 1000 * 262, 67, 400, 100 * 262) if mode == 'threads'
                                   else (0, 0, 0, 0, 0)),  # 262 = 64 + 65 + 66 + 67
            })
            stack = leaf_stack(d, 'c_alloc')
            check(stack[:1] == ['c_alloc'] and len(stack) > 1 and re.fullmatch(r'_cgo_\w+_Cfunc_c_alloc', stack[1]),
                  f'{what}: c_alloc called by its cgo wrapper: {stack[:3]}')
            os.unlink(found[0])
        # Killed by SIGTERM: Go's handler raises it again for the handler it
        # found installed, the profiler's, which dumps; the death is kept
        p = subprocess.Popen([a.igprof, '-mp', '-o', 'go.%p', path, 'wait', 'ready'], stdout=subprocess.DEVNULL)
        for _ in range(1000):
            if os.path.exists('ready') and open('ready').read() == 'ready\n':
                break
            time.sleep(0.01)
        p.send_signal(signal.SIGTERM)
        eq(p.wait(timeout=60), -signal.SIGTERM, f'{prog} killed by SIGTERM: the death is kept')
        found = dumps('go.*')
        eq(len(found), 1, f'{prog} killed by SIGTERM: one dump')
        for f in found:
            expect_mem(igdump.Dump(f), {'c_alloc': (10, 1045, 109, 5, 525)})
            os.unlink(f)
        os.unlink('ready')
    # runtime.exit's code not as expected (here: the same instructions,
    # differently encoded): one line says the dump will be missing, and the
    # program runs as it would
    stripped = os.path.join(progs, 'gocgo-stripped')
    if os.path.exists(stripped):
        code = open(stripped, 'rb').read()
        machine = int.from_bytes(code[18:20], 'little')  # ELF e_machine
        known, other = {
            # mov $231,%eax -> xor %eax,%eax; mov $231,%al; nop
            62: ('8b7c2408b8e70000000f05c3', '8b7c240831c0b0e7900f05c3'),
            # mov x8, #94 -> mov w8, #94
            183: ('e00b80b9c80b80d2010000d4c0035fd6', 'e00b80b9c80b8052010000d4c0035fd6'),
        }[machine]
        known, other = bytes.fromhex(known), bytes.fromhex(other)
        eq(code.count(known), 1, 'runtime.exit found in the stripped program')
        open('gocgo-other', 'wb').write(code.replace(known, other))
        os.chmod('gocgo-other', 0o755)
        r = run([a.igprof, '-mp', './gocgo-other', 'exit'])
        eq((r.returncode, r.stdout), (3, 'allocated\n'), 'unknown runtime.exit: the program runs as it would')
        lines = [x for x in r.stderr.splitlines() if 'igprof' in x]
        eq(len(lines), 1, f'unknown runtime.exit: one line on stderr: {r.stderr!r}')
        check(bool(lines) and lines[0].endswith('go: runtime.exit not found with the code this igprof knows '
                                                '(another Go version?): no dump will be written when the program ends'),
              f'unknown runtime.exit: the reason: {lines}')
        eq(dumps('igprof.*'), [], 'unknown runtime.exit: no dump')
    # A program that is not Go: no Go hook, nothing said
    r = run([a.igprof, '-mp', '-d', a.memtest, 'exit', '0'])
    check('go:' not in r.stderr, f'a C program gets no Go hook: {r.stderr[-300:]!r}')


SCENARIOS = scenarios(globals())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--progs', required=True)
    ap.add_argument('--allocator', action='append', default=[], metavar='NAME=LIBRARY',
                    help='another malloc found at build time (repeatable)')
    ap.add_argument('--rounds', type=int, default=1, help='repeat (the scenarios that say so)')
    ap.add_argument('scenario', choices=sorted(SCENARIOS))
    a = ap.parse_args()
    a.allocator = dict(x.split('=', 1) for x in a.allocator)
    a.target = target.setup(a.bin)
    global WORD, ALIGN, CXXALLOC, CXXALLOC_PATHS
    WORD = a.target.word
    ALIGN = 8 if a.target.machine == target.EM_ARM else 16
    CXXALLOC = {mangled(k): v for k, v in CXXALLOC.items()}
    CXXALLOC_PATHS = {mangled(k): [mangled(f) for f in v] for k, v in CXXALLOC_PATHS.items()}
    a.igprof = os.path.join(os.path.abspath(a.bin), 'igprof')
    a.lib = os.path.abspath(os.path.join(a.bin, '..', 'lib', 'igprof', 'libigprof.so'))
    a.memtest = os.path.join(os.path.abspath(a.progs), 'memtest')
    a.cxxtest = os.path.join(os.path.abspath(a.progs), 'cxxtest')
    a.sample = os.path.join(os.path.abspath(a.bin), '..', 'examples', 'sample')
    return run_scenario(SCENARIOS[a.scenario], a, 'igprof-e2e-')


if __name__ == '__main__':
    sys.exit(main())
