#!/bin/sh
# hook.coverage: igprof-hookcheck must hook at least FLOOR percent of the
# exported functions of each library.
# Usage: coverage.sh [--emulator RUN] [--far] HOOKCHECK LIB=FLOOR...
# (RUN: the cross build's qemu wrapper, which runs HOOKCHECK; --far is passed
# to HOOKCHECK: every hook takes the absolute-jump patch)
set -u
emulator=
far=
if [ "$1" = --emulator ]; then emulator=$2; shift 2; fi
if [ "$1" = --far ]; then far=--far; shift; fi
hookcheck=$1
shift
libs=
for arg in "$@"; do libs="$libs ${arg%%=*}"; done
# shellcheck disable=SC2086
out=$($emulator "$hookcheck" $far $libs) || { echo "igprof-hookcheck failed ($?)"; exit 1; }
printf '%s\n' "$out"
status=0
for arg in "$@"; do
  lib=${arg%%=*} floor=${arg#*=}
  line=$(printf '%s\n' "$out" | grep "^$lib: hookable ")
  if [ -z "$line" ]; then
    echo "FAIL: no summary line for $lib"; status=1; continue
  fi
  # "LIB: hookable N of M (P%)": recompute P from N and M rather than trust it
  echo "$line" | awk -v floor="$floor" -v lib="$lib" '{
    n = $3; m = $5; p = $6; gsub(/[(%)]/, "", p);
    if (m < 50) { print "FAIL: " lib ": only " m " functions found"; exit 1 }
    q = 100.0 * n / m;
    if (sprintf("%.1f", q) != p) { print "FAIL: " lib ": printed " p "% but " n "/" m " is " q; exit 1 }
    if (q < floor) { print "FAIL: " lib ": " q "% < " floor "%"; exit 1 }
    print "ok: " lib " " q "% >= " floor "%" }' || status=1
done
exit $status
