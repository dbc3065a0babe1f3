#!/usr/bin/env bash
# The installed bash completion: registered for every tool (complete -p),
# options read from the installed tools' --help, option arguments, and after
# the program igprof runs, the program's own completion (file names here,
# without the bash-completion package's _command_offset).
# usage: install_completion.sh CMAKE BUILD
set -euo pipefail
CMAKE=$1 BUILD=$2
P=$(mktemp -d /tmp/igprof-completion.XXXXXX)
trap 'rm -rf "$P"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$P/prefix" >/dev/null
DIR=$P/prefix/share/bash-completion/completions
TOOLS="igprof igtrace igprof-analyse igprof-navigator igprof-hookcheck"
for t in $TOOLS; do
  [ -f "$DIR/$t" ] || fail "no completion file $DIR/$t (bash-completion loads it by the command's name)"
done
echo "ok: completion files for $TOOLS"

mkdir "$P/cwd" && cd "$P/cwd" && touch hello.txt
# In a fresh bash: load the file as bash-completion would, then complete
# the words given (the last one being completed) and print the candidates.
complete_words() {
  env -i PATH="$P/prefix/bin:/usr/bin:/bin" HOME="$P" bash --norc --noprofile -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
    _igprof_complete "$1"
    printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$DIR/igprof" "$@"
}
expect() {
  local want=$1; shift
  local got
  got=$(complete_words "$@" | tr '\n' ' ')
  [ "$got" = "$want " ] || fail "completing '$*': got '$got', expected '$want '"
  echo "ok: '$*' -> $want"
}

registered=$(env -i PATH="$P/prefix/bin:/usr/bin:/bin" bash --norc --noprofile -c 'source "$1"; complete -p' _ "$DIR/igprof")
for t in $TOOLS; do
  grep -qx "complete -F _igprof_complete $t" <<<"$registered" || fail "complete -p has no line for $t: $registered"
done
echo "ok: complete -p: _igprof_complete for each tool"

expect "--memory-mappings --memory-overhead --memory-profiler" igprof --memory
expect "-mm -mo -mp" igprof -m
expect "--dump-at-peak --dump-flag --dump-signal" igprof --dump
expect "--version" igprof --vers
expect "--stack" igtrace --st
expect "--value --verbose --version" igprof-analyse --v
expect "MEM_LIVE MEM_MAX MEM_PEAK MEM_TOTAL" igprof-analyse -r MEM_
expect "peak" igprof-analyse --value p
expect "ascending" igprof-analyse --order a
expect "--port" igprof-navigator --po
expect "--far" igprof-hookcheck --f
expect "hello.txt" igprof -o hel
expect "hello.txt" igprof-analyse hel
# A number, a name: nothing to offer.
expect "" igprof -pf 2
# The program: a command, -o's argument skipped; after it, the program's arguments.
got=$(complete_words igprof -mp -o out.gz ech)
grep -qx echo <<<"$got" || fail "completing the program after -o FILE: no echo in '$got'"
echo "ok: 'igprof -mp -o out.gz ech' -> a command (echo among $(wc -l <<<"$got"))"
expect "hello.txt" igprof -mp echo hel
expect "hello.txt" igprof -- echo hel
got=$(complete_words igtrace -tm -- ech)
grep -qx echo <<<"$got" || fail "completing the program after --: no echo in '$got'"
echo "ok: 'igtrace -tm -- ech' -> a command"

# With the bash-completion package (scripts/deps.sh installs it), the
# program's arguments are completed as the program's: here igtrace's own.
BASH_COMPLETION=/usr/share/bash-completion/bash_completion
[ -f "$BASH_COMPLETION" ] || fail "no $BASH_COMPLETION: install bash-completion (scripts/deps.sh)"
got=$(env -i PATH="$P/prefix/bin:/usr/bin:/bin" HOME="$P" bash --norc --noprofile -c '
  source "$1" && source "$2"; shift 2
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  _igprof_complete "$1" 2>/dev/null   # compopt: no real completion running
  printf "%s\n" "${COMPREPLY[@]}"' _ "$BASH_COMPLETION" "$DIR/igprof" igprof -mp -- igtrace --st)
[ "$got" = "--stack" ] || fail "completing 'igprof -mp -- igtrace --st' with bash-completion: '$got'"
echo "ok: with bash-completion, 'igprof -mp -- igtrace --st' -> --stack (igtrace's completion)"
