#!/usr/bin/env python3
"""The profiler owns no file descriptor the program can see or reuse.

walk_fd_program lists its descriptors at start and at the end, closes all
above 2, puts its own files on 3, 4 and 5 and copies an input file to an
output file through them, while allocating from frames libunwind can only
step by frame pointer (run-time code without unwind information) and
spinning in such code. Under -mp, -pp and -mp -pp, with each stack walker,
its output must be the native run's, byte for byte: the same descriptor
lists, the output file equal to the input, exit status 0, nothing on stderr
(libunwind in use: no warning that it is not), and one dump written.

usage: fd_untouched.py IGPROF PROGRAM
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


def run(prefix, program, inp, out, tmp):
    if os.path.exists(out):
        os.unlink(out)
    return subprocess.run(prefix + [program, inp, out, SPIN], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp)


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: fd_untouched.py IGPROF PROGRAM')
    igprof, program = (os.path.abspath(a) for a in sys.argv[1:3])
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, 'input'), os.path.join(tmp, 'output')
        data = make_input(inp)
        native = run([], program, inp, out, tmp)
        with open(out, 'rb') as f:
            copied = f.read()
        if native.returncode != 0 or native.stderr or copied != data:
            print(f'FAIL: native run: exit {native.returncode}, stderr {native.stderr!r}, '
                  f'output {len(copied)} bytes of {len(data)}')
            return 1
        print(native.stdout.decode(), end='')
        for profile in PROFILES:
            for method in METHODS:
                what = ' '.join(profile + ['--unwind', method])
                dumps = os.path.join(tmp, 'dumps')
                os.mkdir(dumps)
                r = run([igprof] + profile + ['--unwind', method, '-o',
                                              os.path.join(dumps, 'ig.%p'), '--'],
                        program, inp, out, tmp)
                with open(out, 'rb') as f:
                    copied = f.read()
                written = glob.glob(os.path.join(dumps, 'ig.*'))
                problems = []
                if r.returncode != 0:
                    problems.append(f'exit status {r.returncode}')
                if r.stdout != native.stdout:
                    problems.append(f'stdout {r.stdout!r}, native {native.stdout!r}')
                if copied != data:
                    at = next((i for i, (a, b) in enumerate(zip(copied, data)) if a != b),
                              min(len(copied), len(data)))
                    problems.append(f'output file {len(copied)} bytes for {len(data)}, '
                                    f'first difference at byte {at}')
                if r.stderr:
                    problems.append(f'stderr {r.stderr!r}')
                if len(written) != 1 or os.path.getsize(written[0]) == 0:
                    problems.append(f'dumps {written}')
                for p in written:
                    os.unlink(p)
                os.rmdir(dumps)
                if problems:
                    failures += 1
                    print(f'FAIL: {what}: ' + '; '.join(problems))
                else:
                    print(f'ok: {what}')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
