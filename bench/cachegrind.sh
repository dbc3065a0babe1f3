#!/usr/bin/env bash
# Counts, instead of timing, what a profiler mode adds to one program: the program runs natively
# and under libigprof (LD_PRELOAD, as igprof sets it up) inside valgrind's cachegrind, and the
# script prints the instructions, L1 data misses and last-level data misses of both runs and, per
# function, what the profiled run added. The counts are the same from run to run, so a change
# of a few per cent shows, where wall or CPU time on a shared machine varies by +-30%.
# Cachegrind models no hardware prefetcher: misses on data read in sequence are overstated.
#
# Usage: bench/cachegrind.sh [--lib DIR] [--mode 'mem'] [--top N] [--out DIR] -- program [args...]
#   --lib DIR   directory holding libigprof.so (default: build/lib/igprof)
#   --mode M    the runtime's module options (default: mem, i.e. igprof -mp)
#   --out DIR   keep the cachegrind files there (default: a temporary directory)
# Needs valgrind (scripts/deps.sh installs it). The program runs about 50 times slower.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIB=$ROOT/build/lib/igprof
MODE=mem
TOP=25
OUT=
while [ $# -gt 0 ]; do
  case $1 in
  --lib) LIB=$2; shift 2 ;;
  --mode) MODE=$2; shift 2 ;;
  --top) TOP=$2; shift 2 ;;
  --out) OUT=$2; shift 2 ;;
  --) shift; break ;;
  *) echo "cachegrind.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 2; }
command -v valgrind >/dev/null || { echo "cachegrind.sh: valgrind is not installed" >&2; exit 2; }
[ -f "$LIB/libigprof.so" ] || { echo "cachegrind.sh: no $LIB/libigprof.so" >&2; exit 2; }
if [ -z "$OUT" ]; then
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"
# The machine's caches as cachegrind would guess them can be odd in a VM: a fixed model instead.
CG=(valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64 --LL=1048576,16,64)
"${CG[@]}" --cachegrind-out-file="$OUT/native.cg" "$@" > "$OUT/native.log" 2>&1 ||
  { echo "cachegrind.sh: the native run failed, see $OUT/native.log" >&2; exit 1; }
# --smc-check=all: the hook engine patches code that valgrind has already translated.
IGPROF="$MODE igprof:out=$OUT/dump.%p" "${CG[@]}" --smc-check=all --trace-children=yes \
  --cachegrind-out-file="$OUT/profiled.cg" env LD_PRELOAD="$LIB/libigprof.so" "$@" \
  > "$OUT/profiled.log" 2>&1 ||
  { echo "cachegrind.sh: the profiled run failed, see $OUT/profiled.log" >&2; exit 1; }
python3 - "$OUT/native.cg" "$OUT/profiled.cg" "$TOP" <<'P'
import collections, sys

def load(path):
    events, fl, fn = None, '?', '?'
    per = collections.defaultdict(lambda: collections.Counter())
    for line in open(path):
        if line.startswith('events:'):
            events = line.split()[1:]
        elif line.startswith('fl='):
            fl = line[3:].strip().rsplit('/', 1)[-1]
        elif line.startswith('fn='):
            fn = line[3:].strip()
        elif line[:1].isdigit():
            vals = line.split()[1:]
            c = per[fl + ':' + fn]
            for e, v in zip(events, vals):
                c[e] += int(v)
    return per

native, prof = load(sys.argv[1]), load(sys.argv[2])
cols = [('Ir', 'instructions'), ('D1mr', 'L1d read misses'), ('DLmr', 'LL read misses'),
        ('D1mw', 'L1d write misses'), ('DLmw', 'LL write misses')]
tot = lambda per, e: sum(c[e] for c in per.values())
print('%-18s %16s %16s %16s %8s' % ('', 'native', 'profiled', 'added', 'ratio'))
for e, name in cols:
    a, b = tot(native, e), tot(prof, e)
    print('%-18s %16s %16s %16s %8.3f' % (name, f'{a:,}', f'{b:,}', f'{b - a:,}', b / a if a else 0))
rows = []
for k in set(native) | set(prof):
    a, b = native.get(k, collections.Counter()), prof.get(k, collections.Counter())
    rows.append((b['Ir'] - a['Ir'], [b[e] - a[e] for e, _ in cols], k))
rows.sort(key=lambda r: -abs(r[0]))
print('\nadded, by function (file:function)\n%16s %12s %12s %12s %12s  %s'
      % ('instructions', 'L1d rd miss', 'LL rd miss', 'L1d wr miss', 'LL wr miss', 'function'))
for _, d, k in rows[:int(sys.argv[3])]:
    print('%16s %12s %12s %12s %12s  %s' % (*[f'{x:,}' for x in d], k[:90]))
P
