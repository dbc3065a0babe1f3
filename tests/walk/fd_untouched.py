#!/usr/bin/env python3
"""The profiler owns no file descriptor the program can see or reuse.

walk_fd_program lists its descriptors at start and at the end, closes all
above 2, puts its own files on 3, 4 and 5 and copies an input file to an
output file through them, while allocating from frames libunwind can only
step by frame pointer (run-time code without unwind information) and
spinning in such code. Under -mp, -pp and -mp -pp, with each stack walker,
its output must be the native run's, byte for byte: the same descriptor
lists, the output file equal to the input, exit status 0, nothing on stderr
(libunwind in use: no warning that it is not), and one dump written, whose
stacks (with -mp) reach main.

usage: fd_untouched.py IGPROF PROGRAM [--rounds N]
  --rounds N: every profiled run N times (the stress variant)
"""
import glob
import os
import subprocess
import sys
import tempfile

PROFILES = [['-mp'], ['-pp', '-pf', '1000'], ['-mp', '-pp', '-pf', '1000']]
METHODS = ['fast', 'libunwind']
SPIN = '300000'


def make_input(path):
    """32 KiB of every byte value, in a pattern no chunking repeats."""
    data = bytes((i * 7 + (i >> 8) * 13) & 0xff for i in range(32768))
    with open(path, 'wb') as f:
        f.write(data)
    return data


def read_output(path):
    """The output file's bytes; none if the program died before making it."""
    if not os.path.exists(path):
        return b''
    with open(path, 'rb') as f:
        return f.read()


def run(prefix, program, inp, out, tmp):
    if os.path.exists(out):
        os.unlink(out)
    return subprocess.run(prefix + [program, inp, out, SPIN], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp)


def profiled_run(igprof, program, profile, method, native_stdout, data, inp, out, tmp):
    """One run under igprof; prints ok or FAIL; returns 1 on failure."""
    what = ' '.join(profile + ['--unwind', method])
    dumps = os.path.join(tmp, 'dumps')
    os.mkdir(dumps)
    r = run([igprof] + profile + ['--unwind', method, '-o', os.path.join(dumps, 'ig.%p'), '--'],
            program, inp, out, tmp)
    copied = read_output(out)
    written = glob.glob(os.path.join(dumps, 'ig.*'))
    problems = []
    if r.returncode != 0:
        problems.append(f'exit status {r.returncode}')
    if r.stdout != native_stdout:
        problems.append(f'stdout {r.stdout!r}, native {native_stdout!r}')
    if copied != data:
        at = next((i for i, (a, b) in enumerate(zip(copied, data)) if a != b),
                  min(len(copied), len(data)))
        problems.append(f'output file {len(copied)} bytes for {len(data)}, '
                        f'first difference at byte {at}')
    if r.stderr:
        problems.append(f'stderr {r.stderr!r}')
    if len(written) != 1 or os.path.getsize(written[0]) == 0:
        problems.append(f'dumps {written}')
    elif '-mp' in profile:
        # Stacks go on past the allocating frames (the check libunwind
        # makes on stack addresses works): main is on them.
        with open(written[0], errors='replace') as f:
            if 'N=(main)' not in f.read():
                problems.append('no stack reaches main')
    for p in written:
        os.unlink(p)
    os.rmdir(dumps)
    if problems:
        print(f'FAIL: {what}: ' + '; '.join(problems))
        return 1
    print(f'ok: {what}')
    return 0


def main():
    args = sys.argv[1:]
    rounds = 1
    if len(args) == 4 and args[2] == '--rounds' and args[3].isdigit() and int(args[3]) > 0:
        rounds = int(args[3])
        args = args[:2]
    if len(args) != 2:
        sys.exit('usage: fd_untouched.py IGPROF PROGRAM [--rounds N]')
    igprof, program = (os.path.abspath(a) for a in args)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, 'input'), os.path.join(tmp, 'output')
        data = make_input(inp)
        native = run([], program, inp, out, tmp)
        copied = read_output(out)
        if native.returncode != 0 or native.stderr or copied != data:
            print(f'FAIL: native run: exit {native.returncode}, stderr {native.stderr!r}, '
                  f'output {len(copied)} bytes of {len(data)}')
            return 1
        print(native.stdout.decode(), end='')
        for _ in range(rounds):
            for profile in PROFILES:
                for method in METHODS:
                    failures += profiled_run(igprof, program, profile, method, native.stdout,
                                             data, inp, out, tmp)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
