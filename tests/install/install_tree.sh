#!/usr/bin/env bash
# Install the build into a scratch prefix, then profile and analyse the sample program with
# the installed tools only (no LD_LIBRARY_PATH, run from an unrelated directory).
# usage: install_tree.sh CMAKE BUILD SAMPLE [ANALYSER]
# ANALYSER: a cross build's tree has no igprof-analyse; the host's reads its dump.
set -euo pipefail
CMAKE=$1 BUILD=$2 SAMPLE=$3 HOST_ANALYSER=${4:-}
P=$(mktemp -d /tmp/igprof-install.XXXXXX)
trap 'rm -rf "$P"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$P/prefix" >/dev/null
WANT="bin/igprof bin/igtrace bin/igprof-hookcheck lib/igprof/libigprof.so"
[ -n "$HOST_ANALYSER" ] || WANT="$WANT bin/igprof-analyse"
for f in $WANT; do
  [ -e "$P/prefix/$f" ] || fail "missing $f in the installed tree"
done
echo "ok: installed tree has bin/ and lib/igprof/"

mkdir "$P/run" && cd "$P/run"
unset LD_LIBRARY_PATH LD_PRELOAD
# A cross build run natively (scripts/cross-test.sh i386 on an x86_64
# kernel): the target system's own library directories, where a real i386
# system has the runtime's libraries (libz, Zydis) installed.
if [ -n "${IGPROF_TARGET_LIBRARY_PATH:-}" ]; then export LD_LIBRARY_PATH=$IGPROF_TARGET_LIBRARY_PATH; fi
out=$("$P/prefix/bin/igprof" -mp -z -o sample.gz "$SAMPLE")
[ "$out" = "$("$SAMPLE")" ] || fail "sample's output differs under the installed igprof"
[ -s sample.gz ] || fail "no dump written by the installed igprof"
echo "ok: installed igprof ran the program and wrote sample.gz"

# grow_array reallocs 18 times (i = 0, 1, 2, 4, ..., 65536): 4 * (2^18 - 1) bytes in all.
ANALYSER=${HOST_ANALYSER:-$P/prefix/bin/igprof-analyse}
line=$("$ANALYSER" -r MEM_TOTAL sample.gz | grep -m1 ' grow_array \[' || true)
read -r pct total calls name rank <<< "$line"
[ "$total" = "1'048'572" ] && [ "$calls" = "18" ] || fail "grow_array in the installed analyser's report: '$line'"
echo "ok: installed igprof-analyse: grow_array 1'048'572 bytes in 18 calls"
