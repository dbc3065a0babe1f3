# Cross build for armhf (32-bit ARM, hard-float ABI, Thumb-2 by default)
# Linux; tests run under qemu-arm. What is ported: the hook engine and its
# tests (docs/porting.md).
#
#   scripts/cross-setup.sh armhf
#   cmake -S . -B build-armhf -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-armhf.cmake
#
# (scripts/cross-test.sh armhf does both and runs ctest; see
# toolchain-common.cmake for where the compilers and libraries come from.)
set(IGPROF_CROSS_ARCH armhf)
set(IGPROF_CROSS_TRIPLET arm-linux-gnueabihf)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)
include(${CMAKE_CURRENT_LIST_DIR}/toolchain-common.cmake)
