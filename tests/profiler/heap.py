#!/usr/bin/env python3
"""The heap over time under `igprof -mp`: MEM_PEAK (each call path's live
blocks and bytes at the moment the whole heap was largest) and the exit
summary, on programs whose peak is known exactly (progs/heaptest.c), and
MEM_PEAK read by every igprof-analyse report.

Usage: heap.py --bin BUILD/bin --progs DIR SCENARIO
"""
import argparse
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import igdump  # noqa: E402
import target  # noqa: E402
from checks import check, eq, run_scenario, scenarios  # noqa: E402

SUMMARY = re.compile(r'^igprof\((\d+)\): heap peak (\d+) bytes in (\d+) blocks, (\d+)\.(\d{3}) s after start$', re.M)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


def profile(a, scenario, *options):
    """Run heaptest SCENARIO under -mp with the summary on; returns the
    result, the dumps ({pid: Dump}) and the summaries ({pid: (bytes, blocks)})."""
    for f in glob.glob('heap.*'):
        os.unlink(f)
    r = run([a.igprof, '-mp', '--summary', 'always', '-o', 'heap.%p', *options, a.heaptest, scenario])
    eq(r.returncode, 0, f'{scenario}: exit status ({r.stderr[-300:]!r})')
    dumps = {int(f.split('.')[1]): igdump.Dump(f) for f in glob.glob('heap.*') if f.count('.') == 1}
    summaries = {int(m[0]): (int(m[1]), int(m[2])) for m in SUMMARY.findall(r.stderr)}
    eq(sorted(summaries), sorted(dumps), f'{scenario}: one summary line per process with a dump: {r.stderr!r}')
    return r, dumps, summaries


def peak_by_leaf(d):
    """{leaf: (blocks, bytes)} of MEM_PEAK, over the call paths ending there."""
    return {sym: (v[0], v[1]) for sym, v in d.by_leaf('MEM_PEAK').items()}


def peak_total(d):
    """(blocks, bytes): MEM_PEAK over the whole dump."""
    nodes = [n.counters['MEM_PEAK'] for n in d.nodes if 'MEM_PEAK' in n.counters]
    return sum(c[0] for c in nodes), sum(c[1] for c in nodes)


def expect_consistent(d, summary, what):
    """MEM_PEAK describes one moment: its sum over every call path is the
    heap's maximum the summary gives, blocks and bytes; each path's share
    at that moment is within its own high-water mark, and MEM_PEAK's
    peak field repeats its value."""
    eq(peak_total(d), (summary[1], summary[0]), f'{what}: MEM_PEAK over all paths = the summary\'s peak')
    for n in d.nodes:
        if 'MEM_PEAK' in n.counters:
            t, v, p = n.counters['MEM_PEAK']
            live = n.counters.get('MEM_LIVE', (0, 0, 0))
            check(0 <= v <= live[2] and p == v and t >= 0,
                  f'{what}: {n.symbol}: MEM_PEAK {n.counters["MEM_PEAK"]} against MEM_LIVE {live}')


# ---------------------------------------------------------------------------

def scenario_single(a):
    r, dumps, summaries = profile(a, 'single')
    for pid, d in dumps.items():
        # peak_a reached the same total again later and peak_d stopped one
        # byte short: neither has a share of the peak
        eq(peak_by_leaf(d), {'peak_b': (2, 1000), 'peak_grow': (1, 300), 'peak_c': (1, 4000)}, 'MEM_PEAK by leaf')
        eq(summaries[pid], (5300, 4), 'summary: peak bytes and blocks')
        expect_consistent(d, summaries[pid], 'single')
        live = {s: (v[0], v[1]) for s, v in d.by_leaf('MEM_LIVE').items() if v[0] or v[1]}
        eq(live, {'peak_b': (1, 500), 'peak_grow': (1, 200), 'peak_d': (1, 4599)}, 'MEM_LIVE at exit')
        eq(d.by_leaf('MEM_LIVE')['peak_a'][2], 4000, 'peak_a\'s own high-water mark (MEM_LIVE peak)')
        # counter ids: IgProf's three first, MEM_PEAK after them
        with open(glob.glob('heap.*')[0]) as f:
            text = f.read()
        eq(re.findall(r'V(\d)=\((MEM_\w+)\)', text),
           [('0', 'MEM_TOTAL'), ('1', 'MEM_MAX'), ('2', 'MEM_LIVE'), ('3', 'MEM_PEAK')], 'counter definitions')


def scenario_barrier(a):
    r, dumps, summaries = profile(a, 'barrier')
    for pid, d in dumps.items():
        peak = peak_by_leaf(d)
        for t in range(4):
            eq(peak.get(f'big_{t}'), (1, 100000 * (t + 1)), f'big_{t}: its block at the peak')
        eq(peak.get('churn_alloc', (0, 0)), (0, 0), 'no churn block live at the peak')
        eq(d.by_leaf('MEM_TOTAL')['churn_alloc'][0], 4 * 2 * 20000, 'churn allocations counted')
        check(summaries[pid][0] >= 1000000, f'the peak holds the four big blocks: {summaries[pid]}')
        expect_consistent(d, summaries[pid], 'barrier')


def scenario_race(a):
    for round in range(a.rounds):
        r, dumps, summaries = profile(a, 'race')
        for pid, d in dumps.items():
            peak = peak_by_leaf(d)
            for t in range(4):
                blocks, size = peak.get(f'race_{t}', (0, 0))
                check(0 <= blocks <= 8 and blocks * 1 <= size <= blocks * 4096,
                      f'round {round}: race_{t}: at most its 8 ring blocks at the peak: {blocks} blocks, {size} bytes')
            expect_consistent(d, summaries[pid], f'race, round {round}')


def scenario_fork(a):
    r, dumps, summaries = profile(a, 'fork')
    eq(len(dumps), 2, 'parent and child dumps')
    for pid, d in dumps.items():
        child = 'peak_c' in d.by_leaf('MEM_TOTAL')
        if child:
            eq(peak_by_leaf(d), {'peak_c': (1, 3000)}, 'child: MEM_PEAK (its own heap only)')
            eq(summaries[pid], (3000, 1), 'child: summary')
        else:
            eq(peak_by_leaf(d).get('peak_a'), (1, 10000), 'parent: MEM_PEAK of peak_a')
            eq(peak_by_leaf(d).get('peak_b', (0, 0)), (0, 0), 'parent: peak_b came after the peak')
        expect_consistent(d, summaries[pid], 'child' if child else 'parent')


def scenario_summary(a):
    # auto (the default): nothing unless stderr is a terminal, so a program's
    # captured stderr is its own
    r = run([a.igprof, '-mp', '-o', 'auto.%p', a.heaptest, 'single'])
    eq((r.returncode, r.stderr), (0, ''), 'default, stderr a pipe: no summary')
    r = run([a.igprof, '-mp', '--summary', 'never', '-o', 'never.%p', a.heaptest, 'single'])
    eq((r.returncode, r.stderr), (0, ''), '--summary never')
    r = run([a.igprof, '-mp', '--summary', 'sometimes', a.heaptest, 'single'])
    eq((r.returncode, r.stderr), (125, 'igprof: --summary: bad argument, expected auto, always or never\n'),
       'bad --summary')
    # at a terminal: the line appears by default
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(a.igprof, [a.igprof, '-mp', '-o', 'tty.%p', a.heaptest, 'single'])
    out = b''
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, st = os.waitpid(pid, 0)
    eq(os.waitstatus_to_exitcode(st), 0, 'at a terminal: exit status')
    m = SUMMARY.findall(out.decode(errors='replace').replace('\r\n', '\n'))
    eq([(b, n) for _, b, n, _, _ in m], [('5300', '4')], f'at a terminal: the summary by default ({out!r})')
    # -mp off: no summary even when asked
    r = run([a.igprof, '-pp', '--summary', 'always', '-o', 'pp.%p', a.heaptest, 'single'])
    eq((r.returncode, r.stderr), (0, ''), '--summary without -mp')


def live_by_leaf(d, counter='MEM_LIVE'):
    """{leaf: (ticks, bytes)} of a counter, leaves with something only."""
    return {s: (v[0], v[1]) for s, v in d.by_leaf(counter).items() if v[0] or v[1]}


def scenario_threshold(a):
    # exactly at the size is not above it; the first byte over it dumps, once
    r, dumps, summaries = profile(a, 'threshold', '--dump-at-peak', '10k')
    pid = next(iter(dumps))
    names = sorted(os.path.basename(f) for f in glob.glob('heap.*'))
    eq(names, [f'heap.{pid}', f'heap.{pid}.peak'], 'the final dump and one .peak dump')
    peak = igdump.Dump(f'heap.{pid}.peak')
    at_crossing = {'th_a': (1, 4000), 'th_b': (2, 2240), 'th_c': (1, 4000), 'th_d': (1, 1)}
    eq(live_by_leaf(peak), at_crossing, '.peak dump: MEM_LIVE when the heap first exceeded 10240 bytes')
    eq(live_by_leaf(peak, 'MEM_TOTAL'), {'th_a': (2, 8000), 'th_b': (2, 2240), 'th_c': (1, 4000), 'th_d': (1, 1)},
       '.peak dump: MEM_TOTAL so far')
    eq(peak_by_leaf(peak), at_crossing, '.peak dump: the crossing is the peak so far')
    eq(sum(len(n.leaks) for n in peak.nodes), 5, '.peak dump: the 5 live blocks listed')
    final = dumps[pid]
    eq(live_by_leaf(final), {'th_c': (1, 4000)}, 'final dump: MEM_LIVE at exit')
    eq(live_by_leaf(final, 'MEM_TOTAL'), {'th_a': (3, 13000), 'th_b': (2, 2240), 'th_c': (1, 4000), 'th_d': (2, 2)},
       'final dump: MEM_TOTAL')
    eq(peak_by_leaf(final), {'th_a': (2, 9000), 'th_b': (2, 2240), 'th_c': (1, 4000), 'th_d': (1, 1)},
       'final dump: MEM_PEAK (15241 bytes)')
    eq(summaries[pid], (15241, 6), 'summary')
    # a size never exceeded: no .peak dump; -z: .peak.gz; the size's suffixes
    for option, z, want in (('15241', [], []), ('15240', ['-z'], ['.peak.gz']), ('14K', [], ['.peak']),
                            ('1m', [], [])):
        for f in glob.glob('heap.*'):
            os.unlink(f)
        r = run([a.igprof, '-mp', *z, '--dump-at-peak', option, '-o', 'heap.%p' + ('.gz' if z else ''), a.heaptest,
                 'threshold'])
        eq(r.returncode, 0, f'--dump-at-peak {option}: exit status')
        got = sorted(f[len('heap.'):].split('.', 1)[1] if f.count('.') > 1 else '' for f in glob.glob('heap.*'))
        eq(got, sorted(([] if z else ['']) + (['gz'] if z else []) + [w.lstrip('.') for w in want]),
           f'--dump-at-peak {option}: dumps')
    for bad in ('0', '10kb', '-1', 'x', '1.5M', '99999999999G'):
        r = run([a.igprof, '-mp', '--dump-at-peak', bad, a.heaptest, 'threshold'])
        eq((r.returncode, r.stderr),
           (125, 'igprof: --dump-at-peak: bad argument, expected a size in bytes above 0, suffix k, M or G\n'),
           f'--dump-at-peak {bad}')


def scenario_threshold_threads(a):
    # four threads cross 500000 bytes together: one .peak dump, showing more
    # than that live; the children of a fork each get their own
    r, dumps, summaries = profile(a, 'barrier', '--dump-at-peak', '500000')
    peaks = glob.glob('heap.*.peak')
    eq(len(peaks), 1, 'one .peak dump')
    if peaks:
        d = igdump.Dump(peaks[0])
        live = sum(n.counters['MEM_LIVE'][1] for n in d.nodes if 'MEM_LIVE' in n.counters)
        check(live > 500000, f'.peak dump: {live} bytes live, more than 500000')
        check(sum(v[0] for s, v in live_by_leaf(d).items() if s.startswith('big_')) >= 2,
              f'.peak dump: the big blocks that crossed it: {live_by_leaf(d)}')
    r, dumps, summaries = profile(a, 'fork', '--dump-at-peak', '2500')
    eq(len(glob.glob('heap.*.peak')), 2, 'fork: parent and child each cross 2500 bytes: two .peak dumps')
    for f in glob.glob('heap.*.peak'):
        d = igdump.Dump(f)
        check(live_by_leaf(d) in ({'peak_a': (1, 10000)}, {'peak_c': (1, 3000)}), f'{f}: {live_by_leaf(d)}')


def timeline(d):
    """The dump's heap timeline: [(us, bytes, blocks)], in order."""
    return [(c[2], c[1], c[0]) for n in d.nodes if n.symbol == '@igprof_heap_sample'
            for c in [n.counters['HEAP_TIMELINE']]]


SINGLE_BYTES = [0, 1000, 2000, 3000, 4000, 3000, 2000, 1000, 5300, 1300, 2300, 3300, 4300, 5300, 4300, 3300, 2300,
                1300, 5299, 5299]
SINGLE_BLOCKS = [0, 1, 2, 3, 5, 4, 3, 2, 4, 3, 4, 5, 6, 7, 6, 5, 4, 3, 3, 3]


def scenario_timeline(a):
    # every 1000 bytes of change: the start, each step of single() that
    # moves the live bytes 1000 from the last sample, and the end
    r, dumps, summaries = profile(a, 'single', '--timeline', '1000')
    d = next(iter(dumps.values()))
    tl = timeline(d)
    eq([b for _, b, _ in tl], SINGLE_BYTES, 'timeline bytes')
    eq([n for _, _, n in tl], SINGLE_BLOCKS, 'timeline blocks')
    eq([t for t, _, _ in tl], sorted(t for t, _, _ in tl), 'timeline times in order')
    dump = glob.glob('heap.*')[0]
    # IgProf's grammar: one stack @igprof_heap_timeline, which reports leave out
    eq(peak_by_leaf(d), {'peak_b': (2, 1000), 'peak_grow': (1, 300), 'peak_c': (1, 4000)}, 'MEM_PEAK unchanged')
    text = analyse(a, dump)
    check('igprof_heap' not in text, 'the timeline is not a stack of the reports')
    # --timeline: one row per sample, the peak marked
    chart = subprocess.run([a.analyse, '--timeline', dump], capture_output=True, text=True).stdout
    rows = re.findall(r"^\s+(\d+\.\d{3})\s+([\d']+)\s+([\d']+) \|(#*)( <- peak)?$", chart, re.M)
    eq([(int(b.replace("'", '')), int(n.replace("'", ''))) for _, b, n, _, _ in rows],
       list(zip(SINGLE_BYTES, SINGLE_BLOCKS)), '--timeline rows')
    eq([i for i, row in enumerate(rows) if row[4]], [8], '--timeline: the peak marked once, on the first 5300')
    eq([len(row[3]) for row in rows], [round(b * 50 / 5300) for b in SINGLE_BYTES], '--timeline bars')
    check(re.search(r"^Peak: 5'300 bytes in 4 blocks at \d+\.\d{3} s$", chart, re.M) is not None,
          f'--timeline peak line: {chart[:300]!r}')
    # --massif: ms_print reads it; its table is the timeline, snapshot 8 the peak with the MEM_PEAK tree
    r = subprocess.run([a.analyse, '--massif', 'massif.out', dump], capture_output=True, text=True)
    eq((r.returncode, r.stderr), (0, ''), '--massif')
    ms = subprocess.run(['ms_print', 'massif.out'], capture_output=True, text=True)
    eq(ms.returncode, 0, f'ms_print: {ms.stderr[-300:]}')
    table = re.findall(r'^\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+0\s+0$', ms.stdout, re.M)
    eq([int(t[2].replace(',', '')) for t in table], SINGLE_BYTES, 'ms_print: total(B) of each snapshot')
    eq(re.findall(r'^Number of snapshots: (\d+)\n Detailed snapshots: \[(.*)\]$', ms.stdout, re.M),
       [(str(len(SINGLE_BYTES)), '8 (peak)')], 'ms_print: snapshots, the peak detailed')
    eq(re.findall(r'^->([\d.]+)% \(([\d,]+)B\) 0x0: (\w+) \(in heaptest\)$', ms.stdout, re.M),
       [('75.47', '4,000', 'peak_c'), ('18.87', '1,000', 'peak_b'), ('05.66', '300', 'peak_grow')],
       'ms_print: the allocation sites at the peak')
    check(re.search(r'^100\.00% \(5,300B\) \(heap allocation functions\)', ms.stdout, re.M) is not None,
          'ms_print: the peak tree\'s total')
    # errors: no timeline, -b, another counter
    r = run([a.igprof, '-mp', '-o', 'plain.%p', a.heaptest, 'single'])
    plain = glob.glob('plain.*')[0]
    r = run([a.analyse, '--timeline', plain])
    eq((r.returncode, r.stderr), (1, 'igprof-analyse: no heap timeline in the input '
                                     '(igprof -mp --timeline EVERY writes one)\n'), '--timeline without one')
    r = run([a.analyse, '--massif', 'x.out', dump, dump])
    eq((r.returncode, r.stderr), (1, 'igprof-analyse: 2 inputs hold a heap timeline: give one\n'), 'two timelines')
    r = run([a.analyse, '--timeline', '-r', 'MEM_LIVE', dump])
    eq(r.returncode, 1, '--timeline with -r MEM_LIVE')


def snapshots(d):
    """The dump's detailed snapshots: {timeline sample: {leaf: (blocks, bytes)}}."""
    out = {}
    for top in d.root.children:
        if top.symbol != '@igprof_heap_snapshot':
            continue
        todo = list(top.children)
        while todo:
            n = todo.pop()
            todo += n.children
            if 'HEAP_SNAPSHOT' in n.counters:
                blocks, size, sample = n.counters['HEAP_SNAPSHOT']
                leaf = out.setdefault(sample, {}).setdefault(n.symbol, (0, 0))
                out[sample][n.symbol] = (leaf[0] + blocks, leaf[1] + size)
    return out


def expect_snapshots_add_up(d, what):
    tl = timeline(d)
    for sample, leaves in snapshots(d).items():
        eq((sum(b for b, _ in leaves.values()), sum(x for _, x in leaves.values())), (tl[sample][2], tl[sample][1]),
           f'{what}: snapshot of sample {sample} adds up to that sample')


def scenario_snapshots(a):
    # every 4th sample of single()'s timeline is detailed: exact stacks
    r, dumps, summaries = profile(a, 'single', '--timeline', '1000', '--snapshots', '4')
    d = next(iter(dumps.values()))
    eq(snapshots(d), {4: {'peak_a': (3, 3000), 'peak_b': (2, 1000)},
                      8: {'peak_b': (2, 1000), 'peak_grow': (1, 300), 'peak_c': (1, 4000)},
                      12: {'peak_b': (2, 1000), 'peak_grow': (1, 300), 'peak_a': (3, 3000)},
                      16: {'peak_b': (2, 1000), 'peak_grow': (1, 300), 'peak_a': (1, 1000)}}, 'detailed snapshots')
    eq([b for _, b, _ in timeline(d)], SINGLE_BYTES, 'the timeline is the same')
    dump = glob.glob('heap.*')[0]
    check('igprof_heap' not in analyse(a, dump), 'snapshots are not stacks of the reports')
    r = subprocess.run([a.analyse, '--massif', 'massif.out', dump], capture_output=True, text=True)
    eq((r.returncode, r.stderr), (0, ''), '--massif')
    ms = subprocess.run(['ms_print', 'massif.out'], capture_output=True, text=True)
    eq(re.findall(r'^ Detailed snapshots: \[(.*)\]$', ms.stdout, re.M), ['4, 8 (peak), 12, 16'],
       'ms_print: the detailed snapshots')
    part = ms.stdout.split('\n 12 ')[1].split('-' * 80)[0] if '\n 12 ' in ms.stdout else ''
    eq(re.findall(r'^->([\d.]+)% \(([\d,]+)B\) 0x0: (\w+) \(in heaptest\)$', part, re.M),
       [('69.77', '3,000', 'peak_a'), ('23.26', '1,000', 'peak_b'), ('06.98', '300', 'peak_grow')],
       'ms_print: snapshot 12\'s allocation sites')
    # threads: each snapshot is one moment (taken under the heap's lock). How
    # many a run keeps depends on the threads' interleaving (the timeline's
    # step doubles until its samples fit, to about the range the live total
    # wanders in): 1 to 10 here. Runs until 3 snapshots have been checked.
    taken = []
    for _ in range(8):
        r, dumps, summaries = profile(a, 'race', '--timeline', '4k', '--snapshots', '2')
        d = next(iter(dumps.values()))
        taken.append(len(snapshots(d)))
        expect_snapshots_add_up(d, 'race')
        if sum(taken) >= 3:
            break
    check(sum(taken) >= 3, f'race: snapshots taken in {len(taken)} runs: {taken}')
    # at most 128 detailed snapshots: every other one goes when full
    r, dumps, summaries = profile(a, 'grow', '--timeline', '16', '--snapshots', '1')
    d = next(iter(dumps.values()))
    n = len(snapshots(d))
    check(1 <= n <= 128, f'grow: at most 128 snapshots kept: {n}')
    expect_snapshots_add_up(d, 'grow')
    r = run([a.igprof, '-mp', '--snapshots', '0', a.heaptest, 'single'])
    eq((r.returncode, r.stderr), (125, 'igprof: --snapshots: bad argument, expected a number 1..1000000\n'), '--snapshots 0')


def scenario_timeline_time(a):
    # every 50 ms: samples at least 50 ms apart, over the ~200 ms run
    r, dumps, summaries = profile(a, 'slow', '--timeline', '50ms')
    tl = timeline(next(iter(dumps.values())))
    regular = [t for t, b, n in tl[1:-1] if (b, n) != (10000, 10)]  # the peak may be inserted
    span = tl[-1][0]  # the run's length as the timeline saw it (longer under emulation)
    check(2 <= len(regular) <= span // 50000 + 1, f'samples every 50 ms over {span} us: {tl}')
    eq([t2 - t1 >= 50000 for t1, t2 in zip(regular, regular[1:])], [True] * (len(regular) - 1),
       f'samples at least 50 ms apart: {tl}')
    eq(max(b for _, b, _ in tl), 10000, 'the peak, 10 blocks of 1000, is in the timeline')
    eq(tl[-1][1:], (0, 0), 'the end: all freed')
    # a timeline that outgrows its 4096 samples keeps every other one and doubles its step
    r, dumps, summaries = profile(a, 'grow', '--timeline', '16')
    tl = timeline(next(iter(dumps.values())))
    b = [x for _, x, _ in tl]
    check(len(tl) <= 4099, f'at most 4096 samples and the start, peak and end: {len(tl)}')
    eq(b == sorted(b) and b[-1] == 320000 and b[0] == 0, True, 'from 0 up to 20000 x 16 bytes')
    check(max(y - x for x, y in zip(b, b[1:])) <= 256, f'steps of at most 16 x 2^4 after three thinnings')


def scenario_sizes(a):
    # outside [min, max]: counted in every counter under one frame
    # @igprof_size_filtered, no stack walked (-d: the walks)
    every = {'size_10': 10, 'size_100': 100, 'size_1000': 1000, 'size_10000': 10000}
    for options, walked in ((['--min-size', '100', '--max-size', '999'], ('size_100',)),
                            (['--min-size', '100', '--max-size', '1000'], ('size_100', 'size_1000')),
                            (['--min-size', '101', '--max-size', '1k'], ('size_1000',)),
                            (['--min-size', '1001'], ('size_10000',)),
                            (['--max-size', '99'], ('size_10',)),
                            ([], tuple(every))):
        what = ' '.join(options) or 'no range'
        r, dumps, summaries = profile(a, 'sizes', '-d', *options)
        d = next(iter(dumps.values()))
        filtered = sum(v for s, v in every.items() if s not in walked)
        want = {s: (2, 2 * every[s]) for s in walked}
        if filtered:
            want['@igprof_size_filtered'] = (2 * (4 - len(walked)), 2 * filtered)
        eq(live_by_leaf(d, 'MEM_TOTAL'), want, f'{what}: MEM_TOTAL')
        eq(live_by_leaf(d), {s: (n // 2, v // 2) for s, (n, v) in want.items()}, f'{what}: MEM_LIVE')
        eq(sum(len(n.leaks) for n in d.nodes), 4, f'{what}: the 4 live blocks listed')
        stack = [n.stack() for n in d.nodes if n.symbol == '@igprof_size_filtered']
        eq(stack, [['@igprof_size_filtered']] if filtered else [], f'{what}: one frame, under the root')
        eq(summaries[next(iter(dumps))], (11110, 4), f'{what}: the heap\'s peak counts them all')
        m = re.search(r'fast walker, this thread: (\d+) walks', r.stderr)
        eq(int(m.group(1)) if m else None, 2 * len(walked), f'{what}: walks (stderr: {r.stderr[-200:]!r})')
    for options, message in ((['--min-size', '2k', '--max-size', '1k'], 'igprof: --min-size 2048 is above --max-size 1024\n'),
                             (['--min-size', 'x'], 'igprof: --min-size: bad argument, expected a size in bytes, suffix k, M or G\n')):
        r = run([a.igprof, '-mp', *options, a.heaptest, 'sizes'])
        eq((r.returncode, r.stderr), (125, message), ' '.join(options))


PAGE = os.sysconf('SC_PAGE_SIZE')


def by_caller(d, counter, names):
    """{the innermost of `names` on the stack: (ticks, value)} of a counter."""
    out = {}
    for n in d.nodes:
        if counter in n.counters:
            site = next((f for f in n.stack() if f in names), None)
            t, v, _ = n.counters[counter]
            prev = out.get(site, (0, 0))
            out[site] = (prev[0] + t, prev[1] + v)
    return out


def scenario_pages(a):
    names = ('map_a', 'map_b', 'map_c', 'map_d', 'remap_c', 'grow_brk', 'shrink_brk', 'big_malloc')
    for options in (['-mm'], ['-mm', '-mp']):
        what = ' '.join(options)
        for f in glob.glob('pages.*'):
            os.unlink(f)
        # Under qemu-user sbrk fails in some runs, with the profiler or
        # without (qemu does not move the break over a mapping of its own
        # above it): heaptest exits 3 then, and the run is made again. Up
        # to 3 runs of 4 fail there (all 10 of one CI run's tries did), so
        # up to 40 tries: each is a fraction of a second.
        for attempt in range(40):
            for f in glob.glob('pages.*'):
                os.unlink(f)
            r = run([a.igprof, *options, '-o', 'pages.%p', a.heaptest, 'pages'])
            if r.returncode != 3 or not a.target.emulated:
                break
        eq((r.returncode, r.stderr), (0, ''), f'{what}: exit status and stderr')
        d = igdump.Dump(glob.glob('pages.*')[0])
        total, live = by_caller(d, 'MMAP_TOTAL', names), by_caller(d, 'MMAP_LIVE', names)
        mapped = total.pop('big_malloc', (0, 0))
        eq(mapped[0], 1, f'{what}: malloc of 1 MiB: one mapping, at the malloc call')
        check(1 << 20 < mapped[1] <= (1 << 20) + 2 * PAGE, f'{what}: 1 MiB and malloc\'s header, in pages: {mapped}')
        eq(total, {'map_a': (1, 3 * PAGE), 'map_b': (1, 5 * PAGE), 'map_c': (1, 2 * PAGE), 'map_d': (1, PAGE),
                   'remap_c': (1, 4 * PAGE), 'grow_brk': (1, 10000)}, f'{what}: MMAP_TOTAL')
        eq({k: v for k, v in live.items() if v != (0, 0)},
           {'map_a': (1, 3 * PAGE), 'map_b': (2, 4 * PAGE), 'remap_c': (1, 4 * PAGE), 'grow_brk': (1, 6000)},
           f'{what}: MMAP_LIVE (map_c moved by remap_c, map_d and the malloc unmapped, the break 4000 down)')
        peaks = {s: n.counters['MMAP_LIVE'][2] for n in d.nodes if 'MMAP_LIVE' in n.counters
                 for s in [next((f for f in n.stack() if f in names), None)]}
        eq((peaks['map_b'], peaks['grow_brk']), (5 * PAGE, 10000), f'{what}: MMAP_LIVE peaks')
        if '-mp' in options:
            eq(d.by_leaf('MEM_TOTAL')['big_malloc'][:2], [1, 1 << 20], f'{what}: MEM_TOTAL beside')


def scenario_lifetimes(a):
    r, dumps, summaries = profile(a, 'lifetimes', '--lifetimes', '20ms')
    d = next(iter(dumps.values()))
    eq(live_by_leaf(d, 'MEM_TEMP'), {'temp_alloc': (2, 300), 'short_alloc': (1, 70), 'regrow_alloc': (1, 10)},
       'MEM_TEMP: freed before the thread\'s next allocation')
    eq(live_by_leaf(d, 'MEM_SHORT'), {'temp_alloc': (2, 300), 'short_alloc': (1, 50), 'regrow_alloc': (1, 10)},
       'MEM_SHORT: freed within 20 ms')
    ages = {s: v for s, v in live_by_leaf(d, 'MEM_LIFETIME').items()}
    eq({s: v[0] for s, v in ages.items()}, {'temp_alloc': 2, 'short_alloc': 2, 'long_alloc': 1, 'regrow_alloc': 1},
       'MEM_LIFETIME: blocks that ended')
    check(55000 <= ages['long_alloc'][1] <= 1000000, f'long_alloc lived about 60 ms: {ages["long_alloc"]} us')
    check(55000 <= ages['short_alloc'][1] <= 1000000, f'short_alloc: one block of 60 ms: {ages["short_alloc"]} us')
    check(ages['temp_alloc'][1] < 20000, f'temp_alloc: ages under a clock tick or two: {ages["temp_alloc"]} us')
    eq(live_by_leaf(d), {'realloc_site': (1, 20)}, 'MEM_LIVE: the realloc\'ed block')
    dump = [f for f in glob.glob('heap.*') if f.count('.') == 1][0]
    for key, unit in (('MEM_LIFETIME', 'microseconds'), ('MEM_TEMP', 'bytes')):
        top = subprocess.run([a.analyse, '-r', key, '--top', '1', dump], capture_output=True, text=True)
        check(re.search(rf"^## Entry 1 \([\d']+ {unit}\)$", top.stdout, re.M) is not None,
              f'--top -r {key}: values in {unit}: {top.stdout[:200]!r}')
    # off by default: no such counters
    r = run([a.igprof, '-mp', '-o', 'plain.%p', a.heaptest, 'lifetimes'])
    plain = igdump.Dump(glob.glob('plain.*')[0])
    eq(sorted(plain.counter_names), ['MEM_LIVE', 'MEM_MAX', 'MEM_PEAK', 'MEM_TOTAL'], 'counters without --lifetimes')
    r = run([a.igprof, '-mp', '--lifetimes', '20', a.heaptest, 'lifetimes'])
    eq((r.returncode, r.stderr), (125, 'igprof: --lifetimes: bad argument, expected <n>ms (1..3600000)\n'), 'bad --lifetimes')


def scenario_histogram(a):
    # sizes(): two blocks each of 10, 100, 1000 and 10000 bytes, nothing else
    r, dumps, summaries = profile(a, 'sizes', '--histogram')
    d = next(iter(dumps.values()))
    classes = [n.counters['HEAP_HISTOGRAM'] for n in d.nodes if n.symbol == '@igprof_size_class']
    eq(sorted(classes), [(2, 20, 8), (2, 200, 64), (2, 2000, 512), (2, 20000, 8192)],
       'HEAP_HISTOGRAM: (allocations, bytes, smallest size) per class')
    dump = glob.glob('heap.*')[0]
    check('igprof_size' not in analyse(a, dump), 'the histogram is not a stack of the reports')
    r = subprocess.run([a.analyse, '--histogram', dump, dump], capture_output=True, text=True)
    eq(r.returncode, 0, '--histogram')
    eq(r.stdout.splitlines()[0], "Allocation sizes: 16 allocations, 44'440 bytes", '--histogram of two dumps: added up')
    rows = re.findall(r"^\s+([\d']+)\s+([\d']+)\s+([\d']+)\s+([\d.]+)\s+([\d']+)\s+([\d.]+) \|(#*)$", r.stdout, re.M)
    eq([(lo, hi, n, p, b, q, len(bar)) for lo, hi, n, p, b, q, bar in rows],
       [('8', '15', '4', '25.00', '40', '0.09', 40), ('64', '127', '4', '25.00', '400', '0.90', 40),
        ("512", "1'023", '4', '25.00', "4'000", '9.00', 40), ("8'192", "16'383", '4', '25.00', "40'000", '90.01', 40)],
       '--histogram rows')
    # with sizes outside --min-size: in the histogram still; none without --histogram
    r, dumps, summaries = profile(a, 'sizes', '--histogram', '--min-size', '1000')
    eq(sorted(n.counters['HEAP_HISTOGRAM'][0] for n in next(iter(dumps.values())).nodes
              if n.symbol == '@igprof_size_class'), [2, 2, 2, 2], 'filtered sizes are in the histogram')
    r = run([a.igprof, '-mp', '-o', 'plain.%p', a.heaptest, 'sizes'])
    r = run([a.analyse, '--histogram', glob.glob('plain.*')[0]])
    eq((r.returncode, r.stderr), (1, 'igprof-analyse: no allocation-size histogram in the input '
                                     '(igprof -mp --histogram writes one)\n'), '--histogram without one')


def analyse(a, *args):
    r = subprocess.run([a.analyse, '-r', 'MEM_PEAK', *args], capture_output=True, timeout=120)
    eq(r.returncode, 0, f'igprof-analyse {" ".join(args)}: {r.stderr[-300:]!r}')
    return r.stdout.decode()


def scenario_reports(a):
    """MEM_PEAK is read like any counter, by every report."""
    profile(a, 'single')
    dump = glob.glob('heap.*')[0]
    want = {'peak_c': 4000, 'peak_b': 1000, 'peak_grow': 300}
    # text: the flat self profile
    text = analyse(a, dump)
    self_part = text.split('Flat profile (self')[1].split('Call tree')[0]
    rows = re.findall(r"^\s+[\d.]+\s+([\d']+)\s+\d+\s+(\w+) \[\d+\]$", self_part, re.M)
    eq({name: int(v.replace("'", '')) for v, name in rows if name in want}, want, 'text report: self values')
    check('Counter: MEM_PEAK' in text, 'text report names the counter')
    # flame graph: one line per path, its value
    flame = analyse(a, '--flame', dump).splitlines()
    eq(sorted((l.rsplit(' ', 1)[0].split(';')[-1], int(l.rsplit(' ', 1)[1])) for l in flame),
       sorted(want.items()), 'flame: leaf and value per path')
    # top: entries by self value
    top = analyse(a, '--top', '3', dump)
    eq(re.findall(r"^## Entry \d+ \(([\d']+) bytes\)\n#0 (\w+)$", top, re.M),
       [("4'000", 'peak_c'), ("1'000", 'peak_b'), ('300', 'peak_grow')], '--top')
    # tree: shares of the peak
    tree = analyse(a, '--tree', dump)
    eq(re.findall(r'\|->\(([\d.]+)\) (\w+)', tree), [('75.47', 'peak_c'), ('18.87', 'peak_b'), ('5.66', 'peak_grow')],
       '--tree')
    # json
    j = json.loads(analyse(a, '--json', dump))
    eq((j['summary']['counter'], j['summary']['total_counts'], j['summary']['total_freq']), ('MEM_PEAK', 5300, 4),
       'json summary')
    eq({j['symbols'][r[1]]: r[3] for r in j['mainrows'] if j['symbols'][r[1]] in want}, want, 'json self values')
    # sqlite
    analyse(a, '--sqlite', 'peak.sql3', dump)
    db = sqlite3.connect('peak.sql3')
    eq(list(db.execute('select counter, total_count, total_freq from summary')), [('MEM_PEAK', 5300, 4)],
       'sqlite summary')
    eq({n: c for n, c in db.execute('select s.name, m.self_count from mainrows m join symbols s on s.id = m.symbol_id')
        if n in want}, want, 'sqlite self values')
    db.close()
    # callgrind
    analyse(a, '--callgrind', 'peak.callgrind', dump)
    with open('peak.callgrind') as f:
        cg = f.read()
    eq((re.search(r'^events: (\S+)$', cg, re.M)[1], re.search(r'^summary: (\d+)$', cg, re.M)[1]), ('MEM_PEAK', '5300'),
       'callgrind events and summary')
    names = dict(re.findall(r'^c?fn=\((\d+)\) (\S+)$', cg, re.M))
    # a function's block: fn=(id), then its self cost line, then its calls
    self_cost = {names[i]: int(c) for i, c in re.findall(r'^fn=\((\d+)\)(?: \S+)?\n0 (\d+)$', cg, re.M)}
    eq({n: c for n, c in self_cost.items() if n in want}, want, 'callgrind self costs')
    # html: its flat table holds what the JSON report holds (html_test.py)
    r = run([sys.executable, a.html_test, a.analyse, dump, '-r', 'MEM_PEAK'])
    eq(r.returncode, 0, f'html report: {r.stdout[-300:]}{r.stderr[-300:]}')


SCENARIOS = scenarios(globals())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--progs', required=True)
    ap.add_argument('--rounds', type=int, default=1, help='repeat (race)')
    ap.add_argument('scenario', choices=sorted(SCENARIOS))
    a = ap.parse_args()
    a.target = target.setup(a.bin)
    bindir = os.path.abspath(a.bin)
    a.igprof = os.path.join(bindir, 'igprof')
    a.analyse = os.path.join(bindir, 'igprof-analyse')
    a.heaptest = os.path.join(os.path.abspath(a.progs), 'heaptest')
    a.html_test = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'analyse', 'html_test.py')
    return run_scenario(SCENARIOS[a.scenario], a, 'igprof-heap-')


if __name__ == '__main__':
    sys.exit(main())
