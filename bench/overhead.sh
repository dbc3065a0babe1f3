#!/usr/bin/env bash
# Wall-time overhead of profilers on the shared workloads, against native runs.
#
# Usage: bench/overhead.sh [--runs N] [--workloads a,b,...] [--shared DIR] [--keep] [--cpu-rss]
#                          --tool 'NAME=command prefix' [--tool ...]
#
# For every workload: one warm-up round (not counted), then N rounds. In a round the native
# command and each tool run alternately (native, tool1, tool2, ...), so slow drifts of the
# machine hit every column alike. A tool's ratio for a round is its wall time divided by the
# native wall time of the same round; the table gives the median of those ratios and their
# min-max, plus the median native wall seconds. With --cpu-rss, every run is timed by
# /usr/bin/time too, and two more tables follow: the same ratios of CPU time (user + system,
# the program and its children), and the median maximum resident set size in MB (native, then
# each tool with its ratio to native).
#
# In a tool's command prefix, %o expands to a fresh scratch directory for that run's output
# (removed after the run unless --keep). Example:
#   bench/overhead.sh --runs 5 --workloads sqlite,make \
#     --tool "igprof-mp=build/bin/igprof -mp -o %o/ig.%p --" \
#     --tool "heaptrack=heaptrack -o %o/ht"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
RUNS=5
WORKLOADS=sqlite,cxx,python,gzip,xz,git,make
KEEP=0
CPU_RSS=0
TOOLS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --shared) SHARED=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --cpu-rss) CPU_RSS=1; shift ;;
    --tool) TOOLS+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "overhead.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "${#TOOLS[@]}" -gt 0 ] || { echo "overhead.sh: give at least one --tool NAME=PREFIX" >&2; exit 2; }
if [ "$CPU_RSS" = 1 ] && [ ! -x /usr/bin/time ]; then
  echo "overhead.sh: --cpu-rss needs /usr/bin/time (Debian package time)" >&2; exit 2
fi
case "$RUNS" in ''|*[!0-9]*) echo "overhead.sh: --runs needs a number" >&2; exit 2 ;; esac
SCRATCH=$(mktemp -d /tmp/igprof-bench.XXXXXX)
trap '[ "$KEEP" = 1 ] || rm -rf "$SCRATCH"' EXIT

now() { date +%s.%N; }

# run_one PREFIX WORKLOAD -> prints wall seconds (with --cpu-rss: wall seconds, CPU seconds,
# max RSS in KB); fails loudly if the command fails.
run_one() {
  local prefix=$1 wl=$2 out cmd t0 t1 rc timer=""
  out=$(mktemp -d "$SCRATCH/run.XXXXXX")
  prefix=${prefix//%o/$out}
  cmd=$("$SHARED/bench/workloads/$wl.sh" cmd)
  [ "$CPU_RSS" = 1 ] && timer="/usr/bin/time -f '%U %S %M' -o $out/.time"
  prefix="$timer $prefix"
  t0=$(now)
  set +e
  ( while IFS= read -r e; do [ -n "$e" ] && export "$e"; done < <("$SHARED/bench/workloads/$wl.sh" env)
    cd "$out" && eval "$prefix $cmd" >/dev/null 2>"$out/.stderr" )
  rc=$?
  set -e
  t1=$(now)
  if [ $rc -ne 0 ]; then
    echo "overhead.sh: '$prefix' on $wl exited $rc; stderr tail:" >&2
    tail -5 "$out/.stderr" >&2
    echo "FAIL"
  else
    if [ "$CPU_RSS" = 1 ]; then
      echo "$t0 $t1 $(tail -1 "$out/.time")" | awk '{ printf "%.4f %.4f %d\n", $2 - $1, $3 + $4, $5 }'
    else
      echo "$t0 $t1" | awk '{ printf "%.4f\n", $2 - $1 }'
    fi
  fi
  [ "$KEEP" = 1 ] || rm -rf "$out"
}

median_minmax() { # reads numbers on stdin
  sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) { print "-"; exit }
    m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "%.2f [%.2f–%.2f]", m, a[1], a[NR] }'
}

header="| workload | native s |"
sep="|---|---|"
for t in "${TOOLS[@]}"; do header+=" ${t%%=*} |"; sep+="---|"; done
echo "$header"; echo "$sep"

median() { sort -g | awk '{a[NR]=$1} END {printf "%.2f", (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }
CPU_ROWS=()
RSS_ROWS=()

IFS=, read -r -a WLS <<< "$WORKLOADS"
for wl in "${WLS[@]}"; do
  [ -x "$SHARED/bench/workloads/$wl.sh" ] || { echo "overhead.sh: no workload '$wl'" >&2; exit 2; }
  "$SHARED/bench/workloads/$wl.sh" setup >/dev/null
  declare -A ratios=() cpu_ratios=() rss=()
  natives="" native_cpu="" native_rss=""
  for round in $(seq 0 "$RUNS"); do
    n=$(run_one "" "$wl")
    read -r n nc nr <<< "$n"
    for i in "${!TOOLS[@]}"; do
      t=$(run_one "${TOOLS[$i]#*=}" "$wl")
      read -r t tc tr <<< "$t"
      if [ "$round" -gt 0 ]; then
        if [ "$t" = FAIL ] || [ "$n" = FAIL ]; then ratios[$i]+="FAIL "; cpu_ratios[$i]+="FAIL "
        else
          ratios[$i]+="$(ratio "$t" "$n") "
          [ "$CPU_RSS" = 1 ] && cpu_ratios[$i]+="$(ratio "$tc" "$nc") " && rss[$i]+="$tr "
        fi
      fi
    done
    if [ "$round" -gt 0 ]; then
      natives+="$n "
      [ "$CPU_RSS" = 1 ] && [ "$n" != FAIL ] && native_cpu+="$nc " && native_rss+="$nr "
    fi
  done
  row="| $wl | $(echo $natives | tr ' ' '\n' | grep -v FAIL | median) |"
  for i in "${!TOOLS[@]}"; do
    if [[ "${ratios[$i]}" == *FAIL* ]]; then row+=" FAILS |"
    else row+=" $(echo ${ratios[$i]} | tr ' ' '\n' | median_minmax) |"; fi
  done
  echo "$row"
  if [ "$CPU_RSS" = 1 ]; then
    nrss=$(echo $native_rss | tr ' ' '\n' | median)
    crow="| $wl | $(echo $native_cpu | tr ' ' '\n' | median) |"
    rrow="| $wl | $(awk -v k="$nrss" 'BEGIN { printf "%.0f", k / 1024 }') |"
    for i in "${!TOOLS[@]}"; do
      if [[ "${cpu_ratios[$i]}" == *FAIL* ]]; then crow+=" FAILS |"; rrow+=" FAILS |"; continue; fi
      crow+=" $(echo ${cpu_ratios[$i]} | tr ' ' '\n' | median_minmax) |"
      trss=$(echo ${rss[$i]} | tr ' ' '\n' | median)
      rrow+=" $(awk -v k="$trss" -v n="$nrss" 'BEGIN { printf "%.0f (%.2f)", k / 1024, k / n }') |"
    done
    CPU_ROWS+=("$crow")
    RSS_ROWS+=("$rrow")
  fi
  unset ratios cpu_ratios rss
done
if [ "$CPU_RSS" = 1 ]; then
  echo
  echo "CPU time (user + system), ratio to native:"
  echo "${header/native s/native CPU s}"; echo "$sep"
  printf '%s\n' "${CPU_ROWS[@]}"
  echo
  echo "Maximum resident set size, MB (ratio to native):"
  echo "${header/native s/native MB}"; echo "$sep"
  printf '%s\n' "${RSS_ROWS[@]}"
fi
