/* The process's live heap: totals, the global maximum, MEM_PEAK (heap.h
 * says how the per-node figures at the maximum are kept).
 *
 * A maximum is the first moment the live bytes reach a value never reached
 * before: reaching it again later is not a new maximum, so MEM_PEAK describes
 * the earliest moment the heap was that large.
 */
#define _GNU_SOURCE
#include "heap.h"

#include <time.h>

struct igprof_heap igprof_heap;

/* The coarse clock (a few ns from the vDSO, a tick's resolution): read at
 * every new maximum, which a growing heap reaches on most allocations. */
static int64_t coarse_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* MEM_PEAK of one node: its saved MEM_LIVE if saved for the latest maximum,
 * else its MEM_LIVE now (unchanged since that maximum). peak = value, as
 * for a counter that is never released. */
static void read_peak(const struct igprof_node *n, const struct igprof_counter_value *c, int64_t out[3])
{
  const struct igprof_heap *h = &igprof_heap;
  int saved = __atomic_load_n(&n->peak_gen, __ATOMIC_RELAXED) == __atomic_load_n(&h->peak_gen, __ATOMIC_RELAXED);
  const struct igprof_counter_value *from = c + igprof_counter_slot(saved ? h->id_peak : h->id_live);
  out[0] = atomic_load_explicit(&from->ticks, memory_order_relaxed);
  out[1] = atomic_load_explicit(&from->value, memory_order_relaxed);
  out[2] = out[1];
}

int igprof_heap_start(int total_id, int max_id, int live_id)
{
  struct igprof_heap *h = &igprof_heap;
  int peak_id = igprof_counter_define_snapshot("MEM_PEAK", read_peak);
  if (peak_id < 0) return -1;
  h->id_total = total_id;
  h->id_max = max_id;
  h->id_live = live_id;
  h->id_peak = peak_id;
  h->start_ns = h->peak_ns = coarse_ns();
  return peak_id;
}

void igprof_heap_find_slots(struct igprof_heap *h)
{
#define AT(id) (uint32_t) (sizeof(struct igprof_counter_value) * (size_t) igprof_counter_slot(id))
  h->at_total = AT(h->id_total);
  h->at_max = AT(h->id_max);
  h->at_live = AT(h->id_live);
  h->at_peak = AT(h->id_peak);
#undef AT
  h->slots_known = 1;
}

int igprof_heap_new_peak(struct igprof_heap *h)
{
  h->peak_bytes = h->live_bytes;
  h->peak_blocks = h->live_blocks;
  __atomic_store_n(&h->peak_gen, h->peak_gen + 1, __ATOMIC_RELAXED);
  h->peak_ns = coarse_ns();
  /* Exceeding a size for the first time is always a new maximum. */
  if (IGPROF_UNLIKELY(h->dump_above) && !h->dump_done && h->live_bytes > h->dump_above) {
    h->dump_done = 1;
    return 1;
  }
  return 0;
}

void igprof_heap_set_dump_above(int64_t bytes) { igprof_heap.dump_above = bytes; }

/* On the thread whose allocation crossed the size, in its hook (guard
 * held, no lock of the profiler's held): the dump shows that allocation.
 * Other threads go on meanwhile, so with threads it is the state a moment
 * later. */
void igprof_heap_dump_at_peak(void)
{
  char why[64];
  igprof_format(why, sizeof why, "live heap above %lld bytes", (long long) igprof_heap.dump_above);
  igprof_dump(IGPROF_DUMP_PEAK, NULL, why);
}

/* The child has one thread: no lock to take. Its nodes keep generations
 * from the parent, so the generation goes on from the parent's, one past:
 * every node is then older than the child's (empty) maximum and reports
 * its MEM_LIVE, which the child's reset zeroed. */
void igprof_heap_fork_child(void)
{
  struct igprof_heap *h = &igprof_heap;
  atomic_flag_clear(&h->lock);
  h->live_bytes = h->live_blocks = 0;
  h->peak_bytes = h->peak_blocks = 0;
  h->dump_done = 0; /* the child's heap may cross the size too: its own dump */
  __atomic_store_n(&h->peak_gen, h->peak_gen + 1, __ATOMIC_RELAXED);
  h->start_ns = h->peak_ns = coarse_ns();
}

void igprof_heap_summary(void)
{
  struct igprof_heap *h = &igprof_heap;
  int locked = igprof_heap_lock(h);
  int64_t bytes = h->peak_bytes, blocks = h->peak_blocks, ms = (h->peak_ns - h->start_ns) / 1000000;
  igprof_heap_unlock(h, locked);
  if (ms < 0) ms = 0;
  char frac[8]; /* igprof_format has no widths: 1000 + ms, its last three digits */
  igprof_format(frac, sizeof frac, "%u", (unsigned) (ms % 1000 + 1000));
  igprof_warn("heap peak %lld bytes in %lld blocks, %lld.%s s after start", (long long) bytes, (long long) blocks,
              (long long) (ms / 1000), frac + 1);
}
