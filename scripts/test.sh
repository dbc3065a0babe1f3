#!/usr/bin/env bash
# Install dependencies if missing, configure, build, run the whole ctest suite.
# Env: BUILD_DIR (default build), JOBS (default: nproc), IGPROF_SLOW=1 to include "slow" tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

"$ROOT/scripts/deps.sh"
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIGPROF_WERROR="$WERROR" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"

EXCLUDE=()
if [ -z "${IGPROF_SLOW:-}" ]; then EXCLUDE=(-LE slow); fi
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "${EXCLUDE[@]}" --timeout 600
