# Hook engine tests of an i386 target (included by CMakeLists.txt after the
# portable ones; built with cmake/toolchain-i386.cmake and run under
# qemu-i386 through the toolchain's emulator, or natively where the kernel
# runs 32-bit programs).

# The 5-byte jmp rel32 patch (it reaches every address) on hand-written
# i386 functions: endbr32 entries, the PC thunks and call/pop in the window,
# call rel32, jcc rel8/rel32, jecxz and loop relocated, exact results.
igprof_hook_test(i386_api i386_api.c i386_api_code.c)
# Again 20 times (ctest -L stress): each run has its own address layout,
# and the trampoline chunks go wherever the kernel (or qemu) maps them.
add_test(NAME hook.i386_api.repeat
  COMMAND sh -c "for i in $(seq 20); do \"$@\" >/dev/null || exit 1; done" sh
          ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:hook_i386_api>)
set_tests_properties(hook.i386_api.repeat PROPERTIES LABELS "stress;slow" TIMEOUT 600)

# The raw-byte bound of the branch-into-patch scan against Zydis in the
# 32-bit mode, and over every function of the i386 libraries.
add_executable(hook_scan_limit scan_limit.c)
target_link_libraries(hook_scan_limit PRIVATE igprof_hook ${CMAKE_DL_LIBS})
add_test(NAME hook.scan_limit COMMAND hook_scan_limit)
set_tests_properties(hook.scan_limit PROPERTIES LABELS unit TIMEOUT 300)

# glibc's i386 string and memory functions are IFUNCs too (i686, SSE2,
# SSSE3, SSE4.2, AVX2 variants): the call-through tests and the coverage
# run again with the wider instruction sets masked off.
set(i386_baseline
  "glibc.cpu.hwcaps=-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-SSE4_2,-SSSE3,-AVX,-SSE4_1,-BMI2,-ERMS,-FSRM")
foreach(t callthrough runtime_hooks)
  add_test(NAME hook.${t}.baseline COMMAND hook_${t})
  set_tests_properties(hook.${t}.baseline PROPERTIES LABELS unit TIMEOUT 120
                       ENVIRONMENT "GLIBC_TUNABLES=${i386_baseline}")
endforeach()

# Library coverage of the i386 libraries, hooked for real (under qemu-i386
# here): every exported function of at least 5 bytes patched, called
# through where safe, every refusal explained. Debian 12 (glibc 2.36):
# libc 2449 of 2450 (the refusal is pthread_spin_lock, whose loop jumps
# back to +4), libm, libstdc++ and libz 100%; issue 14 asks for 99%.
# (a native i386 build has no emulator: hookcheck runs directly)
set(i386_run)
if(CMAKE_CROSSCOMPILING_EMULATOR)
  set(i386_run --emulator ${CMAKE_CROSSCOMPILING_EMULATOR})
endif()
function(i386_coverage name)
  add_test(NAME ${name}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/coverage.sh ${i386_run} $<TARGET_FILE:igprof-hookcheck>
            libc.so.6=99.5 libm.so.6=99.5 libstdc++.so.6=100 libz.so.1=100)
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 600 ${ARGN})
endfunction()
i386_coverage(hook.coverage)
i386_coverage(hook.coverage.baseline ENVIRONMENT "GLIBC_TUNABLES=${i386_baseline}")
