#!/usr/bin/env bash
# The installed application API: a program built against the installed tree,
# once with pkg-config (igprof.pc) and once with CMake's find_package(igprof),
# runs alone as without igprof, and under the installed igprof each call of
# include/igprof/igprof.h takes effect.
# usage: install_api.sh CMAKE BUILD SOURCE_DIR CC
set -euo pipefail
CMAKE=$1 BUILD=$2 SRC=$3 CC=$4
P=$(mktemp -d /tmp/igprof-api.XXXXXX)
trap 'rm -rf "$P"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$P/prefix" >/dev/null
PREFIX=$P/prefix
[ -f "$PREFIX/include/igprof/igprof.h" ] || fail "no include/igprof/igprof.h"
PC=$(find "$PREFIX" -name igprof.pc)
[ -n "$PC" ] || fail "no igprof.pc installed"
CONFIG=$(find "$PREFIX" -name igprofConfig.cmake)
[ -n "$CONFIG" ] || fail "no igprofConfig.cmake installed"
echo "ok: installed ${PC#$PREFIX/} and ${CONFIG#$PREFIX/}"

# pkg-config: the prefix in the .pc file is the install's.
export PKG_CONFIG_PATH=$(dirname "$PC")
[ "$(pkg-config --modversion igprof)" = "$("$PREFIX/bin/igprof" --version | sed 's/.* //')" ] ||
  fail "igprof.pc's version $(pkg-config --modversion igprof) is not igprof --version's"
cflags=$(pkg-config --cflags igprof | sed 's/ *$//')
[ "$cflags" = "-I$PREFIX/include" ] || fail "pkg-config --cflags igprof: '$cflags'"
# shellcheck disable=SC2046
"$CC" -O1 -g -Wall -Wextra -Werror $(pkg-config --cflags igprof) -o "$P/user_pc" "$SRC/tests/install/api_user.c" \
  $(pkg-config --libs igprof) || fail "cannot build with pkg-config"
echo "ok: built with pkg-config ($cflags $(pkg-config --libs igprof))"

# find_package(igprof): the tree's own CMake package.
"$CMAKE" -S "$SRC/tests/install/api_project" -B "$P/cmake-build" -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_FLAGS="-O1 -g -Wall -Wextra -Werror" >"$P/cmake.log" 2>&1 ||
  { cat "$P/cmake.log"; fail "find_package(igprof) did not configure"; }
"$CMAKE" --build "$P/cmake-build" >"$P/build.log" 2>&1 || { cat "$P/build.log"; fail "cannot build with find_package"; }
cp "$P/cmake-build/api_user" "$P/user_cmake"
echo "ok: built with find_package(igprof) (igprof::api)"

cd "$P"
unset LD_PRELOAD IGPROF
for prog in user_pc user_cmake; do
  if readelf -d "$prog" | grep -q 'NEEDED.*igprof'; then fail "$prog links libigprof"; fi
  out=$("./$prog" "$P/$prog.dump")
  [ "$out" = $'active 0\ndisable: was 0\ndump_now -1\ndisable: was 0' ] || fail "$prog alone printed: $out"
  [ ! -e "$P/$prog.dump" ] || fail "$prog alone wrote a dump"
  echo "ok: $prog alone: not active, dump_now -1, disable 0"

  out=$("$PREFIX/bin/igprof" -pp -o "$P/$prog.final" "./$prog" "$P/$prog.dump")
  [ "$out" = $'active 1\ndisable: was 1\ndump_now 0\ndisable: was 1' ] || fail "$prog under igprof printed: $out"
  [ -s "$P/$prog.dump" ] || fail "igprof_dump_now wrote no $prog.dump"
  # The checkpoint dump: samples in burn_enabled (0.3 s at 200 Hz is about 60),
  # none in burn_disabled, which ran with sampling off.
  report=$("$PREFIX/bin/igprof-analyse" -g -r PERF_TICKS "$P/$prog.dump" 2>&1)
  enabled=$(grep -m1 -E ' burn_enabled \[[0-9]+\]' <<<"$report" | awk '{print $2}')
  [ -n "$enabled" ] && [ "$(awk -v s="$enabled" 'BEGIN { print (s >= 0.15) }')" = 1 ] ||
    fail "$prog: burn_enabled's seconds in the checkpoint dump: '$enabled' (report: $(head -c 2000 <<<"$report"))"
  if grep -q ' burn_disabled ' <<<"$report"; then fail "$prog: burn_disabled was sampled with sampling off"; fi
  echo "ok: $prog under igprof: active, dump_now wrote $prog.dump, burn_enabled ${enabled} s, burn_disabled none"
done
