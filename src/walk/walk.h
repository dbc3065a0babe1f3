/* Stack capture for the profiler: one interface for the memory hooks (start at
 * the hook's caller) and the sampler (start at the interrupted context).
 *
 * Both functions fill `pcs` outermost-last: pcs[0] is the innermost frame.
 * Addresses are call sites ready for symbolisation: the interrupted PC of a
 * signal is stored exactly, every return address is stored minus 1.
 * They return the number of frames written; if the stack was deeper than `max`,
 * or went on beyond a frame they could not step, they set *truncated (when
 * non-NULL) to WALK_TRUNCATED or WALK_STOPPED instead of silently cutting it.
 *
 * Both are safe in a signal handler: no locks, no allocation, no loader calls.
 */
#ifndef IGPROF_WALK_H
#define IGPROF_WALK_H

#include <stdint.h>
#include <ucontext.h>

enum walk_method { WALK_FAST = 0, WALK_LIBUNWIND = 1 };

/* What a walk's *truncated says about the frames it wrote. */
enum walk_truncation {
  WALK_COMPLETE = 0,  /* the walk reached the end of the stack */
  WALK_TRUNCATED = 1, /* the stack is deeper than `max` */
  /* A frame could not be stepped: code with neither unwind data nor a
   * frame-pointer chain (JIT code that uses the frame pointer register for
   * data), or a stack that looks corrupt. The stack goes on beyond the last
   * frame written. */
  WALK_STOPPED = 2,
};

/* Select the walker (igprof --unwind fast|libunwind). */
void igprof_walk_set_method(enum walk_method method);

/* Frames more than the depth that a walk buffer holds: the profiler's own
 * between the walker and the hooked call. */
int igprof_walk_slack(void);

/* From inside a hook replacement: `caller_ret` is __builtin_return_address(0)
 * of the replacement, i.e. the return address into the code that called the
 * hooked function. pcs[0] becomes caller_ret - 1, then outwards. Frames inside
 * the profiler are never included, without any fixed skip count. */
int igprof_walk_from_hook(uintptr_t *pcs, int max, void *caller_ret, int *truncated);

/* The same, given also `frame` = __builtin_frame_address(0) of the
 * replacement (compiled with a frame pointer): the walk then starts at the
 * caller's frame directly, from the caller's registers saved there, instead
 * of stepping out of the profiler's own frames first. A frame whose saved
 * return address is not caller_ret (or NULL) falls back to the usual walk. */
int igprof_walk_from_hook_frame(uintptr_t *pcs, int max, void *caller_ret, const void *frame,
                                int *truncated);

/* With -d: the fast walker's counts for the calling thread, on stderr. */
void igprof_walk_debug_stats(void);

/* From a signal handler: pcs[0] is the interrupted PC from `uc`. */
int igprof_walk_from_signal(uintptr_t *pcs, int max, const ucontext_t *uc, int *truncated);

/* From the fault handler, on a thread whose libunwind walk faulted
 * (igprof_tls.unwind_escape set): back into that walk, which ends there
 * with the frames it had. `uc` is the fault's context (its signal mask is
 * the walk's). Does not return. */
__attribute__((noreturn)) void igprof_walk_escape(void *uc);

/* Why libunwind is not in use (when igprof_unwind_available() is 0): one
 * line for the user, from unwind_private.c. */
const char *igprof_unwind_unavailable_reason(void);

/* Prepare the walker outside signal context (start-up, dlopen/dlclose, new thread). */
void igprof_walk_init(void);
void igprof_walk_thread_init(void);
void igprof_walk_modules_changed(void);

/* Around a dlclose, paired, on one thread: changing before it, closed
 * (what modules_changed does, and the end of the close) after it. In
 * between, walks keep away from module memory, which the dlclose may
 * unmap. */
void igprof_walk_modules_changing(void);
void igprof_walk_modules_closed(void);

#endif
