/* The fast stack walker: frame recipes derived from .eh_frame, a lock-free
 * PC → recipe cache, and libunwind for the frames recipes cannot describe.
 *
 * walk.c dispatches here when the method is WALK_FAST; the two walk functions
 * have exactly the contract of igprof_walk_from_hook / igprof_walk_from_signal
 * in walk.h (pcs[0] innermost, return addresses minus 1, the interrupted PC
 * exact, *truncated set when the stack was deeper than max).
 *
 * Safe in a signal handler: no locks, no allocation, no loader calls on the
 * fast path, and reads only from the module table (never unmapped while
 * reachable) and the current thread's stack between the starting stack
 * pointer and the stack's top. See docs/stack-walking.md.
 */
#ifndef IGPROF_WALK_FAST_H
#define IGPROF_WALK_FAST_H

#include <stdint.h>
#include <ucontext.h>

#include "walk.h" /* enum walk_truncation */

int igprof_walk_fast_from_hook(uintptr_t *pcs, int max, void *caller_ret, int *truncated);
int igprof_walk_fast_from_signal(uintptr_t *pcs, int max, const ucontext_t *uc, int *truncated);
/* From a hook replacement's frame record (walk.h, igprof_walk_from_hook_frame):
 * returns -1 where frame records are not laid out as [saved FP, return
 * address] or frame[1] is not caller_ret; the caller then walks from the hook. */
int igprof_walk_fast_from_frame(uintptr_t *pcs, int max, void *caller_ret, const void *frame,
                                int *truncated);
/* igprof_walk_from_hook_frame's contract (walk.h): from the frame record
 * where it may, else from the hook. */
int igprof_walk_fast_from_hook_frame(uintptr_t *pcs, int max, void *caller_ret, const void *frame,
                                     int *truncated);

/* Outside signal context. init builds the table of loaded modules;
 * modules_changed (after dlopen/dlclose) adds the new ones and retires
 * the unloaded ones; thread_init caches the calling thread's stack bounds.
 * A thread that never called thread_init is walked entirely by libunwind.
 *
 * modules_changing is called before a dlclose and modules_closed (which
 * does what modules_changed does, and ends the close) after it, on the
 * same thread: in between, no walk (on any thread) derives a recipe from
 * a module's unwind data, since the module table may name a module that
 * is gone. Frames whose recipe is not cached then go to libunwind in a
 * hook walk and end a signal walk. Nothing is compiled ahead: each PC's
 * recipe is derived when a walk first meets it. */
void igprof_walk_fast_init(void);
void igprof_walk_fast_modules_changing(void);
void igprof_walk_fast_modules_closed(void);
void igprof_walk_fast_modules_changed(void);
void igprof_walk_fast_thread_init(void);

/* libunwind reads the stack without checking every address: a corrupt
 * stack can make unw_step fault. Where the program that links this walker
 * defines this function, every unw_step runs guarded: the walker stores a
 * sigjmp_buf in the slot it returns (the calling thread's) and clears it
 * after the step, and that program's SIGSEGV/SIGBUS handler, seeing the slot
 * set, siglongjmps there (after clearing it and restoring the interrupted
 * signal mask); the walk then ends where the fault was. Without it (a test
 * that installs no such handler) unw_step runs unguarded. */
void **igprof_unwind_escape_slot(void) __attribute__((weak));

/* ARM32: whether frames without an EHABI entry are stepped by reading
 * their prologue (the default) or end the walk, as libunwind's do; other
 * architectures ignore it. Set before walks start. */
void igprof_walk_fast_set_prologues(int on);

/* Per-thread counters of the calling thread (for tests, -d and benchmarks). */
struct walk_fast_stats {
  uint64_t walks;          /* calls of either walk function */
  uint64_t frames_fast;    /* steps taken by recipes */
  uint64_t frames_unwinder;/* steps handed to libunwind */
  uint64_t unwinder_replays; /* libunwind steps that replayed the walk for registers */
  uint64_t walks_unwinder; /* whole walks left to libunwind (no stack bounds) */
  uint64_t walks_cut;      /* walks ended because the stack looked corrupt */
  uint64_t cache_misses;   /* PC cache misses */
  uint64_t derivations;    /* recipes derived from unwind data (eh_frame_find) */
  uint64_t derivations_refused; /* not derived: a dlclose was under way */
  uint64_t guesses;        /* PCs without unwind data given the frame-pointer recipe */
  uint64_t kernel_calls;   /* system calls made by the walker itself (libunwind's apart) */
  uint64_t frames_interpreted; /* ARM32: of frames_fast, those the EHABI interpreter stepped */
  uint64_t unwinder_faults; /* libunwind steps that faulted and were abandoned */
  uint64_t frames_prologue; /* ARM32: of frames_fast, those stepped by reading the function's
                             * prologue (EXIDX_CANTUNWIND, no index entry) */
};
void igprof_walk_fast_stats(struct walk_fast_stats *out);

/* Module table summary (outside signal context; for tests and -d). It
 * compiles every module's table to count rows, which walks never need. */
struct walk_fast_module_info {
  const char *name; /* the loader's name; "" for the main program */
  uintptr_t text_start, text_end;
  uint32_t rows, fdes, complex_rows, bad_fdes;
  const char *status; /* eh_frame_status_str() of the compile */
};
/* Calls `fn` for each module of the current table; returns the count. */
int igprof_walk_fast_modules(void (*fn)(const struct walk_fast_module_info *, void *), void *arg);

#endif
