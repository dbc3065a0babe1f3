#!/usr/bin/env bash
# Install every build and test dependency from Debian packages.
# Idempotent: when everything is present it only runs dpkg-query and exits.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libzydis-dev            # x86 instruction decoder for the hook engine
  libcapstone-dev         # independent arm64 disassembler: verifies the AArch64 relocator (tests)
  libunwind-dev           # DWARF stack-walking fallback
  zlib1g-dev              # -z dumps and .gz input
  libelf-dev libdw-dev    # symbols, lines and inline frames in igprof-analyse
  libsqlite3-dev sqlite3  # --sqlite reports; sqlite3 is also a real-program test
  libmicrohttpd-dev       # igprof-navigator's HTTP server
  libpcre2-dev            # -mr / -ma regular expressions
  g++ clang libclang-rt-14-dev   # C++ test programs; libFuzzer and sanitizers
  python3 perl make gzip xz-utils git gawk   # real programs run under the profiler in tests
  libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev   # -mp with other allocators (tests)
  golang-go               # a cgo program under the profiler (tests)
  valgrind                # ms_print reads igprof-analyse --massif output (tests); bench/cachegrind.sh
  man-db groff-base bsdextrautils   # the installed man pages are rendered by man and col in install.tree
  bash-completion         # install.completion: the program's own completion after igprof's options
  chromium                # the HTML report and the navigator are loaded in headless Chromium (tests)
  python3-jsonschema jq   # --json output checked against docs/analyse-json.schema.json and read by jq (tests)
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo "deps.sh: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
