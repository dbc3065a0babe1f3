#!/usr/bin/env bash
# cross-setup.sh ARCH: the cross compiler, the target's libraries (a private
# sysroot) and qemu-user 10 for ARCH, in $IGPROF_CROSS_DIR (default .cross at
# the top of the tree). Idempotent: about a second once set up.
#
# The recipe is the team's cross-setup.sh next to this checkout
# (../shared/scripts/cross-setup.sh), or the one $IGPROF_CROSS_SETUP names;
# docs/porting.md says what it installs (Debian packages for the cross
# compilers, qemu-user from bookworm-backports unpacked into the cache, no
# foreign architecture added to dpkg).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: cross-setup.sh ARCH" >&2; exit 2; }
SETUP=${IGPROF_CROSS_SETUP:-$ROOT/../shared/scripts/cross-setup.sh}
if [ ! -f "$SETUP" ]; then
  echo "cross-setup.sh: no cross-setup recipe at $SETUP (set IGPROF_CROSS_SETUP)" >&2
  exit 2
fi
CACHE=${IGPROF_CROSS_DIR:-$ROOT/.cross}
# zydis for i386: its x86 hook backend decodes with Zydis as on x86_64
EXTRA=()
if [ "$1" = i386 ]; then EXTRA=(--extra-pkgs "libzydis-dev libzycore-dev libzydis4.0 libzycore1.4"); fi
bash "$SETUP" "$CACHE" -a "$1" -q "${EXTRA[@]}"

# The C++ cross compiler and libstdc++ (test programs that call operator new
# and hookcheck's libstdc++ coverage): Debian packages, installed if missing.
case "$1" in
  arm64) CXXPKG=g++-aarch64-linux-gnu ;;
  armhf) CXXPKG=g++-arm-linux-gnueabihf ;;
  i386) CXXPKG=g++-i686-linux-gnu ;;
esac
if ! dpkg-query -W -f='${Status}' "$CXXPKG" 2>/dev/null | grep -q 'install ok installed'; then
  echo "cross-setup.sh: installing $CXXPKG" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq --no-install-recommends "$CXXPKG" >/dev/null ||
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "$CXXPKG" >/dev/null; }
fi
