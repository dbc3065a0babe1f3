/* The machine code of the Go module (src/profiler/go.c): how the Go
 * runtime's runtime.exit looks on this architecture, and the stub that
 * replaces it. One file per architecture, src/arch/<arch>_go.c, compiled
 * into the runtime.
 *
 * The stub (ABI0: the exit code on the stack) blocks every signal with
 * igprof_go_all_signals as the mask, waits until it owns
 * igprof_go_stack_busy, switches to the stack whose top is
 * igprof_go_stack_top (outermost frame: no frame pointer) and calls
 * igprof_go_exit(code), which never returns. Those four are go.c's.
 */
#ifndef IGPROF_ARCH_GO_H
#define IGPROF_ARCH_GO_H

#include <stddef.h>
#include <stdint.h>

struct go_arch {
  /* The exact code of runtime.exit (found by it in stripped executables,
   * checked against it before hooking). */
  const unsigned char *exit_code;
  size_t exit_code_size;
  /* The replacement of runtime.exit; NULL where none is written yet (then
   * a Go program's end is not hooked, with one line saying so). */
  void (*exit_stub)(void);
};
extern const struct go_arch go_arch;

/* go.c's, used by the stub. */
#define GO_HIDDEN __attribute__((visibility("hidden")))
extern GO_HIDDEN const uint64_t igprof_go_all_signals;
extern GO_HIDDEN int igprof_go_stack_busy;
extern GO_HIDDEN uintptr_t igprof_go_stack_top;
GO_HIDDEN __attribute__((noreturn)) void igprof_go_exit(int code);

#endif
