#!/usr/bin/env bash
# CPU time (user + system of every process) and wall time of the shared make workload,
# natively and under each tool, rounds alternating; dumps go to a fresh tmpfs directory.
#
# Usage: bench/make_cpu.sh RUNS 'NAME=command prefix' ...   (%o in a prefix: the scratch dir)
# Prints, per tool, each round's "cpu_s/wall_s", then the medians and their ratios to native.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
[ $# -ge 2 ] || { sed -n '2,7p' "$0"; exit 2; }
RUNS=$1; shift
"$SHARED/bench/workloads/make.sh" setup
CMD=$("$SHARED/bench/workloads/make.sh" cmd)
SCRATCH=$(mktemp -d /dev/shm/igprof-make.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
declare -A R
TOOLS=("native=" "$@")
for _ in $(seq "$RUNS"); do
  for t in "${TOOLS[@]}"; do
    name=${t%%=*}; prefix=${t#*=}; d=$(mktemp -d "$SCRATCH/run.XXXXXX")
    r=$( { /usr/bin/time -f "%U %S %e" bash -c "${prefix//%o/$d} $CMD" >/dev/null; } 2>&1 | tail -1 |
         awk '{printf "%.2f/%.2f", $1 + $2, $3}')
    R[$name]+="$r "
    rm -rf "$d"
  done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ncpu=$(echo "${R[native]}" | tr ' ' '\n' | cut -d/ -f1 | med)
nwall=$(echo "${R[native]}" | tr ' ' '\n' | cut -d/ -f2 | med)
for t in "${TOOLS[@]}"; do
  name=${t%%=*}
  cpu=$(echo "${R[$name]}" | tr ' ' '\n' | cut -d/ -f1 | med)
  wall=$(echo "${R[$name]}" | tr ' ' '\n' | cut -d/ -f2 | med)
  printf '%-12s rounds %s | median CPU %s s (%.2fx), wall %s s (%.2fx)\n' "$name" "${R[$name]}" \
    "$cpu" "$(awk -v a="$cpu" -v b="$ncpu" 'BEGIN{print a/b}')" "$wall" "$(awk -v a="$wall" -v b="$nwall" 'BEGIN{print a/b}')"
done
