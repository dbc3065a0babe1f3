#!/usr/bin/env bash
# The i386 runtime's wall-time overhead, natively, against the x86_64 one in
# the same run: -mp and -pp on the shared workloads whose programs the i386
# guest root has (sqlite3, gzip, xz), each workload run as i386 programs
# under the i386 build and as the host's x86_64 programs under the native
# build (bench/overhead.sh: medians of per-round ratios to a native run).
#
# Needs a kernel that runs 32-bit x86 programs (IA-32 emulation) and root
# (cross-test.sh takes i386 programs back from qemu-i386's binfmt_misc
# entry; scripts/cross-setup.sh i386 sets up the sysroot and libc6-i386).
#
# Usage: bench/i386.sh [--runs N] [--workloads sqlite,gzip,xz]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=5
WORKLOADS=sqlite,gzip,xz
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "i386.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
CROSS=${IGPROF_CROSS_DIR:-$ROOT/.cross}
HOST=${IGPROF_HOST_BUILD:-$ROOT/build}
PREFIX=$(mktemp -d /tmp/igprof-i386.XXXXXX)
trap 'rm -rf "$PREFIX"' EXIT
"$ROOT/scripts/cross-build.sh" i386 "$PREFIX" >/dev/null
[ -x "$HOST/bin/igprof" ] || { cmake -S "$ROOT" -B "$HOST" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null; cmake --build "$HOST" -j "$(nproc)" >/dev/null; }
BM=/proc/sys/fs/binfmt_misc/cross-i386
[ -e "$BM" ] && echo -1 >"$BM"
SYSROOT=$CROSS/i386/sysroot
"$SYSROOT/bin/true" 2>/dev/null || { echo "i386.sh: i386 programs do not run natively on this machine" >&2; exit 2; }
for p in sqlite3 gzip xz; do
  command -v "$p" >/dev/null || { echo "i386.sh: the host has no $p for the x86_64 column" >&2; exit 2; }
done

echo "== i386 (programs from the i386 guest root, run natively)"
for p in sqlite3 gzip xz; do file -L "$(PATH=$CROSS/i386/guest/usr/bin:$CROSS/i386/guest/bin command -v $p)" | sed 's/,.*//'; done
PATH="$CROSS/i386/guest/usr/bin:$CROSS/i386/guest/bin:$PATH" \
LD_LIBRARY_PATH="$SYSROOT/usr/lib/i386-linux-gnu:$SYSROOT/lib/i386-linux-gnu" \
  "$ROOT/bench/overhead.sh" --runs "$RUNS" --workloads "$WORKLOADS" \
    --tool "i386-mp=$PREFIX/bin/igprof -mp -o %o/ig.%p --" \
    --tool "i386-pp=$PREFIX/bin/igprof -pp -o %o/ig.%p --"
echo "== x86_64 (the host's programs, the native build)"
"$ROOT/bench/overhead.sh" --runs "$RUNS" --workloads "$WORKLOADS" \
  --tool "x86_64-mp=$HOST/bin/igprof -mp -o %o/ig.%p --" \
  --tool "x86_64-pp=$HOST/bin/igprof -pp -o %o/ig.%p --"
