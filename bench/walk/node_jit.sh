#!/usr/bin/env bash
# Wall time of node allocating from JIT-compiled JavaScript, natively and under igprof -mp:
# every Buffer.alloc(SIZE) of 4 KiB or more mallocs from a stack whose inner frames are V8's
# JIT code and embedded builtins (no unwind information; the fast walker steps them by frame
# pointer). Rounds alternate native and profiled runs; prints one line per run.
#
# Usage: bench/walk/node_jit.sh [--igprof PATH] [--rounds N] [COUNT [SIZE...]]
#   defaults: build/bin/igprof, 3 rounds, COUNT 300000, SIZE 64 4096
# Needs node (Debian package nodejs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IGPROF=$ROOT/build/bin/igprof
ROUNDS=3
while [ $# -gt 0 ]; do
  case $1 in
  --igprof) IGPROF=$2; shift 2 ;;
  --rounds) ROUNDS=$2; shift 2 ;;
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  *) break ;;
  esac
done
COUNT=${1:-300000}
[ $# -gt 0 ] && shift
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(64 4096)
command -v node >/dev/null || { echo "node_jit.sh: node is not installed" >&2; exit 2; }
[ -x "$IGPROF" ] || { echo "node_jit.sh: no $IGPROF" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
seconds() { # command...: wall seconds
  local t0=$EPOCHREALTIME
  "$@" >/dev/null
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }'
}
for size in "${SIZES[@]}"; do
  js="for(let i=0;i<$COUNT;i++)Buffer.alloc($size)"
  for r in $(seq "$ROUNDS"); do
    n=$(seconds node -e "$js")
    p=$(seconds "$IGPROF" -mp -o "$TMP/ig.%p" -- node -e "$js")
    rm -f "$TMP"/ig.*
    printf 'Buffer.alloc(%s) x %s, round %s: native %.2f s, -mp %.2f s\n' "$size" "$COUNT" "$r" "$n" "$p"
  done
done
