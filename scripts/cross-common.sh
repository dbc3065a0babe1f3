# Sourced by cross-build.sh and cross-test.sh: check ARCH, set up the cross
# tools (cross-setup.sh), configure and build igprof for ARCH in $BUILD.
# In: ROOT, ARCH, ME (the calling script's name). Out: BUILD, JOBS.
# Env: IGPROF_CROSS_BUILD_DIR (default build-ARCH), JOBS (default nproc),
# IGPROF_CROSS_DIR (the cache, default .cross), CI (warnings are errors).
case "$ARCH" in
  arm64|i386|armhf) ;;
  *) echo "$ME: unknown architecture '$ARCH' (arm64, i386, armhf)" >&2; exit 2 ;;
esac
export IGPROF_CROSS_DIR=${IGPROF_CROSS_DIR:-$ROOT/.cross}
BUILD=${IGPROF_CROSS_BUILD_DIR:-$ROOT/build-$ARCH}
JOBS=${JOBS:-$(nproc)}

"$ROOT/scripts/cross-setup.sh" "$ARCH"
WERROR=OFF
if [ -n "${CI:-}" ]; then WERROR=ON; fi
# Where the runtime is ported (arm64, i386, armhf), the tests read the target's
# dumps with the host's igprof-analyse: the native build's
# ($IGPROF_HOST_BUILD, default build), built here if it is not there yet.
HOST_ARGS=()
if [ "$ARCH" = arm64 ] || [ "$ARCH" = i386 ] || [ "$ARCH" = armhf ]; then
  HOST_BUILD=${IGPROF_HOST_BUILD:-$ROOT/build}
  if [ ! -x "$HOST_BUILD/bin/igprof-analyse" ]; then
    "$ROOT/scripts/deps.sh"
    cmake -S "$ROOT" -B "$HOST_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIGPROF_WERROR="$WERROR" >/dev/null
    cmake --build "$HOST_BUILD" -j "$JOBS" --target igprof-analyse
  fi
  HOST_ARGS=(-DIGPROF_HOST_BIN="$HOST_BUILD/bin")
fi
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-$ARCH.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIGPROF_WERROR="$WERROR" "${HOST_ARGS[@]}" \
      -UIGPROF_HOOK_ONLY -UIGPROF_ANALYSER >/dev/null  # what is ported: from the target (CMakeLists.txt)
cmake --build "$BUILD" -j "$JOBS"
