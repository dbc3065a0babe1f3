#!/usr/bin/env bash
# The full set of measurements behind docs/benchmarks.md, in sequence (about 25 minutes on
# the project's 2-core machine; heaptrack's failures on cxx take a while):
# make under -mp and -pp (wall, then CPU), the memory profiler on the shared workloads with
# both walkers and heaptrack, the walker micro-benchmark, the per-process cost, and the CPU
# profiler against perf and gperftools; then the memory profiler's added instructions and
# cache misses on one compile of the make workload, counted under cachegrind.
#
# Usage: bench/all.sh [--build DIR] [--baseline OTHER_BUILD_DIR]
# Needs heaptrack, linux-perf, libgoogle-perftools4 and valgrind (bench only; not in
# scripts/deps.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
BASE=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --baseline) BASE=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "all.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
B=$BUILD/bin/igprof
[ -x "$B" ] || { echo "all.sh: no $B (cmake --build)" >&2; exit 2; }
say() { echo; echo "## $* ($(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"; echo; }
TOOLS=(--tool "igprof -mp=$B -mp -o %o/ig.%p --" --tool "igprof -pp=$B -pp -o %o/ig.%p --")
[ -n "$BASE" ] && TOOLS+=(--tool "baseline -mp=$BASE/bin/igprof -mp -o %o/ig.%p --")
say "make, wall time"
"$ROOT/bench/overhead.sh" --runs 11 --workloads make "${TOOLS[@]}"
say "make, CPU time"
"$ROOT/bench/make_cpu.sh" 5 "mp=$B -mp -o %o/ig.%p --" "pp=$B -pp -o %o/ig.%p --"
say "memory profiler"
"$ROOT/bench/mem/run.sh" --build "$BUILD" --runs 5 --walkers --workloads sqlite,cxx,python,gzip,git
say "stack walker"
"$ROOT/bench/walk/ratios.sh" "$BUILD/bin/walk_bench" 9
say "per process (runtime alone, CPU ms, perf stat -r 40, best of 6 rounds)"
for m in mem perf; do
  best=
  for _ in 1 2 3 4 5 6; do
    v=$(IGPROF="$m igprof:out=/dev/shm/igprof-all.%p" LD_PRELOAD="$BUILD/lib/igprof/libigprof.so" \
        perf stat -r 40 /bin/true 2>&1 | awk '/task-clock/ {print $1}')
    rm -f /dev/shm/igprof-all.*
    best=$(awk -v a="${best:-$v}" -v b="$v" 'BEGIN {print (b < a) ? b : a}')
  done
  echo "$m: $best ms"
done
echo "/bin/true: $(perf stat -r 40 /bin/true 2>&1 | awk '/task-clock/ {print $1}') ms"
say "CPU profiler"
"$ROOT/bench/perf/run.sh" --build "$BUILD" --runs 5 --workloads gzip,xz,sqlite,python
say "memory profiler, counted (cachegrind; cc1 compiling one unit of the make workload)"
"${SHARED:-$ROOT/../shared}/bench/workloads/make.sh" setup
unit=/tmp/peerbench/make/src/u01.c
pre=$(mktemp --suffix=.i)
gcc -O2 -g -E "$unit" -o "$pre"
"$ROOT/bench/cachegrind.sh" --lib "$BUILD/lib/igprof" --top 15 -- \
  "$(gcc -print-prog-name=cc1)" -fpreprocessed -quiet -O2 -g "$pre" -o /dev/null
rm -f "$pre"
