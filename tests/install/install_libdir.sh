#!/usr/bin/env bash
# An install with a LIBDIR two levels deep (Debian's multiarch layout,
# -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu): the launchers find the
# runtime there, nothing lands in lib/igprof, and the pkg-config file and
# CMake package go under that LIBDIR. Then the same with an absolute LIBDIR
# (-DCMAKE_INSTALL_LIBDIR=PREFIX/lib64, as some distributions pass it).
# Configures and builds other trees (launchers, runtime, igprof-hookcheck
# only; the analyser is this build's).
# usage: install_libdir.sh CMAKE SOURCE_DIR BIN SAMPLE
set -euo pipefail
CMAKE=$1 SRC=$2 BIN=$3 SAMPLE=$4
LIBDIR=lib/x86_64-linux-gnu
P=$(mktemp -d /tmp/igprof-libdir.XXXXXX)
trap 'rm -rf "$P"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$CMAKE" -S "$SRC" -B "$P/build" -DCMAKE_INSTALL_LIBDIR=$LIBDIR -DIGPROF_ANALYSER=OFF -DIGPROF_HOST_BIN="$BIN" \
  -DIGPROF_SANITIZE=OFF >"$P/configure.log" 2>&1 || { cat "$P/configure.log"; fail "configure"; }
"$CMAKE" --build "$P/build" -j2 --target igprof igtrace igprof_runtime igprof-hookcheck >"$P/build.log" 2>&1 ||
  { tail -50 "$P/build.log"; fail "build"; }
"$CMAKE" --install "$P/build" --prefix "$P/prefix" >/dev/null
for f in bin/igprof bin/igtrace bin/igprof-hookcheck $LIBDIR/igprof/libigprof.so $LIBDIR/pkgconfig/igprof.pc \
         $LIBDIR/cmake/igprof/igprofConfig.cmake; do
  [ -e "$P/prefix/$f" ] || fail "missing $f in the installed tree"
done
[ ! -e "$P/prefix/lib/igprof" ] || fail "lib/igprof exists with LIBDIR=$LIBDIR"
runpath=$(readelf -d "$P/prefix/bin/igprof-hookcheck" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[ "$runpath" = "\$ORIGIN/../$LIBDIR/igprof" ] || fail "igprof-hookcheck's RUNPATH: '$runpath'"
echo "ok: LIBDIR=$LIBDIR: runtime, igprof.pc and the CMake package under it; RUNPATH $runpath"

mkdir "$P/run" && cd "$P/run"
unset LD_LIBRARY_PATH LD_PRELOAD
out=$("$P/prefix/bin/igprof" -mp -o sample.dump "$SAMPLE")
[ "$out" = "$("$SAMPLE")" ] || fail "sample's output differs under the installed igprof"
line=$("$BIN/igprof-analyse" -r MEM_TOTAL sample.dump | grep -m1 ' grow_array \[' || true)
read -r pct total calls name rank <<< "$line"
[ "$total" = "1'048'572" ] && [ "$calls" = "18" ] || fail "grow_array in the report: '$line'"
echo "ok: the installed igprof found $LIBDIR/igprof/libigprof.so: grow_array 1'048'572 bytes in 18 calls"
out=$("$P/prefix/bin/igtrace" -tm "$SAMPLE" 2>&1 >/dev/null | grep -c '^\*\*\* MALLOC' || true)
[ "$out" -gt 0 ] || fail "the installed igtrace traced no MALLOC"
echo "ok: the installed igtrace traced $out MALLOC lines"
mv "$P/prefix" "$P/moved"
out=$("$P/moved/bin/igprof" -mp -o moved.dump "$SAMPLE")
[ -s moved.dump ] || fail "no dump from a moved install"
echo "ok: the install still works moved elsewhere"

# An absolute LIBDIR under the configured prefix.
ABS=$P/abs
"$CMAKE" -S "$SRC" -B "$P/build-abs" -DCMAKE_INSTALL_PREFIX="$ABS" -DCMAKE_INSTALL_LIBDIR="$ABS/lib64" \
  -DIGPROF_ANALYSER=OFF -DIGPROF_HOST_BIN="$BIN" -DIGPROF_SANITIZE=OFF >"$P/configure-abs.log" 2>&1 ||
  { cat "$P/configure-abs.log"; fail "configure with an absolute LIBDIR"; }
"$CMAKE" --build "$P/build-abs" -j2 --target igprof igtrace igprof_runtime igprof-hookcheck >"$P/build-abs.log" 2>&1 ||
  { tail -50 "$P/build-abs.log"; fail "build with an absolute LIBDIR"; }
"$CMAKE" --install "$P/build-abs" >/dev/null
for f in bin/igprof lib64/igprof/libigprof.so lib64/pkgconfig/igprof.pc lib64/cmake/igprof/igprofConfig.cmake; do
  [ -e "$ABS/$f" ] || fail "absolute LIBDIR: missing $f"
done
[ "$(PKG_CONFIG_PATH=$ABS/lib64/pkgconfig pkg-config --cflags igprof | sed 's/ *$//')" = "-I$ABS/include" ] ||
  fail "absolute LIBDIR: igprof.pc's --cflags: $(PKG_CONFIG_PATH=$ABS/lib64/pkgconfig pkg-config --cflags igprof)"
out=$("$ABS/bin/igprof" -mp -o abs.dump "$SAMPLE")
line=$("$BIN/igprof-analyse" -r MEM_TOTAL abs.dump | grep -m1 ' grow_array \[' || true)
read -r pct total calls name rank <<< "$line"
[ "$total" = "1'048'572" ] && [ "$calls" = "18" ] || fail "absolute LIBDIR: grow_array in the report: '$line'"
echo "ok: LIBDIR=$ABS/lib64 (absolute): the installed igprof found lib64/igprof/libigprof.so, igprof.pc there"
