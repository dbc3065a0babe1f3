#!/usr/bin/env bash
# Wall-time overhead of the CPU sampler (igprof -pp at the default 200 Hz and
# at 1 kHz) next to `perf record -g` and gperftools' CPU profiler, on the
# shared workloads, through bench/overhead.sh (alternating runs, median of
# per-round ratios to native, min-max).
#
# Usage: bench/perf/run.sh [--build DIR] [--runs N] [--workloads a,b,...] [--cpu]
# --cpu: the same alternation, but ratios of CPU time (user + system of the
# whole process tree, bench/perf/cpu_overhead.py) instead of wall time.
# Needs: linux-perf, libgoogle-perftools4 (see bench/perf/README.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
RUNS=5
WORKLOADS=sqlite,python,gzip,xz,git,make,cxx
CPU=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --cpu) CPU=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
IGPROF=$BUILD/bin/igprof
[ -x "$IGPROF" ] || { echo "run.sh: no $IGPROF; build first (cmake --build $BUILD)" >&2; exit 2; }
LIBPROFILER=$(ls /usr/lib/*/libprofiler.so.0 2>/dev/null | head -1 || true)
TOOLS=(--tool "igprof-pp=$IGPROF -pp -o %o/ig.%p --"
       --tool "igprof-pp-1kHz=$IGPROF -pp -pf 1000 -o %o/ig.%p --")
if command -v perf >/dev/null; then
  TOOLS+=(--tool "perf-record-g=perf record -g -q -o %o/perf.data --")
else
  echo "run.sh: perf not installed; its column is left out" >&2
fi
if [ -n "$LIBPROFILER" ]; then
  # gperftools samples at 100 Hz unless told; 200 Hz matches igprof's default.
  TOOLS+=(--tool "gperftools-200Hz=env CPUPROFILE_FREQUENCY=200 CPUPROFILE=%o/cpu.prof LD_PRELOAD=$LIBPROFILER")
else
  echo "run.sh: libprofiler.so.0 (libgoogle-perftools4) not installed; its column is left out" >&2
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -r), runs=$RUNS"
if [ "$CPU" = 1 ]; then
  exec python3 "$ROOT/bench/perf/cpu_overhead.py" --runs "$RUNS" --workloads "$WORKLOADS" "${TOOLS[@]}"
fi
exec "$ROOT/bench/overhead.sh" --runs "$RUNS" --workloads "$WORKLOADS" "${TOOLS[@]}"
