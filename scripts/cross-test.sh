#!/usr/bin/env bash
# cross-test.sh ARCH: set up the cross tools (cross-setup.sh), build igprof
# for ARCH and run its ctest suite under qemu-user.
#
# ARCH: arm64, i386 or armhf: the whole runtime's suite (hooks, walker,
# igprof/igtrace end to end, sampler, real programs from the target's
# sysroot) with the host's igprof-analyse (the native build's,
# $IGPROF_HOST_BUILD, default build, built first when missing). arm64 and
# armhf run under qemu-aarch64 and qemu-arm through binfmt_misc (registered
# here: root). i386 runs natively where the kernel runs 32-bit x86 programs
# (IA-32 emulation, with libc6-i386's loader: the real machine, real vDSO and
# signal frames, real timing), else under qemu-i386 through binfmt_misc;
# IGPROF_I386_RUN=native|qemu chooses.
# Env: IGPROF_CROSS_BUILD_DIR (default build-ARCH), JOBS (default nproc).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: cross-test.sh ARCH   (ARCH: arm64, i386, armhf)" >&2; exit 2; }
ARCH=$1
ME=cross-test.sh
. "$ROOT/scripts/cross-common.sh"
GUEST="$IGPROF_CROSS_DIR/$ARCH/guest"
SYSROOT="$IGPROF_CROSS_DIR/$ARCH/sysroot"
MODE=qemu
if [ "$ARCH" = i386 ]; then
  MODE=${IGPROF_I386_RUN:-}
  BM=/proc/sys/fs/binfmt_misc
  if [ "$MODE" != qemu ]; then
    # binfmt_misc is asked before the kernel's own loader: our qemu-i386
    # entry (an earlier qemu run) must go for a native run, and for the probe.
    if [ -e "$BM/cross-i386" ]; then
      [ "$(id -u)" -eq 0 ] || { echo "$ME: removing $BM/cross-i386 needs root" >&2; exit 2; }
      echo -1 >"$BM/cross-i386"
    fi
    if "$SYSROOT/bin/true" 2>/dev/null; then
      MODE=native
    elif [ "$MODE" = native ]; then
      echo "$ME: i386 programs do not run natively here (no IA-32 emulation in the kernel, or no /lib/ld-linux.so.2 from libc6-i386)" >&2
      exit 2
    else
      MODE=qemu
    fi
  fi
fi
echo "$ME: $ARCH: running the suite $([ "$MODE" = native ] && echo natively || echo "under qemu-user")" >&2
if [ "$MODE" = native ]; then
  # The guest root names the target's programs (tests/profiler/target.py),
  # which run on the host's i386 C library (libc6-i386) with the
  # sysroot's other libraries; the run wrapper runs test programs so.
  export QEMU_LD_PREFIX="$GUEST" CROSS_RUN_MODE=native
  export LD_LIBRARY_PATH="$SYSROOT/usr/lib/i386-linux-gnu:$SYSROOT/lib/i386-linux-gnu"
  # What a real i386 system finds in its own library directories (the
  # installed runtime's libz and Zydis): tests/install/install_tree.sh.
  export IGPROF_TARGET_LIBRARY_PATH="$LD_LIBRARY_PATH"
else
  # The launchers exec() the programs they profile, which qemu-user cannot
  # follow by itself: the kernel's binfmt_misc runs foreign executables with
  # the cache's qemu (root; kernel-wide until reboot), and QEMU_LD_PREFIX
  # points qemu at the guest's root (cross-setup.sh).
  "$ROOT/scripts/cross-setup.sh" --binfmt "$ARCH"
  export QEMU_LD_PREFIX="$GUEST"
  export CROSS_RUN_MODE=qemu # the run wrapper's default for i386 is native
fi
# Tests a port does not pass yet, named with the reason in
# tests/cross/ARCH-pending.txt (one ctest regex per line, then # reason):
# excluded here and listed, so the rest keeps CI honest while they are fixed.
PENDING=()
LIST="$ROOT/tests/cross/$ARCH-pending.txt"
[ "$MODE" = native ] && LIST="$ROOT/tests/cross/$ARCH-native-pending.txt"
if [ -f "$LIST" ]; then
  names=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$LIST" | paste -sd'|')
  if [ -n "$names" ]; then
    echo "cross-test.sh: $ARCH: not run, pending (see $LIST):" >&2
    sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$LIST" | sed 's/^/  /' >&2
    PENDING=(-E "^($names)\$")
  fi
fi
cd "$BUILD"
ctest "${PENDING[@]}" --output-on-failure -j "$JOBS" -LE slow --timeout 900
