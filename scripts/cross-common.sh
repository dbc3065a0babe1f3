# Sourced by cross-build.sh and cross-test.sh: check ARCH, set up the cross
# tools (cross-setup.sh), configure and build igprof for ARCH in $BUILD.
# In: ROOT, ARCH, ME (the calling script's name). Out: BUILD, JOBS.
# Env: IGPROF_CROSS_BUILD_DIR (default build-ARCH), JOBS (default nproc),
# IGPROF_CROSS_DIR (the cache, default .cross), CI (warnings are errors).
case "$ARCH" in
  arm64|i386) ;;
  armhf) echo "$ME: $ARCH is not ported yet (issue 15)" >&2; exit 2 ;;
  *) echo "$ME: unknown architecture '$ARCH' (arm64, i386)" >&2; exit 2 ;;
esac
export IGPROF_CROSS_DIR=${IGPROF_CROSS_DIR:-$ROOT/.cross}
BUILD=${IGPROF_CROSS_BUILD_DIR:-$ROOT/build-$ARCH}
JOBS=${JOBS:-$(nproc)}

"$ROOT/scripts/cross-setup.sh" "$ARCH"
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-$ARCH.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIGPROF_WERROR="$WERROR" >/dev/null
cmake --build "$BUILD" -j "$JOBS"
