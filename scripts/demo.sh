#!/usr/bin/env bash
# Demo: install dependencies, build, profile examples/sample with `igprof -mp`,
# and print its MEM_LIVE (what is still allocated at exit: the leaks) and
# MEM_TOTAL (everything allocated) reports with igprof-analyse.
# Env: BUILD_DIR (default build), JOBS (default: nproc).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

"$ROOT/scripts/deps.sh"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target igprof igprof_runtime igprof-analyse sample >/dev/null

OUT=$(mktemp -d /tmp/igprof-demo.XXXXXX)
echo "== igprof -mp $BUILD_DIR/examples/sample"
"$BUILD_DIR/bin/igprof" -mp -o "$OUT/igprof.sample.%p" "$BUILD_DIR/examples/sample"
DUMP=$(ls "$OUT"/igprof.sample.*)
echo "== dump: $DUMP ($(wc -l < "$DUMP") lines)"
echo
echo "== igprof-analyse -r MEM_LIVE (bytes still allocated at exit, per function)"
"$BUILD_DIR/bin/igprof-analyse" -r MEM_LIVE "$DUMP"
echo
echo "== igprof-analyse -r MEM_TOTAL (all bytes allocated, per function)"
"$BUILD_DIR/bin/igprof-analyse" -r MEM_TOTAL "$DUMP"
rm -rf "$OUT"
