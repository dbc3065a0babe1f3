#!/usr/bin/env python3
"""Reliability tests: the profiled program never loses data, behaviour or its
dump, whatever it does or is done to it (killed mid-allocation, double free,
stack overflow, a failing dump command, a removed directory, daemon(), planted
symlinks, SIGKILL in a checkpoint). Each check is exact: the program's output
and exit status against a native run, and the dump's figures against what
the program (tests/profiler/progs/hostile.c) did.

Usage: reliability.py --bin BUILD/bin --progs DIR [--rounds N] SCENARIO
"""
import argparse
import glob
import os
import resource
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import igdump  # noqa: E402
import target  # noqa: E402

from checks import check, eq, failures, status, run_scenario, scenarios  # noqa: E402,F401


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, preexec_fn=no_core, **kw)


def dumps(pattern):
    return sorted(glob.glob(pattern))


def leaf(dump, counter, sym):
    return tuple(dump.by_leaf(counter).get(sym, [0, 0, 0, 0]))


def wait_for_file(path, seconds=20):
    end = time.time() + seconds
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.02)
    return False


# ---------------------------------------------------------------------------
# Killed while allocating
# ---------------------------------------------------------------------------

def churn_run(a, sig, threads, launcher=None):
    """Start hostile churn, send `sig` once it runs, return (returncode, counts, dump)."""
    for f in dumps('igprof.hostile.*'):
        os.unlink(f)
    cmd = [a.igprof, '-mp', a.hostile, 'churn', 'counts', str(threads)]
    p = subprocess.Popen((launcher or []) + cmd, stdout=subprocess.PIPE, text=True, preexec_fn=no_core)
    eq(p.stdout.readline(), 'ready\n', f'churn started ({signal.Signals(sig).name})')
    time.sleep(0.3)
    if not launcher:
        p.send_signal(sig)
    rc = p.wait(timeout=60)
    with open('counts', 'rb') as f:
        counts = struct.unpack(f'{threads}Q', f.read(8 * threads))
    found = dumps('igprof.hostile.*')
    eq(len(found), 1, f'one dump after {signal.Signals(sig).name}')
    return rc, counts, igdump.Dump(found[0]) if found else None


def check_churn_dump(d, counts, what):
    """One thread: every malloc the program completed is in the dump, plus at
    most the one the signal interrupted; 64 blocks live (63 between a free and
    the malloc that refills the slot)."""
    if d is None:
        return
    total = leaf(d, 'MEM_TOTAL', 'churn_alloc')
    live = leaf(d, 'MEM_LIVE', 'churn_alloc')
    check(total[0] - counts[0] in (0, 1), f'{what}: MEM_TOTAL calls {total[0]} against {counts[0]} completed')
    check(live[0] in (63, 64) and live[3] == live[0], f'{what}: live blocks {live[0]} (;LK {live[3]}), expected 63 or 64')


def scenario_signals(a):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGALRM):
        for _ in range(a.rounds):
            rc, counts, d = churn_run(a, sig, 1)
            eq(rc, -sig, f'death by {sig.name} kept')
            check(counts[0] > 1000, f'{sig.name}: the program ran ({counts[0]} mallocs)')
            check_churn_dump(d, counts, sig.name)


def scenario_signals_threads(a):
    for sig in (signal.SIGTERM, signal.SIGINT):
        for _ in range(a.rounds):
            rc, counts, d = churn_run(a, sig, 4)
            eq(rc, -sig, f'4 threads: death by {sig.name} kept')
            if d is None:
                continue
            total = leaf(d, 'MEM_TOTAL', 'churn_alloc')[0]
            # The other threads go on allocating while the dump is written:
            # the dump holds at most what they completed, plus one each.
            check(total <= sum(counts) + 4, f'4 threads: {total} calls dumped, {sum(counts)} completed')
            # ...and at least what they completed before it started: a quarter
            # of the final counts leaves room for a slow dump on a loaded machine.
            check(total >= sum(counts) // 4, f'4 threads: {total} calls dumped, {sum(counts)} completed')


def scenario_timeout(a):
    # timeout(1) signals its whole process group: the program gets it once,
    # directly (igprof execs it).
    for sig in ('INT', 'TERM'):
        for _ in range(a.rounds):
            rc, counts, d = churn_run(a, getattr(signal, 'SIG' + sig), 1, launcher=['timeout', '-s', sig, '1'])
            eq(rc, 124, f'timeout -s {sig}: timeout reports the kill')
            check_churn_dump(d, counts, f'timeout -s {sig}')


def scenario_python(a):
    # A real program that spends its time allocating: SIGTERM mid-run.
    for _ in range(a.rounds):
        for f in dumps('igprof.python3.*'):
            os.unlink(f)
        # "busy" once it has made 200 000 strings (not after a fixed time:
        # under qemu-user the start-up alone can take a second), then on
        # until the signal.
        p = subprocess.Popen([a.igprof, '-mp', a.python, '-c',
                              'x = []\nfor i in range(10**8):\n    x.append(str(i) * 100)\n'
                              '    if i == 200000: print("busy", flush=True)'],
                             stdout=subprocess.PIPE, text=True)
        eq(p.stdout.readline(), 'busy\n', 'python started')
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        eq(p.wait(timeout=60), -signal.SIGTERM, 'python: death by SIGTERM kept')
        found = dumps('igprof.python3.*')
        eq(len(found), 1, 'python: one dump')
        if found:
            d = igdump.Dump(found[0])
            calls = sum(n.counters.get('MEM_TOTAL', (0, 0, 0))[0] for n in d.nodes)
            check(calls > 10000, f'python: {calls} allocations in the dump')


# ---------------------------------------------------------------------------
# Dying from the inside
# ---------------------------------------------------------------------------

def scenario_doublefree(a):
    for _ in range(a.rounds):
        for f in dumps('igprof.hostile.*'):
            os.unlink(f)
        native = run([a.hostile, 'doublefree'])
        r = run([a.igprof, '-mp', a.hostile, 'doublefree'])
        eq((r.returncode, r.stdout, r.stderr), (native.returncode, native.stdout, native.stderr),
           'double free: status and output as native')
        eq(r.returncode, -signal.SIGABRT, 'double free aborts')
        found = dumps('igprof.hostile.*')
        eq(len(found), 1, 'double free: one dump')
        if found:
            d = igdump.Dump(found[0])
            eq(leaf(d, 'MEM_LIVE', 'before_death'), (1, 1234, 1234, 1), 'double free: the live block')
            eq(leaf(d, 'MEM_TOTAL', 'doublefree')[:2], (1, 100), 'double free: the block freed twice')
            eq(leaf(d, 'MEM_LIVE', 'doublefree')[:2], (0, 0), 'double free: freed')


def scenario_overflow(a):
    for where in ([], ['thread']):
        for _ in range(a.rounds):
            for f in dumps('igprof.hostile.*'):
                os.unlink(f)
            r = run([a.igprof, '-mp', a.hostile, 'overflow'] + where)
            what = 'stack overflow' + (' in a thread' if where else '')
            eq(r.returncode, -signal.SIGSEGV, f'{what}: death by SIGSEGV kept')
            found = dumps('igprof.hostile.*')
            eq(len(found), 1, f'{what}: one dump')
            if found:
                eq(leaf(igdump.Dump(found[0]), 'MEM_LIVE', 'before_death'), (1, 4321, 4321, 1), f'{what}: the live block')


# ---------------------------------------------------------------------------
# The dump's own failures
# ---------------------------------------------------------------------------

def scenario_pipe_output(a):
    native = run([a.hostile, 'chatty', '3000'])
    for command in ('|false', '|exit 3', '|head -c 1 >/dev/null'):
        for _ in range(a.rounds):
            r = run([a.igprof, '-mp', '-o', command, a.hostile, 'chatty', '3000'])
            eq((r.returncode, r.stdout), (native.returncode, native.stdout), f'-o {command!r}: status and output as native')
    # A dump much bigger than a pipe's buffer into a command that stops reading.
    native = run([a.hostile, 'leaky', '20000'])
    r = run([a.igprof, '-mp', '-o', '|head -c 1 >/dev/null', a.hostile, 'leaky', '20000'])
    eq((r.returncode, r.stdout), (native.returncode, native.stdout), 'big dump into head -c 1: status and output')
    lines = r.stderr.splitlines()
    check(len(lines) == 1 and lines[0].startswith('igprof(') and 'head -c 1' in lines[0] and 'EPIPE' in lines[0],
          f'big dump into head -c 1: one warning, got {r.stderr!r}')


def scenario_tmpnames(a):
    # Planted symlinks at every temporary name the dump could take, and at the
    # final name: none is followed.
    for _ in range(a.rounds):
        for f in glob.glob('.igprof-tmp.*') + dumps('igprof.hostile.*') + dumps('victim*'):
            os.unlink(f)
        with open('victim', 'w') as f:
            f.write('precious\n')
        with open('victim-final', 'w') as f:
            f.write('also precious\n')
        p = subprocess.Popen([a.igprof, '-mp', a.hostile, 'wait'], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        eq(p.stdout.readline(), 'waiting\n', 'waiting program started')
        for n in range(16):
            os.symlink(os.path.abspath('victim'), f'.igprof-tmp.{p.pid}.{n}')
        os.symlink(os.path.abspath('victim-final'), f'igprof.hostile.{p.pid}')
        p.stdin.write('go\n')
        p.stdin.close()
        eq(p.wait(timeout=60), 0, 'planted symlinks: exit status')
        eq(open('victim').read(), 'precious\n', 'the file behind a planted temporary name is untouched')
        eq(open('victim-final').read(), 'also precious\n', 'the file behind a planted final name is untouched')
        check(os.path.islink(f'igprof.hostile.{p.pid}'), 'the planted final name is still the symlink')
        dump = f'igprof.hostile.{p.pid}-2'
        check(os.path.isfile(dump) and not os.path.islink(dump), f'the dump went to {dump}')
        if os.path.isfile(dump):
            eq(leaf(igdump.Dump(dump), 'MEM_LIVE', 'wait_alloc'), (1, 4444, 4444, 1), 'dump beside planted names')
        for f in glob.glob('.igprof-tmp.*'):
            check(os.path.islink(f), f'{f}: only the planted links are left')
            os.unlink(f)


def scenario_checkpoint_kill(a):
    # SIGKILL while a checkpoint is being written: what the documented glob
    # finds is complete, and igprof-analyse reads it all.
    for _ in range(a.rounds):
        for f in glob.glob('.igprof-tmp.*') + dumps('igprof.hostile.*'):
            os.unlink(f)
        p = subprocess.Popen([a.igprof, '-mp', a.hostile, 'checkpoints'], stdout=subprocess.PIPE, text=True)
        eq(p.stdout.readline(), 'dumping\n', 'checkpointing program started')
        time.sleep(0.3)
        p.kill()
        p.wait(timeout=60)
        found = dumps('igprof.hostile.*')
        check(len(found) >= 1, 'checkpoints were written')
        for f in found:
            try:
                igdump.Dump(f)
            except ValueError as e:
                check(False, f'{f}: a cut dump matches the glob: {e}')
        r = run([a.analyse, '--top', '1'] + found)
        eq(r.returncode, 0, f'igprof-analyse on the glob: {r.stderr.strip()}')


def scenario_directories(a):
    # The start directory removed under the program: the dump goes to $TMPDIR.
    os.mkdir('gone')
    os.mkdir('tmpdir')
    tmpdir = os.path.abspath('tmpdir')
    p = subprocess.Popen([a.igprof, '-mp', a.hostile, 'rmcwd'], cwd='gone', stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, TMPDIR=tmpdir))
    err = p.communicate(timeout=60)[1]
    eq(p.returncode, 0, 'removed directory: exit status')
    name = f'igprof.hostile.{p.pid}'
    gone = os.path.join(os.getcwd(), 'gone', name)
    eq(err, f'igprof({p.pid}): cannot write {gone} (ENOENT): dump written to {tmpdir}/{name} instead\n',
       'removed directory: one line saying where the dump went')
    if os.path.exists(os.path.join(tmpdir, name)):
        eq(leaf(igdump.Dump(os.path.join(tmpdir, name)), 'MEM_LIVE', 'rmcwd_alloc'), (1, 555, 555, 1),
           'removed directory: the dump')
    # A daemon() child changes to / and closes its descriptors: its dump
    # still goes where the program was started.
    r = run([a.igprof, '-mp', a.hostile, 'daemon', os.path.abspath('daemon.pid')])
    eq(r.returncode, 0, 'daemon: parent exit status')
    ran = wait_for_file('daemon.pid')
    why = open('daemon.pid.err').read().strip() if os.path.exists('daemon.pid.err') else 'no pid file, no error file'
    check(ran, f'daemon: the child ran ({why})')
    if os.path.exists('daemon.pid'):
        child = int(open('daemon.pid').read())
        check(wait_for_file(f'igprof.hostile.{child}'), 'daemon: the child dumped in the start directory')
        time.sleep(0.1)
        if os.path.exists(f'igprof.hostile.{child}'):
            eq(leaf(igdump.Dump(f'igprof.hostile.{child}'), 'MEM_LIVE', 'daemon_alloc'), (1, 2222, 2222, 1),
               'daemon: the child dump')
    # argv[0] of 300 bytes: the name keeps 200 of them.
    if a.target.emulated:
        a.target.skip('long argv[0]', 'binfmt_misc starts qemu-user without the P flag, so the program '
                      'gets its path as argv[0], not the one exec gave')
        return
    long = 'x' * 300
    r = run([a.igprof, '-mp', 'bash', '-c', f'exec -a {long} {a.hostile} chatty 1'])
    eq(r.returncode, 0, 'long argv[0]: exit status')
    found = [f for f in dumps('igprof.x*') if f.startswith('igprof.' + 'x' * 200 + '.')]
    eq(len(found), 1, 'long argv[0]: a dump named with 200 bytes of it')
    for f in found:
        eq(leaf(igdump.Dump(f), 'MEM_LIVE', 'chatty_alloc'), (1, 777, 777, 1), 'long argv[0]: the dump')


def scenario_special_outputs(a):
    # -o naming a FIFO: the dump goes into it, the FIFO stays; -o naming a
    # symlink: neither the link nor its target is removed or written.
    import threading
    for _ in range(a.rounds):
        for f in ('dump.fifo', 'link', 'target.txt', 'link-2'):
            if os.path.lexists(f):
                os.unlink(f)
        os.mkfifo('dump.fifo')
        got = []
        reader = threading.Thread(target=lambda: got.append(open('dump.fifo').read()))
        reader.start()
        r = run([a.igprof, '-mp', '-o', 'dump.fifo', a.hostile, 'chatty', '1'])
        reader.join(timeout=60)
        eq(r.returncode, 0, '-o FIFO: exit status')
        check(os.path.exists('dump.fifo') and not os.path.isfile('dump.fifo'), '-o FIFO: the FIFO is still there')
        check(len(got) == 1 and got[0].startswith('P=(HEX ID=') and 'chatty_alloc' in got[0],
              f'-o FIFO: the dump came through it ({len(got[0]) if got else 0} bytes)')
        with open('target.txt', 'w') as f:
            f.write('keep me\n')
        os.symlink('target.txt', 'link')
        r = run([a.igprof, '-mp', '-o', 'link', a.hostile, 'chatty', '1'])
        eq(r.returncode, 0, '-o symlink: exit status')
        check(os.path.islink('link'), '-o symlink: the link is not removed')
        eq(open('target.txt').read(), 'keep me\n', '-o symlink: its target is not written')
        check(os.path.isfile('link-2') and not os.path.islink('link-2'), '-o symlink: the dump went to link-2')


# ---------------------------------------------------------------------------
# What the program sees
# ---------------------------------------------------------------------------

def scenario_altstack(a):
    native = run([a.hostile, 'altstack'])
    eq(native.stdout.splitlines()[0], 'at start: disabled, no stack, size 0', 'native: no signal stack at start')
    for mode in (['-mp'], ['-pp'], ['-mp', '-pp']):
        r = run([a.igprof] + mode + [a.hostile, 'altstack'])
        eq((r.returncode, r.stdout), (native.returncode, native.stdout), f'{" ".join(mode)}: sigaltstack as native')


def scenario_static(a):
    r = run([a.igprof, '-mp', a.static])
    eq((r.returncode, r.stdout), (7, 'tiny ran\n'), 'static program runs unchanged')
    eq(r.stderr, f'igprof: warning: {a.static} is statically linked: the profiler cannot be loaded into it '
                 '(LD_PRELOAD needs the dynamic loader): nothing of it is profiled, only the dynamically '
                 'linked programs it starts\n', 'static program: one clear line')
    eq(dumps('igprof.tiny*'), [], 'static program: no dump')


SCENARIOS = scenarios(globals())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--progs', required=True)
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('scenario', choices=sorted(SCENARIOS))
    a = ap.parse_args()
    bindir, progs = os.path.abspath(a.bin), os.path.abspath(a.progs)
    a.igprof = os.path.join(bindir, 'igprof')
    a.analyse = os.path.join(bindir, 'igprof-analyse')
    a.hostile = os.path.join(progs, 'hostile')
    a.static = os.path.join(progs, 'tiny-static')
    a.target = target.setup(bindir)
    a.python = a.target.python() if a.target.cross else '/usr/bin/python3'
    return run_scenario(SCENARIOS[a.scenario], a, 'igprof-rel-')


if __name__ == '__main__':
    sys.exit(main())
