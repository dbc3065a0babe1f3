#!/usr/bin/env python3
"""Cost of one sample of the CPU sampler, in microseconds of the sampled
thread's CPU time, and what it makes at a given rate.

Runs tests/perf's `cputest ratio` (fixed work; it prints the thread CPU time
its two burners took) natively and under `igprof -pr -pf 10000` (a wall-clock
timer, so 10000 signals a second really arrive; a CPU-time timer is checked
only on the kernel tick), alternating, and takes the minimum of each: the
difference divided by the number of signals the profiled run received is
the cost of one sample (signal delivery, handler, stack walk of a 3-frame
stack, tree update, sigreturn). The minimum is the run least disturbed by
other jobs on the machine. `cputest ratio-timer` does the same with an empty
handler of its own: the part of the cost that is the kernel's (and, in a
VM, the hypervisor's timer interrupt), which no sampler can avoid.

Usage: sample_cost.py [--build DIR] [--runs N] [--rate HZ] [--unwind fast|libunwind]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def burn_cpu(out):
    w = out.split()
    return float(w[1]) + float(w[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--runs', type=int, default=7)
    ap.add_argument('--rate', type=int, default=10000)
    ap.add_argument('--unwind', choices=('fast', 'libunwind'), help='stack walker (default: the runtime\'s)')
    a = ap.parse_args()
    igprof = os.path.join(a.build, 'bin', 'igprof')
    cputest = os.path.join(a.build, 'tests', 'perf', 'progs', 'cputest')
    for f in (igprof, cputest):
        if not os.access(f, os.X_OK):
            sys.exit(f'sample_cost.py: no {f}; build the igprof and perf_cputest targets')
    native, profiled, signals, empty, empty_signals = [], [], [], [], []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(a.runs):
            native.append(burn_cpu(subprocess.run([cputest, 'ratio'], capture_output=True, text=True,
                                                  check=True).stdout))
            walker = ['--unwind', a.unwind] if a.unwind else []
            r = subprocess.run([igprof, '-d', *walker, '-pr', '-pf', str(a.rate), '-o', os.path.join(work, 'd.%p'),
                                cputest, 'ratio'], capture_output=True, text=True, check=True)
            profiled.append(burn_cpu(r.stdout))
            e = subprocess.run([cputest, 'ratio-timer', str(a.rate)], capture_output=True, text=True, check=True)
            empty.append(burn_cpu(e.stdout))
            empty_signals.append(int(e.stderr.split()[-1]) / max(empty[-1], 1e-9))
            m = re.search(r'perf: (\d+) samples', r.stderr)
            signals.append(int(m.group(1)) / max(profiled[-1], 1e-9) if m else 0)
            for f in glob.glob(os.path.join(work, 'd.*')):
                os.unlink(f)
    # signals per second of the burners' time, taken from the profiled runs
    rate = sorted(signals)[len(signals) // 2]
    best_native, best_profiled = min(native), min(profiled)
    per_signal_us = (best_profiled - best_native) / (best_profiled * rate) * 1e6
    print(f'native burn CPU min {best_native:.4f}s, profiled min {best_profiled:.4f}s '
          f'({a.runs} runs each), {rate:.0f} signals/s')
    empty_rate = sorted(empty_signals)[len(empty_signals) // 2]
    empty_us = (min(empty) - best_native) / (min(empty) * empty_rate) * 1e6
    print(f'cost of one sample: {per_signal_us:.2f} us of the thread\'s CPU time; of which timer '
          f'interrupt + signal delivery + sigreturn to an empty handler: {empty_us:.2f} us')
    for hz in (200, 1000):
        print(f'  at {hz} Hz: {per_signal_us * hz / 1e4:.3f}% of CPU time')


if __name__ == '__main__':
    main()
