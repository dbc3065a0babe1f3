/* The profiler's view of a thread interrupted by a signal: where it stopped
 * and whether it stopped at a system call. One file per architecture,
 * src/arch/<arch>_context.c, compiled into the runtime.
 *
 * Both functions are async-signal-safe: they read the ucontext and the
 * interrupted code only, call nothing and never fail.
 */
#ifndef IGPROF_ARCH_CONTEXT_H
#define IGPROF_ARCH_CONTEXT_H

#include <stdint.h>
#include <ucontext.h>

/* The interrupted instruction address. */
uintptr_t context_pc(const ucontext_t *uc);

/* Whether the interrupted instruction is a system-call instruction (the
 * kernel is about to restart the call) or follows one (the call just
 * returned). Reads the code at the PC and the one instruction before it,
 * never across the start of the PC's page. */
int context_at_syscall(const ucontext_t *uc);

#endif
