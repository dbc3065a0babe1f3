#!/usr/bin/env bash
# Install the build into a scratch prefix, then profile and analyse the sample program with
# the installed tools only (no LD_LIBRARY_PATH, run from an unrelated directory).
# Then what else an install holds: --version on every tool (the project's
# version), a man page per tool (rendered by man without warnings, naming
# every option of the tool's --help), the documentation the --help texts
# name, under share/doc/igprof.
# usage: install_tree.sh CMAKE BUILD SAMPLE VERSION [ANALYSER]
# ANALYSER: a cross build's tree has no igprof-analyse; the host's reads its dump.
set -euo pipefail
CMAKE=$1 BUILD=$2 SAMPLE=$3 VERSION=$4 HOST_ANALYSER=${5:-}
P=$(mktemp -d /tmp/igprof-install.XXXXXX)
trap 'rm -rf "$P"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$P/prefix" >/dev/null
TOOLS="igprof igtrace igprof-hookcheck"
[ -n "$HOST_ANALYSER" ] || TOOLS="$TOOLS igprof-analyse igprof-navigator"
WANT="lib/igprof/libigprof.so"
for t in $TOOLS; do WANT="$WANT bin/$t share/man/man1/$t.1"; done
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

for t in $TOOLS; do
  v=$("$P/prefix/bin/$t" --version)
  [ "$v" = "$t (igprof) $VERSION" ] || fail "$t --version: '$v', expected '$t (igprof) $VERSION'"
done
echo "ok: --version of $TOOLS: (igprof) $VERSION"

# Man pages: no warnings from man (groff), every option of --help named.
for t in $TOOLS; do
  page=$P/prefix/share/man/man1/$t.1
  warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "man $t: $warnings"
  text=$(MANWIDTH=200 man -l "$page" 2>/dev/null | col -b)
  grep -q "^NAME" <<<"$text" && grep -q "^SYNOPSIS" <<<"$text" && grep -q "^EXIT STATUS" <<<"$text" ||
    fail "man $t: no NAME, SYNOPSIS or EXIT STATUS section"
  options=$("$P/prefix/bin/$t" --help | sed -n 's/^[[:space:]]\{1,\}//p' |
            grep -oE '(^|[[:space:],])--?[A-Za-z][-A-Za-z0-9]*' | sed 's/^[[:space:],]//' | sort -u)
  n=0
  for o in $options; do
    grep -qE -- "(^|[^-A-Za-z0-9])$o([^-A-Za-z0-9]|\$)" <<<"$text" ||
      fail "option $o of '$t --help' is not in its man page (packaging/man/$t.1)"
    n=$((n + 1))
  done
  [ "$n" -ge 3 ] || fail "$t --help: only $n options found"
done
echo "ok: man pages render without warnings and name every option of --help"

# What --help and the man pages point to is installed: NAME.md in
# share/doc/igprof, NAME(1) in share/man/man1.
DOC=$P/prefix/share/doc/igprof
for f in README.md running.md cpu-profiling.md igtrace.md analyse.md dump-format.md hook-engine.md; do
  [ -s "$DOC/$f" ] || fail "missing share/doc/igprof/$f"
done
for t in $TOOLS; do
  refs=$( { "$P/prefix/bin/$t" --help; MANWIDTH=200 man -l "$P/prefix/share/man/man1/$t.1" 2>/dev/null | col -b; } |
          grep -oE '[A-Za-z0-9_./-]+\.md|[a-z][-a-z]+\(1\)' | sort -u)
  for r in $refs; do
    case $r in
      *'(1)') page=${r%(1)}
              case $page in env|timeout) continue ;; esac   # the system's
              [ -f "$P/prefix/share/man/man1/$page.1" ] || fail "$t names $r: no share/man/man1/$page.1" ;;
      *) [ -f "$DOC/${r##*/}" ] || fail "$t names $r: no share/doc/igprof/${r##*/}"
         case $r in docs/*|*/docs/*) fail "$t names $r, a path of the source tree" ;; esac ;;
    esac
  done
done
echo "ok: every NAME.md and NAME(1) that --help and the man pages name is installed"
