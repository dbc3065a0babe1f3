# The fast stack walker (issue 6): frame recipes from .eh_frame (ARM32:
# EHABI tables) with a libunwind fallback. Included from src/profiler/CMakeLists.txt (and from
# tests/walk when the profiler directory is not configured yet); linked into
# libigprof.so and directly into the walker's tests and benchmark.
if(NOT TARGET igprof_walk_fast)
  if(NOT EXISTS ${CMAKE_CURRENT_LIST_DIR}/../arch/${IGPROF_ARCH_NAME}_frame.c)
    message(FATAL_ERROR "walk_fast: no frame stepping for ${CMAKE_SYSTEM_PROCESSOR} yet")
  endif()
  add_library(igprof_walk_fast STATIC
    ${CMAKE_CURRENT_LIST_DIR}/walk_fast.c
    ${CMAKE_CURRENT_LIST_DIR}/eh_frame.c
    ${CMAKE_CURRENT_LIST_DIR}/../arch/${IGPROF_ARCH_NAME}_frame.c)
  if(IGPROF_TARGET_ARM)
    # ARM32 code carries EHABI tables (.ARM.exidx), not .eh_frame; the
    # frames they do not describe are read from their prologues.
    target_sources(igprof_walk_fast PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../arch/arm_ehabi.c
                   ${CMAKE_CURRENT_LIST_DIR}/../arch/arm_prologue.c)
    # The prologue reader sees hooked functions as they were (hook_original_code).
    target_link_libraries(igprof_walk_fast PUBLIC igprof_hook)
  endif()
  set_target_properties(igprof_walk_fast PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden)
  target_include_directories(igprof_walk_fast PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  # Headers only: libigprof.so opens libunwind privately (unwind_private.c);
  # the walker's own tests and benchmark link PkgConfig::UNWIND themselves.
  target_include_directories(igprof_walk_fast PUBLIC ${UNWIND_INCLUDE_DIRS})
  target_link_libraries(igprof_walk_fast PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
endif()
