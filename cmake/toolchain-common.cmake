# What every cross toolchain file shares (included by toolchain-<arch>.cmake,
# which first sets):
#   IGPROF_CROSS_ARCH       the cache's name for the target: arm64, i386
#   IGPROF_CROSS_TRIPLET    the cross compiler's prefix: aarch64-linux-gnu
#   CMAKE_SYSTEM_PROCESSOR, CMAKE_LIBRARY_ARCHITECTURE (the multiarch dir)
#
# The cross compilers and libc come from Debian (gcc-<triplet>,
# libc6-dev-<arch>-cross, in /usr/<triplet>); the target's other libraries
# (zlib, libunwind, and Zydis for i386) are in a private sysroot, and qemu-user
# 10 and a run wrapper in the cache IGPROF_CROSS_DIR (default: .cross at the
# top of the source tree), all put there by scripts/cross-setup.sh ARCH.
# Tests run through the wrapper (CMAKE_CROSSCOMPILING_EMULATOR), so plain
# ctest works in the build directory.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${IGPROF_CROSS_TRIPLET}-gcc)
find_program(IGPROF_CROSS_CXX ${IGPROF_CROSS_TRIPLET}-g++)
if(IGPROF_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${IGPROF_CROSS_CXX})
endif()

if(DEFINED ENV{IGPROF_CROSS_DIR})
  set(IGPROF_CROSS_DIR "$ENV{IGPROF_CROSS_DIR}")
else()
  get_filename_component(IGPROF_CROSS_DIR "${CMAKE_CURRENT_LIST_DIR}/../.cross" ABSOLUTE)
endif()
set(IGPROF_CROSS_SYSROOT "${IGPROF_CROSS_DIR}/${IGPROF_CROSS_ARCH}/sysroot")
if(NOT EXISTS "${IGPROF_CROSS_DIR}/${IGPROF_CROSS_ARCH}/bin/run")
  message(FATAL_ERROR "toolchain-${IGPROF_CROSS_ARCH}: no ${IGPROF_CROSS_DIR}/${IGPROF_CROSS_ARCH}/bin/run; run "
                      "scripts/cross-setup.sh ${IGPROF_CROSS_ARCH} first, or set IGPROF_CROSS_DIR")
endif()

# Libraries and headers: the cross libc, then the sysroot.
set(CMAKE_FIND_ROOT_PATH /usr/${IGPROF_CROSS_TRIPLET} "${IGPROF_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(_ma ${CMAKE_LIBRARY_ARCHITECTURE})
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${IGPROF_CROSS_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${IGPROF_CROSS_SYSROOT}/usr/lib/${_ma}/pkgconfig:${IGPROF_CROSS_SYSROOT}/usr/share/pkgconfig")
# -rpath-link: the loader-time dependencies of sysroot libraries (liblzma)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${IGPROF_CROSS_SYSROOT}/usr/lib/${_ma}:${IGPROF_CROSS_SYSROOT}/lib/${_ma}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${CMAKE_EXE_LINKER_FLAGS_INIT}")

set(CMAKE_CROSSCOMPILING_EMULATOR "${IGPROF_CROSS_DIR}/${IGPROF_CROSS_ARCH}/bin/run")
