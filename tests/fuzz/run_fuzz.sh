#!/bin/sh
# run_fuzz.sh FUZZER SOURCE_DIR SECONDS: seed a fresh corpus with the test dumps
# and the hostile shapes of tests/fuzz/corpus (deep, wide, 64-bit limits),
# each behind several option bytes (the target's first input byte selects reader
# options and the report), then fuzz for SECONDS.
set -eu
fuzzer=$1 src=$2 seconds=$3
rm -rf corpus && mkdir corpus
for f in "$src"/tests/analyse/data/*.dump "$src"/tests/analyse/data/*.gz "$src"/tests/analyse/data/bad/* \
         "$src"/tests/fuzz/corpus/*; do
  for b in 000 021 052 103 124 145 013 162 175; do
    { printf "\\$b"; cat "$f"; } > "corpus/$b-$(basename "$f")"
  done
done
ASAN_OPTIONS=detect_leaks=0 exec "$fuzzer" -dict="$src/tests/fuzz/dump.dict" -max_total_time="$seconds" \
  -timeout=10 -rss_limit_mb=1024 -close_fd_mask=2 -print_final_stats=1 corpus
