# Cross build for i386 (32-bit x86) Linux with the i686 cross compiler.
# Tests run through the cache's run wrapper: under qemu-i386 by default,
# directly with CROSS_RUN_MODE=native in the environment of ctest, on a
# kernel that runs 32-bit programs (kernels built without IA-32 emulation
# answer "Exec format error").
#
#   scripts/cross-setup.sh i386
#   cmake -S . -B build-i386 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-i386.cmake
#
# (scripts/cross-test.sh i386 does both and runs ctest; see
# toolchain-common.cmake for where the compilers and libraries come from.)
set(IGPROF_CROSS_ARCH i386)
set(IGPROF_CROSS_TRIPLET i686-linux-gnu)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_LIBRARY_ARCHITECTURE i386-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/toolchain-common.cmake)
