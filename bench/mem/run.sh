#!/usr/bin/env bash
# Overhead of `igprof -mp` against native runs and heaptrack on the shared workloads,
# plus the per-process start-up/dump cost (`igprof -mp /bin/true` vs `/bin/true`).
#
# Usage: bench/mem/run.sh [--build DIR] [--runs N] [--workloads a,b,...] [--no-heaptrack] [--walkers]
# --walkers adds `igprof -mp --unwind libunwind`, to compare the two stack walkers in one run.
# Needs: a build (default build/), the shared workloads (../shared/bench), heaptrack
# (Debian package heaptrack; not in scripts/deps.sh because no ctest needs it).
# Prints markdown tables; figures go into docs/running.md "Overhead".
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
RUNS=5
WORKLOADS=sqlite,cxx,python,gzip,xz,git,make
HEAPTRACK=1
WALKERS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --no-heaptrack) HEAPTRACK=0; shift ;;
    --walkers) WALKERS=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
IGPROF=$BUILD/bin/igprof
[ -x "$IGPROF" ] || { echo "run.sh: $IGPROF not built (cmake --build $BUILD)" >&2; exit 2; }
TOOLS=(--tool "igprof -mp=$IGPROF -mp -o %o/igprof.%p --")
[ "$WALKERS" = 1 ] && TOOLS+=(--tool "-mp --unwind libunwind=$IGPROF -mp --unwind libunwind -o %o/igprof.%p --")
if [ "$HEAPTRACK" = 1 ]; then
  command -v heaptrack >/dev/null || { echo "run.sh: heaptrack not installed (apt-get install heaptrack, or --no-heaptrack)" >&2; exit 2; }
  TOOLS+=(--tool "heaptrack=heaptrack -o %o/ht")
fi

echo "## Wall-time ratio to native (median of $RUNS alternating runs [min-max])"
echo
"$ROOT/bench/overhead.sh" --runs "$RUNS" --workloads "$WORKLOADS" "${TOOLS[@]}"

# Start-up + exit dump cost of one short process, many times over.
echo
echo "## Per-process cost: 200 x /bin/true (median of $RUNS alternating rounds)"
echo
scratch=$(mktemp -d /tmp/igprof-true.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
loop() { local t0 t1; t0=$(date +%s.%N); for _ in $(seq 200); do "$@" >/dev/null; done; t1=$(date +%s.%N)
         awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'; }
nat=(); ig=()
for _ in $(seq "$RUNS"); do
  nat+=("$(loop /bin/true)")
  ig+=("$(cd "$scratch" && loop "$IGPROF" -mp -o "$scratch/t.%p" /bin/true; rm -f "$scratch"/t.*)")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
n=$(med "${nat[@]}"); i=$(med "${ig[@]}")
echo "| | 200 runs, s | per process, ms |"
echo "|---|---|---|"
echo "| /bin/true | $n | $(awk -v x="$n" 'BEGIN{printf "%.2f", x*5}') |"
echo "| igprof -mp /bin/true | $i | $(awk -v x="$i" 'BEGIN{printf "%.2f", x*5}') |"
