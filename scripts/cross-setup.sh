#!/usr/bin/env bash
# cross-setup.sh ARCH: the cross compiler, the target's libraries (a private
# sysroot) and qemu-user 10 for ARCH, in $IGPROF_CROSS_DIR (default .cross at
# the top of the tree). Idempotent: about a second once set up.
# --binfmt (root) also registers the cache's qemu with the kernel's
# binfmt_misc, so a foreign program that exec()s another runs it.
#
# The recipe is the team's cross-setup.sh next to this checkout
# (../shared/scripts/cross-setup.sh), or the one $IGPROF_CROSS_SETUP names;
# docs/porting.md says what it installs (Debian packages for the cross
# compilers, qemu-user from bookworm-backports unpacked into the cache, no
# foreign architecture added to dpkg).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINFMT=()
if [ "${1:-}" = --binfmt ]; then BINFMT=(--binfmt on --no-check); shift; fi
[ $# -eq 1 ] || { echo "usage: cross-setup.sh [--binfmt] ARCH" >&2; exit 2; }
SETUP=${IGPROF_CROSS_SETUP:-$ROOT/../shared/scripts/cross-setup.sh}
if [ ! -f "$SETUP" ]; then
  echo "cross-setup.sh: no cross-setup recipe at $SETUP (set IGPROF_CROSS_SETUP)" >&2
  exit 2
fi
CACHE=${IGPROF_CROSS_DIR:-$ROOT/.cross}
# zydis for i386: its x86 hook backend decodes with Zydis as on x86_64.
# arm64, i386 and armhf: the real programs their tests profile (sqlite3,
# python3.11, perl, sort) and the shell, coreutils, sed, gzip, tar and xz
# that the tests' command lines run (a host program would not be profiled),
# with their libraries; the allocators e2e.py preloads (jemalloc, tcmalloc,
# mimalloc).
GUEST_PKGS="sqlite3 libsqlite3-0 libreadline8 libtinfo6 python3.11-minimal
            libpython3.11-minimal libexpat1 libssl3
            dash bash coreutils sed gzip tar xz-utils perl-base libcrypt1
            libacl1 libattr1 libgmp10 libselinux1 libpcre2-8-0
            libjemalloc2 libtcmalloc-minimal4 libgoogle-perftools4 libmimalloc2.0"
EXTRA=()
case "$1" in
  i386) EXTRA=(--extra-pkgs "libzydis-dev libzycore-dev libzydis4.0 libzycore1.4 $GUEST_PKGS") ;;
  arm64|armhf) EXTRA=(--extra-pkgs "$GUEST_PKGS") ;;
esac
bash "$SETUP" "$CACHE" -a "$1" -q "${EXTRA[@]}" "${BINFMT[@]}"

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

# The guest's root for programs run through binfmt_misc (a launcher exec()s
# the program it profiles, which qemu-user cannot follow by itself): qemu
# looks up the guest's absolute paths under QEMU_LD_PREFIX first. It is the
# sysroot's /usr and /bin beside one /lib that holds the cross C library and
# the sysroot's own /lib, as links. qemu-user looks a guest's paths up there
# for open and stat but not for execve, so a guest program that runs another
# by name (a shell) finds the guest's only through a PATH that names the
# guest root's directories as host paths (tests/profiler/target.py).
case "$1" in
  arm64) TRIPLET=aarch64-linux-gnu MA=aarch64-linux-gnu LOADER=ld-linux-aarch64.so.1 ;;
  armhf) TRIPLET=arm-linux-gnueabihf MA=arm-linux-gnueabihf LOADER=ld-linux-armhf.so.3 ;;
  i386) TRIPLET=i686-linux-gnu MA=i386-linux-gnu LOADER=ld-linux.so.2 ;;
  *) TRIPLET= ;;
esac
if [ -n "$TRIPLET" ]; then
  GUEST=$CACHE/$1/guest
  SYSROOT=$CACHE/$1/sysroot
  rm -rf "$GUEST.new"
  mkdir -p "$GUEST.new/lib/$MA"
  ln -s ../sysroot/usr "$GUEST.new/usr"
  ln -s ../sysroot/bin "$GUEST.new/bin"
  ln -s "/usr/$TRIPLET/lib/$LOADER" "$GUEST.new/lib/$LOADER"
  for f in "/usr/$TRIPLET/lib/"*.so* "$SYSROOT/lib/$MA/"*; do
    ln -sf "$f" "$GUEST.new/lib/$MA/$(basename "$f")"
  done
  # The guest's loader reads /etc/ld.so.cache, the host's where the guest
  # root has none, and the host's names i386 libraries too (libc6-i386's
  # /lib32, another build of the C library than the cross one: threaded
  # programs then hang). An empty cache is ignored: the loader searches its
  # default directories, the guest root's /lib/<multiarch> first.
  if [ "$1" = i386 ]; then
    mkdir -p "$GUEST.new/etc"
    : >"$GUEST.new/etc/ld.so.cache"
  fi
  rm -rf "$GUEST" && mv "$GUEST.new" "$GUEST"
fi

# binfmt_misc for i386 (the team's recipe registers arm64 and armhf only,
# since kernels with IA-32 emulation run i386 programs themselves): the
# cache's qemu-i386 for every i386 executable, flag F (the interpreter is
# opened now), as for the others. It also takes i386 programs from a kernel
# that could run them (binfmt_misc is asked first); `echo -1 >
# /proc/sys/fs/binfmt_misc/cross-i386` gives them back.
if [ "$1" = i386 ] && [ ${#BINFMT[@]} -gt 0 ]; then
  BM=/proc/sys/fs/binfmt_misc
  [ "$(id -u)" -eq 0 ] || { echo "cross-setup.sh: --binfmt needs root" >&2; exit 2; }
  [ -e "$BM/register" ] || mount -t binfmt_misc binfmt_misc "$BM"
  [ -e "$BM/cross-i386" ] && echo -1 >"$BM/cross-i386"
  printf ':%s:M::%s:%s:%s:F\n' cross-i386 \
    '\x7f\x45\x4c\x46\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x03\x00' \
    '\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' \
    "$CACHE/qemu/bin/qemu-i386" >"$BM/register"
fi
