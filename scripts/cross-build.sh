#!/usr/bin/env bash
# cross-build.sh ARCH PREFIX: build igprof for another architecture and
# install it into PREFIX (PREFIX/bin, PREFIX/lib/igprof: the native layout).
#
# ARCH: arm64, i386 or armhf. The build is the runtime
# (lib/igprof/libigprof.so), igprof, igtrace and igprof-hookcheck; the dumps
# they write are read by the host's igprof-analyse (README.md,
# "Architectures").
#
# The cross compiler, the target's libraries and qemu-user come from
# cross-setup.sh (../shared/scripts, or $IGPROF_CROSS_SETUP), run into the
# cache $IGPROF_CROSS_DIR (default: .cross at the top of the tree).
# Env: IGPROF_CROSS_BUILD_DIR (default build-ARCH), JOBS (default nproc).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: cross-build.sh ARCH PREFIX   (ARCH: arm64, i386, armhf)" >&2; exit 2; }
[ $# -eq 2 ] || usage
ARCH=$1 PREFIX=$2
ME=cross-build.sh
. "$ROOT/scripts/cross-common.sh"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
echo "cross-build.sh: $ARCH build installed in $PREFIX"
