/* The runtime's spinlock: an atomic_flag, for locks held a few stores long
 * (a live-table shard, the heap totals). No futex, no libc: usable in hooks
 * and, when the holder cannot be the interrupted thread, in signal handlers.
 * A waiter that spins long yields the processor (the holder may have been
 * preempted on a machine with fewer cores than threads).
 */
#ifndef IGPROF_SPINLOCK_H
#define IGPROF_SPINLOCK_H

#include "../arch/cpu.h"
#include "internal.h"

#include <sched.h>
#include <stdatomic.h>

/* The wait, out of the lock's fast path: the caller keeps its registers. */
static __attribute__((noinline, cold)) void igprof_spin_wait(atomic_flag *lock)
{
  int spins = 0;
  while (atomic_flag_test_and_set_explicit(lock, memory_order_acquire)) {
    if (++spins > 64) { sched_yield(); spins = 0; }
    else cpu_relax();
  }
}

static inline void igprof_spin_lock(atomic_flag *lock)
{
  if (IGPROF_UNLIKELY(atomic_flag_test_and_set_explicit(lock, memory_order_acquire))) igprof_spin_wait(lock);
}

static inline void igprof_spin_unlock(atomic_flag *lock)
{
  atomic_flag_clear_explicit(lock, memory_order_release);
}

#endif
