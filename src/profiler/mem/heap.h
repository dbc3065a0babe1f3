/* The process's live heap as the memory profiler sees it (heap.c): its
 * total live bytes and blocks, their maximum over the run (the global peak)
 * and each call path's share of it (MEM_PEAK).
 *
 * One allocation or release updates, as one step: the node's MEM_TOTAL,
 * MEM_MAX and MEM_LIVE, the process's totals, and the check for a new
 * maximum. With one thread that step is plain loads and stores; once a
 * second thread exists it runs under one spinlock, held for a few stores
 * (the walk, the live table and the original call all happen outside it).
 * The lock is what makes MEM_PEAK exact: no thread can change a node between
 * another thread's update of the totals and its check for a new maximum, so
 * the maximum and the per-node figures describe the same moment of one
 * sequence of events.
 *
 * MEM_PEAK without copying the tree at each new maximum: every new maximum
 * bumps a generation number. A node keeps a saved MEM_LIVE (blocks, bytes)
 * and the generation it was saved in (igprof_node.peak_gen). A node about to
 * change whose saved generation is older than the latest maximum's has not
 * changed since that maximum: its current figures are the ones it had then,
 * so they are saved first, tagged with the latest generation. At dump time a
 * node tagged with the latest generation reports its saved figures, any other
 * its current ones (unchanged since the maximum). A new maximum costs one
 * increment; a node pays two stores the first time it changes after one.
 */
#ifndef IGPROF_HEAP_H
#define IGPROF_HEAP_H

#include "internal.h"
#include "spinlock.h"

/* One point of the timeline: the live heap at a moment (ns since start). */
struct igprof_heap_sample {
  int64_t ns, bytes, blocks;
};

/* A detailed snapshot (--snapshots): each call path's live blocks and
 * bytes at one timeline sample (its index in igprof_heap.samples). */
struct igprof_heap_path {
  struct igprof_node *node;
  int64_t blocks, bytes;
};
struct igprof_heap_snapshot {
  uint32_t sample, count;
  struct igprof_heap_path *paths; /* pages of their own, `count` used */
  size_t size;                    /* bytes mapped */
};
#define IGPROF_HEAP_SNAPSHOTS_MAX 128

struct igprof_heap {
  /* One cache line, read or written by every event: with threads it moves
   * from core to core with the lock, and nothing else need follow it. */
  atomic_flag lock;                 /* taken only while several threads exist */
  int64_t live_bytes, live_blocks;  /* now */
  /* The slow path (igprof_heap_changed) runs when live_bytes goes above
   * watch_above (the maximum so far, or the timeline's next step up) or
   * below watch_below (its next step down; INT64_MIN without one). */
  int64_t watch_above, watch_below;
  uint64_t peak_gen;                /* bumped at every new maximum */
  int64_t sample_ns;                /* --timeline Nms: the period; 0: none */
  /* The memory counters' byte offsets in a counter block, found at the first
   * allocation (the layout is final once every module has defined its
   * counters); at_total is IGPROF_HEAP_SLOTS_UNKNOWN before. */
  uint16_t at_total, at_max, at_live, at_peak;
  /* Written at a new maximum or a timeline sample. */
  int64_t peak_bytes, peak_blocks;  /* at the maximum of live_bytes so far */
  int64_t peak_ns;                  /* when (CLOCK_MONOTONIC_COARSE) */
  int64_t start_ns;                 /* the process's start (a forked child's fork) */
  int64_t sample_bytes;             /* --timeline SIZE: a sample every SIZE bytes of change; 0: none */
  int64_t sample_due;               /* with sample_ns: the next sample's time */
  struct igprof_heap_sample *samples; /* the timeline, in pages (heap.c) */
  uint32_t nsamples, sample_cap;
  /* Where the maximum falls in the timeline: before samples[peak_at], or
   * samples[peak_at] itself when peak_sampled. */
  uint32_t peak_at;
  int peak_sampled;
  int id_total, id_max, id_live, id_peak; /* the memory counters */
  int64_t dump_above;               /* --dump-at-peak: a dump once live_bytes exceed it (0: no) */
  int dump_done;                    /* that dump was written (or is being written) */
  int started;                      /* igprof_heap_start ran (the memory profiler is on) */
  uint32_t snapshot_every;          /* --snapshots N: every Nth sample is detailed (0: none) */
  uint32_t nsnapshots;
  struct igprof_heap_snapshot snapshots[IGPROF_HEAP_SNAPSHOTS_MAX];
} __attribute__((aligned(64)));

extern struct igprof_heap igprof_heap;
#define IGPROF_HEAP_SLOTS_UNKNOWN 0xffff

/* heap.c: define MEM_PEAK after the memory profiler's other counters
 * (its start) and start the clock. Returns MEM_PEAK's id, or -1. */
int igprof_heap_start(int total_id, int max_id, int live_id);
/* Fill in the slots (lock held). */
void igprof_heap_find_slots(struct igprof_heap *h);
/* live_bytes left [watch_below, watch_above], or a timeline period is set:
 * a new maximum, a timeline sample; lock held. Returns 1 if the caller is
 * to write the --dump-at-peak dump (once the lock is released:
 * igprof_heap_dump_at_peak). */
int igprof_heap_changed(struct igprof_heap *h, int up);
/* --timeline: a sample every `bytes` of change, every `ms` milliseconds. */
void igprof_heap_set_timeline(int64_t bytes, int64_t ms);
/* --snapshots N. */
void igprof_heap_set_snapshots(uint32_t every);
/* The dump's copy of the timeline (in s): the samples, the maximum among
 * them where it falls, and the heap now as the last one; and of the
 * detailed snapshots, their `sample` the index in that copy. */
size_t igprof_heap_timeline(struct igprof_scratch *s, struct igprof_heap_sample **out,
                            struct igprof_heap_snapshot **snapshots, size_t *nsnapshots);
/* --dump-at-peak: write a dump once the live bytes first exceed `bytes`. */
void igprof_heap_set_dump_above(int64_t bytes);
void igprof_heap_dump_at_peak(void);
/* A forked child: its heap starts empty, with no maximum yet. */
void igprof_heap_fork_child(void);
/* --histogram: allocations and bytes per size class, class k (1..64) the
 * sizes [2^(k-1), 2^k), class 0 the empty allocations. */
#define IGPROF_HEAP_SIZE_CLASSES 65
extern int igprof_heap_histogram_on;
extern _Atomic int64_t igprof_heap_histogram[IGPROF_HEAP_SIZE_CLASSES][2];
void igprof_heap_histogram_add(uint64_t bytes);

/* --sample (mem_sample.c): the mean interval T in bytes (0: every
 * allocation is recorded) and the allocations sampled so far, which the
 * dump gives as a synthetic stack @igprof_mem_sampling (dump-format.md). */
extern uint64_t igprof_mem_sample_mean;
extern _Atomic uint64_t igprof_mem_sampled;

/* The clock the heap's times use (CLOCK_MONOTONIC_COARSE, ns). */
int64_t igprof_heap_now(void);
/* One line on stderr: the peak and when it was reached. */
void igprof_heap_summary(void);

/* The counter at byte offset `at` (struct igprof_heap) of block c. */
static inline struct igprof_counter_value *igprof_heap_counter(struct igprof_counter_value *c, uint16_t at)
{
  return (struct igprof_counter_value *) ((char *) c + at);
}

/* Plain updates: every writer of these fields holds the lock, or is the
 * only thread; the dump reads them with relaxed loads. */
static inline int64_t igprof_heap_get(_Atomic int64_t *p) { return atomic_load_explicit(p, memory_order_relaxed); }
static inline void igprof_heap_set(_Atomic int64_t *p, int64_t v) { atomic_store_explicit(p, v, memory_order_relaxed); }
static inline void igprof_heap_add_to(_Atomic int64_t *p, int64_t v) { igprof_heap_set(p, igprof_heap_get(p) + v); }

/* Returns whether it locked: pass that to igprof_heap_unlock. */
static inline int igprof_heap_lock(struct igprof_heap *h)
{
  if (igprof_one_thread()) return 0;
  igprof_spin_lock(&h->lock);
  return 1;
}

static inline void igprof_heap_unlock(struct igprof_heap *h, int locked)
{
  if (locked) igprof_spin_unlock(&h->lock);
}

/* The node is about to change: if it has not changed since the latest
 * maximum, its figures now are its figures then. Lock held. */
static inline void igprof_heap_keep_peak(struct igprof_heap *h, struct igprof_node *n,
                                         struct igprof_counter_value *c)
{
  if (IGPROF_LIKELY(n->peak_gen == h->peak_gen)) return;
  struct igprof_counter_value *live = igprof_heap_counter(c, h->at_live), *saved = igprof_heap_counter(c, h->at_peak);
  igprof_heap_set(&saved->ticks, igprof_heap_get(&live->ticks));
  igprof_heap_set(&saved->value, igprof_heap_get(&live->value));
  __atomic_store_n(&n->peak_gen, h->peak_gen, __ATOMIC_RELAXED);
}

/* `blocks` new blocks of `bytes` in all on node n (its counter block c), the
 * largest `largest` bytes: one block (igprof_heap_alloc), or a sampled one
 * and the allocations it stands for (mem_sample.c). */
static inline __attribute__((always_inline)) void igprof_heap_alloc_n(struct igprof_node *n,
                                                                      struct igprof_counter_value *c, int64_t blocks,
                                                                      int64_t bytes, int64_t largest)
{
  struct igprof_heap *h = &igprof_heap;
  int locked = igprof_heap_lock(h);
  if (IGPROF_UNLIKELY(h->at_total == IGPROF_HEAP_SLOTS_UNKNOWN)) igprof_heap_find_slots(h);
  struct igprof_counter_value *total = igprof_heap_counter(c, h->at_total), *max = igprof_heap_counter(c, h->at_max);
  struct igprof_counter_value *live = igprof_heap_counter(c, h->at_live);
  igprof_heap_keep_peak(h, n, c);
  igprof_heap_add_to(&total->ticks, blocks);
  igprof_heap_add_to(&total->value, bytes);
  igprof_heap_add_to(&max->ticks, blocks);
  if (igprof_heap_get(&max->value) < largest) igprof_heap_set(&max->value, largest);
  int64_t now = igprof_heap_get(&live->value) + bytes;
  igprof_heap_set(&live->value, now);
  igprof_heap_add_to(&live->ticks, blocks);
  if (igprof_heap_get(&live->peak) < now) igprof_heap_set(&live->peak, now);
  h->live_bytes += bytes;
  h->live_blocks += blocks;
  int dump = 0;
  if (h->live_bytes > h->watch_above || IGPROF_UNLIKELY(h->sample_ns)) dump = igprof_heap_changed(h, 1);
  igprof_heap_unlock(h, locked);
  if (IGPROF_UNLIKELY(dump)) igprof_heap_dump_at_peak();
}

/* A new block of `bytes` on node n (its counter block c). */
static inline __attribute__((always_inline)) void igprof_heap_alloc(struct igprof_node *n,
                                                                    struct igprof_counter_value *c, int64_t bytes)
{
  igprof_heap_alloc_n(n, c, 1, bytes, bytes);
}

/* `blocks` blocks of `bytes` on node n released (allocations on n came
 * first): one block, or a sampled one and those it stands for. */
static inline __attribute__((always_inline)) void igprof_heap_release_n(struct igprof_node *n, int64_t blocks,
                                                                        int64_t bytes)
{
  struct igprof_counter_value *c = atomic_load_explicit(&n->counters, memory_order_acquire);
  if (!c) return;
  struct igprof_heap *h = &igprof_heap;
  int locked = igprof_heap_lock(h);
  struct igprof_counter_value *live = igprof_heap_counter(c, h->at_live);
  igprof_heap_keep_peak(h, n, c);
  igprof_heap_add_to(&live->ticks, -blocks);
  igprof_heap_add_to(&live->value, -bytes);
  h->live_bytes -= bytes;
  h->live_blocks -= blocks;
  if (h->live_bytes < h->watch_below || IGPROF_UNLIKELY(h->sample_ns)) igprof_heap_changed(h, 0);
  igprof_heap_unlock(h, locked);
}

/* A block of `bytes` on node n released (an allocation on n came first). */
static inline __attribute__((always_inline)) void igprof_heap_release(struct igprof_node *n, int64_t bytes)
{
  igprof_heap_release_n(n, 1, bytes);
}

#endif
