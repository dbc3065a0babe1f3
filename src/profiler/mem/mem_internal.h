/* Shared by the memory profiler's files: mem.c (the module, the malloc
 * family) and mem_cxx.c (the C++ allocation operators). Hidden, like
 * everything in the runtime.
 */
#ifndef IGPROF_MEM_INTERNAL_H
#define IGPROF_MEM_INTERNAL_H

#include "internal.h"

#include <sched.h>

#define IGPROF_MEM_ACTIVE() \
  IGPROF_LIKELY(atomic_load_explicit(&igprof_state.active, memory_order_relaxed))

/* A hook goes live inside hook_install_at, a moment before its chain is
 * stored in the slot. A thread that calls a function of a library loaded by
 * dlopen in that moment waits for the store instead of calling NULL; the
 * start-up hooks are installed before any second thread exists. */
static inline void *igprof_mem_chain_wait(void *const *slot)
{
  void *f;
  while (!(f = __atomic_load_n(slot, __ATOMIC_ACQUIRE))) sched_yield();
  return f;
}

/* The original behind a chain slot (a function pointer lvalue). */
#define IGPROF_MEM_CHAIN(slot) \
  (__builtin_expect((slot) != NULL, 1) ? (slot) : (__typeof__(slot)) igprof_mem_chain_wait((void *const *) &(slot)))

/* A call of the original with the guard held, the thread marked as not
 * doing the profiler's work meanwhile (internal.h, igprof_through_begin): a
 * double free that makes free abort, or a fault inside the original, still
 * dumps. */
#define IGPROF_MEM_THROUGH(call)                                                          \
  ({                                                                                      \
    igprof_through_begin();                                                               \
    __auto_type through_result_ = (call);                                                 \
    igprof_through_end();                                                                 \
    through_result_;                                                                      \
  })
#define IGPROF_MEM_THROUGH_VOID(call) \
  do { igprof_through_begin(); call; igprof_through_end(); } while (0)

/* mem.c: the bookkeeping of one allocation or release, guard held. */

/* Is the memory profiler counting (-mp)? Set in its start(). */
int igprof_mem_counting(void);

/* A new block of `size` bytes made by a C++ operator that does not go
 * through the hooked malloc: counted as one allocation whose innermost
 * frame is the operator (`entry`, its address), called from `caller`
 * (walked from the replacement's `frame`). `usable` is the usable-size
 * function of the operator's allocator for -mo (NULL: the size asked for). */
void igprof_mem_record_operator(void *ptr, size_t size, void *caller, const void *frame, uintptr_t entry,
                                size_t (*usable)(void *));

/* A block about to be released by a function that is not free (operator
 * delete): out of the live table before the original runs, counted off
 * MEM_LIVE after it (see mem.c, mem_free_body). errno is kept. */
struct igprof_mem_release {
  struct igprof_node *node;
  uint64_t size;
  int64_t blocks;
  int had;
};
void igprof_mem_release_begin(struct igprof_mem_release *r, void *ptr, void *caller);
void igprof_mem_release_end(const struct igprof_mem_release *r);

/* mem_sample.c: sampled memory profiling (--sample). */
#define IGPROF_MEM_SAMPLE_MAX (1ull << 30)
void igprof_mem_sample_set_seed(uint64_t seed);
uint64_t igprof_mem_sample_seed(int *fixed);
/* An allocation of `size` bytes reached this thread's countdown (the
 * caller's fast path saw it): a new countdown is drawn, and the allocation
 * stands for *blocks allocations of *bytes bytes in all. Returns 0 if it
 * did not reach it after all (the thread's first allocation seeds it). */
int igprof_mem_sample_reached(uint64_t size, int64_t *blocks, int64_t *bytes);

/* Is this allocation sampled? The fast path: one subtraction. */
static inline int igprof_mem_sample(uint64_t size, int64_t *blocks, int64_t *bytes)
{
  int64_t left = igprof_tls.sample_left - (int64_t) size;
  if (IGPROF_LIKELY(left > 0)) {
    igprof_tls.sample_left = left;
    return 0;
  }
  return igprof_mem_sample_reached(size, blocks, bytes);
}

/* mem_cxx.c, called by mem.c once the malloc family is hooked. */
void igprof_mem_cxx_start(void);                    /* the process's operators */
void igprof_mem_cxx_library_loaded(const char *path); /* a library's own operators */

#endif
