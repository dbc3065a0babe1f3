# Cross build for arm64 (AArch64) Linux with Debian's cross compiler, the
# cross libc in /usr/aarch64-linux-gnu (libc6-dev-arm64-cross) and the
# sysroot and qemu-aarch64 that /work/shared/scripts/cross-setup.sh (see
# docs/hook-engine.md) puts in a cache directory: IGPROF_CROSS_DIR, by
# default .cross at the top of the source tree. Tests run under qemu through
# the cache's run wrapper (CMAKE_CROSSCOMPILING_EMULATOR), so plain ctest
# works in the build directory.
#
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm64.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
find_program(IGPROF_CROSS_CXX aarch64-linux-gnu-g++)
if(IGPROF_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${IGPROF_CROSS_CXX})
endif()

if(DEFINED ENV{IGPROF_CROSS_DIR})
  set(IGPROF_CROSS_DIR "$ENV{IGPROF_CROSS_DIR}")
else()
  get_filename_component(IGPROF_CROSS_DIR "${CMAKE_CURRENT_LIST_DIR}/../.cross" ABSOLUTE)
endif()
set(IGPROF_CROSS_SYSROOT "${IGPROF_CROSS_DIR}/arm64/sysroot")
if(NOT EXISTS "${IGPROF_CROSS_DIR}/arm64/bin/run")
  message(FATAL_ERROR "toolchain-arm64: no ${IGPROF_CROSS_DIR}/arm64/bin/run; run "
                      "cross-setup.sh ${IGPROF_CROSS_DIR} -a arm64 first, or set IGPROF_CROSS_DIR")
endif()

# Libraries and headers: the cross libc, then the sysroot (zlib, libunwind).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu "${IGPROF_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${IGPROF_CROSS_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${IGPROF_CROSS_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${IGPROF_CROSS_SYSROOT}/usr/share/pkgconfig")
# -rpath-link: the loader-time dependencies of sysroot libraries (liblzma)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${IGPROF_CROSS_SYSROOT}/usr/lib/aarch64-linux-gnu:${IGPROF_CROSS_SYSROOT}/lib/aarch64-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${CMAKE_EXE_LINKER_FLAGS_INIT}")

set(CMAKE_CROSSCOMPILING_EMULATOR "${IGPROF_CROSS_DIR}/arm64/bin/run")
