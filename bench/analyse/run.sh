#!/bin/sh
# Time and peak RSS of igprof-analyse on dumps with one million distinct leaf
# stacks (3.3 million tree nodes): a program-like call graph, and the worst
# case where nearly every tree edge is a distinct caller/callee pair.
# Usage: bench/analyse/run.sh [BUILD_DIR]   (default: build)
# With IGPROF_REF=/path/to/IgProf's igprof-analyse (built from IgProf's source),
# also times IgProf's analyser on the same (uncompressed) dump and checks that
# both text reports are identical.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
bin=$build/bin/igprof-analyse
tmp=${TMPDIR:-/tmp}/igprof-analyse-bench
mkdir -p "$tmp"
for mode in callgraph random; do
  dump=$tmp/$mode.dump.gz
  if [ ! -f "$dump" ]; then
    python3 "$here/gen_dump.py" "$tmp/$mode.dump" 10 6 3 20000 "$mode"
    gzip -f -1 "$tmp/$mode.dump"
  fi
  echo "== $mode: $(gzip -dc "$dump" | wc -l) lines, $(gzip -dc "$dump" | grep -c ' V0') leaf stacks, $(wc -c < "$dump") bytes gzipped"
  for opts in "" "-r MEM_LIVE" "--sqlite $tmp/out.sql3" "--top 10" "--flame"; do
    rm -f "$tmp/out.sql3"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e s wall  %U s user  %S s sys  %M KiB peak RSS  igprof-analyse $opts ($mode)" "$bin" $opts "$dump" > "$tmp/out.txt"
    echo "   report: $(wc -c < "$tmp/out.txt") bytes"
  done
done
if [ -n "${IGPROF_REF:-}" ]; then
  gzip -dc "$tmp/callgraph.dump.gz" > "$tmp/callgraph.dump"
  /usr/bin/time -f "%e s wall  %U s user  %S s sys  %M KiB peak RSS  IgProf igprof-analyse (callgraph, plain)" \
    "$IGPROF_REF" "$tmp/callgraph.dump" > "$tmp/ref.txt"
  /usr/bin/time -f "%e s wall  %U s user  %S s sys  %M KiB peak RSS  igprof-analyse (callgraph, plain)" \
    "$bin" "$tmp/callgraph.dump" > "$tmp/out.txt"
  cmp -s "$tmp/ref.txt" "$tmp/out.txt" && echo "   text reports identical" || echo "   text reports DIFFER"
  rm -f "$tmp/callgraph.dump" "$tmp/ref.txt"
fi
rm -f "$tmp/out.txt" "$tmp/out.sql3"
