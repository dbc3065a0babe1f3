# Cross build for i386 (32-bit x86) Linux with Debian's i686 cross compiler,
# the cross libc in /usr/i686-linux-gnu (libc6-dev-i386-cross) and the sysroot
# (zlib, libunwind, Zydis) and qemu-i386 that scripts/cross-setup.sh i386 puts
# in IGPROF_CROSS_DIR (default: .cross at the top of the source tree). Tests
# run through the cache's run wrapper: under qemu-i386 by default, directly
# with CROSS_RUN_MODE=native in the environment of ctest, on a kernel that
# runs 32-bit programs (kernels built without IA-32 emulation answer "Exec
# format error").
#
#   cmake -S . -B build-i386 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-i386.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_LIBRARY_ARCHITECTURE i386-linux-gnu)

set(CMAKE_C_COMPILER i686-linux-gnu-gcc)
find_program(IGPROF_CROSS_CXX i686-linux-gnu-g++)
if(IGPROF_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${IGPROF_CROSS_CXX})
endif()

if(DEFINED ENV{IGPROF_CROSS_DIR})
  set(IGPROF_CROSS_DIR "$ENV{IGPROF_CROSS_DIR}")
else()
  get_filename_component(IGPROF_CROSS_DIR "${CMAKE_CURRENT_LIST_DIR}/../.cross" ABSOLUTE)
endif()
set(IGPROF_CROSS_SYSROOT "${IGPROF_CROSS_DIR}/i386/sysroot")
if(NOT EXISTS "${IGPROF_CROSS_DIR}/i386/bin/run")
  message(FATAL_ERROR "toolchain-i386: no ${IGPROF_CROSS_DIR}/i386/bin/run; run "
                      "scripts/cross-setup.sh i386 first, or set IGPROF_CROSS_DIR")
endif()

set(CMAKE_FIND_ROOT_PATH /usr/i686-linux-gnu "${IGPROF_CROSS_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${IGPROF_CROSS_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${IGPROF_CROSS_SYSROOT}/usr/lib/i386-linux-gnu/pkgconfig:${IGPROF_CROSS_SYSROOT}/usr/share/pkgconfig")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${IGPROF_CROSS_SYSROOT}/usr/lib/i386-linux-gnu:${IGPROF_CROSS_SYSROOT}/lib/i386-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${CMAKE_EXE_LINKER_FLAGS_INIT}")

set(CMAKE_CROSSCOMPILING_EMULATOR "${IGPROF_CROSS_DIR}/i386/bin/run")
