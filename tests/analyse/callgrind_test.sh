#!/bin/sh
# The --callgrind output is read by valgrind's own callgrind_annotate, which
# finds the same self and inclusive costs as the text report of mem.dump.
set -eu
analyse=$1 annotate=$2 dump=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$analyse" --callgrind "$out" "$dump"
self=$("$annotate" "$out" | grep -E 'PROGRAM TOTALS|prog:(bar|foo)$')
incl=$("$annotate" --inclusive=yes "$out" | grep -E 'prog:(main|bar|foo)$')
expect_self='1,212 (100.0%)  PROGRAM TOTALS
1,100 (90.76%)  /usr/bin/prog:bar
  111 ( 9.16%)  /usr/bin/prog:foo'
expect_incl='1,212 (100.0%)  /usr/bin/prog:main
1,132 (93.40%)  /usr/bin/prog:bar
  111 ( 9.16%)  /usr/bin/prog:foo'
[ "$self" = "$expect_self" ] || { echo "self costs differ:"; echo "$self"; exit 1; }
[ "$incl" = "$expect_incl" ] || { echo "inclusive costs differ:"; echo "$incl"; exit 1; }
echo ok
