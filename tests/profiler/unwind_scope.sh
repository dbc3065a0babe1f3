#!/usr/bin/env bash
# libigprof.so must not put libunwind's _Unwind_* functions in the program's
# global scope: a C++ runtime loaded later must still throw through libgcc_s.
set -euo pipefail
BIN=$1 PROGS=$2
LIB=$BIN/../lib/igprof/libigprof.so
fail() { echo "FAIL: $*"; exit 1; }

if ldd "$LIB" | grep -q 'libunwind'; then fail "libigprof.so links libunwind: $(ldd "$LIB" | grep libunwind)"; fi
echo "ok: libigprof.so does not link libunwind"

out=$(cd "$(mktemp -d)" && "$BIN/igprof" -mp -o igprof.out "$PROGS/unwindscope" "$PROGS/libcxxplugin.so" 50)
[ "$out" = "caught 50" ] || fail "program output under igprof -mp: '$out'"
echo "ok: 50 exceptions thrown and caught under igprof -mp"

bind=$(cd "$(mktemp -d)" && LD_PRELOAD=$LIB IGPROF='mem' LD_DEBUG=bindings LD_DEBUG_OUTPUT=$PWD/ld \
       "$PROGS/unwindscope" "$PROGS/libcxxplugin.so" 1 >/dev/null && cat ld.* | grep "libstdc++.so.6 .*_Unwind_RaiseException'" || true)
case "$bind" in
  *"to /"*"libgcc_s.so.1"*) echo "ok: libstdc++ binds _Unwind_RaiseException to libgcc_s" ;;
  *) fail "libstdc++'s _Unwind_RaiseException binding: '$bind'" ;;
esac
