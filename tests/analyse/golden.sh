#!/bin/sh
# golden.sh [--stdin FILE] EXPECTED COMMAND...: COMMAND must exit 0, print
# nothing on stderr and print exactly the contents of EXPECTED on stdout.
in=/dev/null
if [ "$1" = --stdin ]; then in=$2; shift 2; fi
exp=$1; shift
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" < "$in" > "$out" 2> "$err"
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: exit status $rc"; cat "$err"; exit 1; fi
if [ -s "$err" ]; then echo "FAIL: unexpected stderr:"; cat "$err"; exit 1; fi
diff -u "$exp" "$out" || { echo "FAIL: output differs from $exp"; exit 1; }
