#!/bin/sh
# hook.hookcheck_usage: igprof-hookcheck's bad input gives a clear message and
# exit status 2; --help goes to stdout with status 0; -v lists hooked functions;
# --far takes the absolute-jump patch.
set -u
hc=$1
fail=0
expect() { # expect STATUS PATTERN STREAM -- args
  want=$1 pattern=$2 stream=$3
  shift 4
  out=$("$hc" "$@" 2>/tmp/hookcheck_usage.$$.err)
  st=$?
  err=$(cat /tmp/hookcheck_usage.$$.err)
  rm -f /tmp/hookcheck_usage.$$.err
  if [ "$stream" = out ]; then text=$out; else text=$err; fi
  if [ "$st" -ne "$want" ] || ! printf '%s\n' "$text" | grep -q -- "$pattern"; then
    echo "FAIL: igprof-hookcheck $*: status $st (want $want), $stream:"; printf '%s\n' "$text"
    fail=1
  else
    echo "ok: igprof-hookcheck $*"
  fi
}
expect 2 "usage: igprof-hookcheck" err --
expect 2 "cannot load: /nonexistent/libx.so" err -- /nonexistent/libx.so
expect 2 "unknown option -q" err -- -q libz.so.1
expect 2 "cannot load: /etc/hostname" err -- /etc/hostname
expect 0 "usage: igprof-hookcheck" out -- --help
expect 0 "^  hooked crc32 (" out -- -v libz.so.1
expect 0 "^libz.so.1: hookable 88 of 88 (100.0%)" out -- libz.so.1
# every hook on the absolute-jump patch: the 14 functions shorter than it drop out
expect 0 "^libz.so.1: hookable 74 of 74 (100.0%)" out -- --far libz.so.1
expect 0 "^  hooked crc32_z (14 bytes patched)" out -- --far -v libz.so.1
expect 2 "unknown option --near" err -- --far --near libz.so.1
exit $fail
