#!/usr/bin/env bash
# Nanoseconds per malloc+free pair of the shared malloc micro-benchmark
# (../shared/bench/micro/mallocbench.c), natively and under each tool, with 1 and 2 threads.
# Rounds alternate native and the tools (the order rotates from round to round), so slow drifts
# of the machine hit every column alike; the table gives the minimum and the median of the
# program's own ns_per_pair over the rounds.
#
# Usage: bench/mallocbench.sh [--rounds N] [--pairs N] [--shared DIR] --tool 'NAME=command prefix' ...
#   --rounds N   rounds (default 6)
#   --pairs N    pairs per run with one thread (default 2000000; two threads do half each)
#   A tool's prefix is put before the program; %o expands to a scratch directory for its output.
# Example:
#   bench/mallocbench.sh --tool "igprof-mp=build/bin/igprof -mp -o %o/ig.%p --" \
#     --tool "heaptrack=heaptrack -o %o/ht"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
ROUNDS=6
PAIRS=2000000
NAMES=(native)
PREFIXES=("")
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) ROUNDS=$2; shift 2 ;;
  --pairs) PAIRS=$2; shift 2 ;;
  --shared) SHARED=$2; shift 2 ;;
  --tool)
    NAMES+=("${2%%=*}")
    PREFIXES+=("${2#*=}")
    shift 2 ;;
  -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
  *) echo "mallocbench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
SRC=$SHARED/bench/micro/mallocbench.c
[ -f "$SRC" ] || { echo "mallocbench.sh: no $SRC (--shared DIR)" >&2; exit 2; }
case $ROUNDS$PAIRS in *[!0-9]*) echo "mallocbench.sh: --rounds and --pairs take numbers" >&2; exit 2 ;; esac
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -g -pthread -o "$WORK/mallocbench" "$SRC"

# One run: prints the program's ns_per_pair.
run() { # prefix threads pairs
  local out dir="$WORK/out.$RANDOM"
  mkdir -p "$dir"
  local prefix=${1//%o/$dir}
  # shellcheck disable=SC2086 # the prefix is a command line
  out=$($prefix "$WORK/mallocbench" "$2" "$3" 2>/dev/null) ||
    { echo "mallocbench.sh: failed: $1 mallocbench $2 $3" >&2; exit 1; }
  rm -rf "$dir"
  sed -n 's/.*ns_per_pair=\([0-9.]*\).*/\1/p' <<<"$out"
}

for threads in 1 2; do
  pairs=$((PAIRS / threads))
  declare -A got=()
  for ((r = 0; r < ROUNDS; r++)); do
    for ((k = 0; k < ${#NAMES[@]}; k++)); do
      i=$(((k + r) % ${#NAMES[@]}))
      v=$(run "${PREFIXES[$i]}" "$threads" "$pairs") # a failed run ends the script here (set -e)
      [ -n "$v" ] || { echo "mallocbench.sh: no ns_per_pair from '${NAMES[$i]}'" >&2; exit 1; }
      got[$i]+="$v "
    done
  done
  echo "mallocbench $threads $pairs: ns per malloc+free pair, min / median of $ROUNDS rounds"
  for ((i = 0; i < ${#NAMES[@]}; i++)); do
    python3 -c 'import statistics, sys; v = [float(x) for x in sys.argv[2:]]; print(f"  {sys.argv[1]:<14} {min(v):8.0f} / {statistics.median(v):.0f}")' \
      "${NAMES[$i]}" ${got[$i]}
  done
  unset got
done
