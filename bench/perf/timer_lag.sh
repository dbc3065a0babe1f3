#!/bin/sh
# bench/perf/timer_lag.sh [--busy N] [--runs N] [--seconds S]
#
# Builds bench/perf/timer_lag.c and runs it RUNS times for each sampling
# source (a POSIX CPU-time timer, as igprof -pp uses, and a perf_event
# task-clock counter) beside N busy loops, then prints each run and, per
# source, the least and median number of signals against the expected one.
# No profiler is involved: this measures the kernel.
set -eu
busy=0 runs=10 seconds=0.2
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) busy=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: $0 [--busy N] [--runs N] [--seconds S]" >&2; exit 2 ;;
  esac
done
for v in "$busy" "$runs"; do
  case "$v" in ''|*[!0-9]*) echo "timer_lag.sh: --busy and --runs take whole numbers" >&2; exit 2 ;; esac
done
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM
cc -O2 -o "$work/timer_lag" "$here/timer_lag.c"
i=0
while [ "$i" -lt "$busy" ]; do
  sh -c 'while :; do :; done' &
  pids="$pids $!"
  i=$((i + 1))
done
echo "kernel $(uname -r), $(nproc) CPUs, $busy busy loops, load average $(cut -d' ' -f1 /proc/loadavg)"
for source in timer perf; do
  i=0
  while [ "$i" -lt "$runs" ]; do
    "$work/timer_lag" "$source" "$seconds" || break
    i=$((i + 1))
  done > "$work/$source.txt"
  cat "$work/$source.txt"
  sort -n -k3 "$work/$source.txt" | awk -v s="$source" '
    { n[NR] = $3; e = $7 }
    END { if (NR) printf "%s: signals least %d, median %d, expected %d\n", s, n[1], n[int((NR + 1) / 2)], e }'
done
