# Hook engine tests of an ARM32 target (included by CMakeLists.txt after the
# portable ones; built with cmake/toolchain-armhf.cmake and run under
# qemu-arm through the toolchain's emulator).

# Library coverage of the armhf libraries, hooked for real under qemu-arm:
# every exported function of at least 8 bytes patched, called through a
# trampoline where safe, every refusal explained (issue 15 asks for 98%):
# libc 2302 of 2313, libm 324 of 324, libstdc++ 3827 of 3837, libz 88 of 88.
add_test(NAME hook.coverage
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/coverage.sh --emulator ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:igprof-hookcheck>
          libc.so.6=98 libm.so.6=98 libstdc++.so.6=98 libz.so.1=98)
set_tests_properties(hook.coverage PROPERTIES LABELS unit TIMEOUT 900)

# The near (A32 b, Thumb b.w) and far (load into pc) patches on hand-written
# A32 and Thumb-2 functions: every PC-relative class in the window, IT
# blocks, blx both ways, an entry at 2 mod 4; exact results.
igprof_hook_test(arm_api arm_api.c arm_api_code.c)
# Again 20 times (ctest -L stress): each run has its own address layout.
add_test(NAME hook.arm_api.repeat
  COMMAND sh -c "for i in $(seq 20); do \"$@\" >/dev/null || exit 1; done" sh
          ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:hook_arm_api>)
set_tests_properties(hook.arm_api.repeat PROPERTIES LABELS "stress;slow" TIMEOUT 600)

# The same with every hook on the far patch (a load into pc: 8 bytes, so
# shorter functions are not counted, and a branch back into the first 8 bytes
# refuses): the figures of docs/hook-engine.md, with a little room.
add_test(NAME hook.coverage.far
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/coverage.sh --emulator ${CMAKE_CROSSCOMPILING_EMULATOR} --far $<TARGET_FILE:igprof-hookcheck>
          libc.so.6=97 libm.so.6=98 libstdc++.so.6=98 libz.so.1=98)
set_tests_properties(hook.coverage.far PROPERTIES LABELS unit TIMEOUT 900)
