#!/usr/bin/env bash
# Runs walk_bench N times and prints, per row, the median ns of both walkers and the median of
# the per-run ratios unw_backtrace / fast walker [min-max]: ratios within one run are steadier
# than ns across runs on a shared machine.
#
# Usage: bench/walk/ratios.sh [WALK_BENCH=build/bin/walk_bench] [N=9]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$ROOT/build/bin/walk_bench}
N=${2:-9}
[ -x "$BIN" ] || { echo "ratios.sh: no $BIN (cmake --build build)" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$N"); do
  "$BIN" | grep -E '^\| [0-9]' | awk -F'|' '{printf "%s %s ", $3, $4} END {print ""}' >> "$out"
done
python3 - "$out" <<'P'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
names = ["%s, depth %d" % (s, d) for s in ("same stack", "two chains", "nothing to reuse")
         for d in (10, 30, 100)]
for j, n in enumerate(names):
    f = [r[2 * j] for r in rows]; u = [r[2 * j + 1] for r in rows]
    rat = sorted(b / a for a, b in zip(f, u))
    print("%-24s fast %4.0f ns  unw_backtrace %4.0f ns  ratio %.2f [%.2f-%.2f]"
          % (n, statistics.median(f), statistics.median(u), statistics.median(rat), rat[0], rat[-1]))
P
