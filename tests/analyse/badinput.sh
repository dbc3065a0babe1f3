#!/bin/sh
# badinput.sh EXPECTED_STDERR COMMAND...: COMMAND must exit 1, print nothing on
# stdout and print exactly EXPECTED_STDERR (one line) on stderr.
exp=$1; shift
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" > "$out" 2> "$err"
rc=$?
[ $rc -eq 1 ] || { echo "FAIL: exit status $rc, expected 1"; cat "$err"; exit 1; }
[ -s "$out" ] && { echo "FAIL: stdout not empty:"; head -5 "$out"; exit 1; }
printf '%s\n' "$exp" | diff -u - "$err" || { echo "FAIL: stderr differs"; exit 1; }
exit 0
