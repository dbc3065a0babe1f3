# Cross build for arm64 (AArch64) Linux; tests run under qemu-aarch64.
#
#   scripts/cross-setup.sh arm64
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm64.cmake
#
# (scripts/cross-test.sh arm64 does both and runs ctest; see
# toolchain-common.cmake for where the compilers and libraries come from.)
set(IGPROF_CROSS_ARCH arm64)
set(IGPROF_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/toolchain-common.cmake)
