/* The runtime's machine code about register contexts: the view of a thread
 * interrupted by a signal (where it stopped, whether at a system call) and
 * the private libunwind's getcontext forwarder. One file per architecture,
 * src/arch/<arch>_context.c, compiled into the runtime.
 *
 * context_pc and context_at_syscall are async-signal-safe: they read the
 * ucontext and the interrupted code only, call nothing and never fail.
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

/* The private libunwind's unw_getcontext (src/walk/unwind_private.c).
 * unw_getcontext records its caller's registers, so its forwarder must not
 * have a frame of its own: each architecture's file defines libunwind's
 * getcontext entry point (hidden) as a bare indirect jump through this
 * pointer, which unwind_private.c sets when it loads libunwind. */
extern void *igprof_unwind_real_getcontext;

#endif
