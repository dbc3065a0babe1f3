/* The process's live heap: totals, the global maximum, MEM_PEAK (heap.h
 * says how the per-node figures at the maximum are kept).
 *
 * A maximum is the first moment the live bytes reach a value never reached
 * before: reaching it again later is not a new maximum, so MEM_PEAK describes
 * the earliest moment the heap was that large.
 */
#define _GNU_SOURCE
#include "heap.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

struct igprof_heap igprof_heap = {.at_total = IGPROF_HEAP_SLOTS_UNKNOWN};

/* The coarse clock (a few ns from the vDSO, a tick's resolution): read at
 * every new maximum, which a growing heap reaches on most allocations. */
static int64_t coarse_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t igprof_heap_now(void) { return coarse_ns(); }

int igprof_heap_histogram_on;
_Atomic int64_t igprof_heap_histogram[IGPROF_HEAP_SIZE_CLASSES][2];

void igprof_heap_histogram_add(uint64_t bytes)
{
  _Atomic int64_t *c = igprof_heap_histogram[bytes ? 64 - __builtin_clzll(bytes) : 0];
  if (igprof_one_thread()) {
    igprof_heap_add_to(&c[0], 1);
    igprof_heap_add_to(&c[1], (int64_t) bytes);
  } else {
    atomic_fetch_add_explicit(&c[0], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[1], (int64_t) bytes, memory_order_relaxed);
  }
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

/* The window of live bytes outside which the slow path runs. */
static void set_watch(struct igprof_heap *h)
{
  int64_t above = h->peak_bytes, below = INT64_MIN;
  if (h->sample_bytes) {
    int64_t last = h->nsamples ? h->samples[h->nsamples - 1].bytes : 0;
    if (last + h->sample_bytes - 1 < above) above = last + h->sample_bytes - 1;
    below = last - h->sample_bytes + 1;
  }
  h->watch_above = above;
  h->watch_below = below;
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
  h->sample_due = h->start_ns + h->sample_ns;
  set_watch(h);
  h->started = 1;
  return peak_id;
}

void igprof_heap_find_slots(struct igprof_heap *h)
{
#define AT(id) (uint16_t) (sizeof(struct igprof_counter_value) * (size_t) igprof_counter_slot(id))
  h->at_max = AT(h->id_max);
  h->at_live = AT(h->id_live);
  h->at_peak = AT(h->id_peak);
  h->at_total = AT(h->id_total); /* last: it says the others are known */
#undef AT
}

void igprof_heap_set_timeline(int64_t bytes, int64_t ms)
{
  if (bytes) igprof_heap.sample_bytes = bytes;
  if (ms) igprof_heap.sample_ns = ms * 1000000;
}

void igprof_heap_set_snapshots(uint32_t every) { igprof_heap.snapshot_every = every; }

static void drop_snapshot(struct igprof_heap_snapshot *s)
{
  if (s->paths) igprof_pages_free(s->paths, s->size);
  *s = (struct igprof_heap_snapshot){0};
}

/* by_sample: the timeline kept its even samples, halving their indexes:
 * keep the snapshots of those. Otherwise keep every other snapshot. */
static void thin_snapshots(struct igprof_heap *h, int by_sample)
{
  uint32_t kept = 0;
  for (uint32_t i = 0; i < h->nsnapshots; ++i) {
    struct igprof_heap_snapshot *s = &h->snapshots[i];
    int keep = by_sample ? s->sample % 2 == 0 : i % 2 == 0;
    if (!keep) { drop_snapshot(s); continue; }
    if (by_sample) s->sample /= 2;
    h->snapshots[kept++] = *s;
  }
  for (uint32_t i = kept; i < h->nsnapshots; ++i) h->snapshots[i] = (struct igprof_heap_snapshot){0};
  h->nsnapshots = kept;
}

struct snapshot_fill {
  const struct igprof_heap *h;
  struct igprof_heap_path *paths;
  uint32_t count, cap;
};

static void count_live(void *arg, struct igprof_node *n)
{
  struct snapshot_fill *f = arg;
  struct igprof_counter_value *c = atomic_load_explicit(&n->counters, memory_order_acquire);
  if (!c) return;
  const struct igprof_counter_value *live = igprof_heap_counter(c, f->h->at_live);
  int64_t blocks = igprof_heap_get((_Atomic int64_t *) &live->ticks);
  int64_t bytes = igprof_heap_get((_Atomic int64_t *) &live->value);
  if (!blocks && !bytes) return;
  if (f->paths && f->count < f->cap) f->paths[f->count] = (struct igprof_heap_path){n, blocks, bytes};
  f->count++;
}

/* Every call path's MEM_LIVE now, for sample `sample`; lock held, so no
 * MEM_LIVE changes meanwhile (a node made meanwhile has none yet). */
static void take_snapshot(struct igprof_heap *h, uint32_t sample)
{
  if (h->nsnapshots == IGPROF_HEAP_SNAPSHOTS_MAX) {
    thin_snapshots(h, 0);
    h->snapshot_every *= 2;
  }
  struct snapshot_fill f = {h, NULL, 0, 0};
  igprof_tree_foreach(count_live, &f);
  size_t size = sizeof *f.paths * (f.count ? f.count : 1);
  f.paths = igprof_pages_alloc(size);
  if (!f.paths) return;
  f.cap = f.count;
  f.count = 0;
  igprof_tree_foreach(count_live, &f);
  h->snapshots[h->nsnapshots++] = (struct igprof_heap_snapshot){sample, f.count < f.cap ? f.count : f.cap, f.paths, size};
}

/* The timeline keeps at most this many samples: when full, every other one
 * goes and the steps double, so a long run costs a bounded, small memory
 * (96 KiB) and still spans the whole run. */
#define SAMPLES_MAX 4096

static void thin_samples(struct igprof_heap *h)
{
  for (uint32_t i = 0; i < h->nsamples; i += 2) h->samples[i / 2] = h->samples[i];
  /* Kept: the even ones. A maximum before sample p comes before sample
   * (p + 1) / 2 now; one that was a sample stays one if it was even. */
  if (h->peak_sampled && h->peak_at % 2 == 0) h->peak_at /= 2;
  else h->peak_at = (h->peak_at + 1) / 2, h->peak_sampled = 0;
  h->nsamples = (h->nsamples + 1) / 2;
  thin_snapshots(h, 1);
  h->sample_bytes *= 2;
  h->sample_ns *= 2;
}

static void take_sample(struct igprof_heap *h, int64_t now, int at_peak)
{
  if (h->nsamples == h->sample_cap) {
    if (h->sample_cap == SAMPLES_MAX) {
      thin_samples(h);
    } else {
      uint32_t cap = h->sample_cap ? h->sample_cap * 2 : 256;
      struct igprof_heap_sample *fresh = igprof_pages_alloc(sizeof *fresh * cap);
      if (!fresh) return; /* no memory: this sample is lost, not the program */
      if (h->samples) {
        memcpy(fresh, h->samples, sizeof *fresh * h->nsamples);
        igprof_pages_free(h->samples, sizeof *fresh * h->sample_cap);
      }
      h->samples = fresh;
      h->sample_cap = cap;
    }
  }
  if (at_peak) {
    h->peak_at = h->nsamples;
    h->peak_sampled = 1;
  }
  h->samples[h->nsamples++] = (struct igprof_heap_sample){now - h->start_ns, h->live_bytes, h->live_blocks};
  if (h->snapshot_every && h->nsamples % h->snapshot_every == 0) take_snapshot(h, h->nsamples - 1);
}

int igprof_heap_changed(struct igprof_heap *h, int up)
{
  int dump = 0, at_peak = up && h->live_bytes > h->peak_bytes, due = 0;
  if (h->sample_bytes) {
    int64_t last = h->nsamples ? h->samples[h->nsamples - 1].bytes : 0;
    due = h->live_bytes >= last + h->sample_bytes || h->live_bytes <= last - h->sample_bytes;
  }
  int64_t now = at_peak || due || h->sample_ns ? coarse_ns() : 0;
  if (h->sample_ns && now >= h->sample_due) {
    due = 1;
    h->sample_due = now + h->sample_ns;
  }
  if (at_peak) {
    h->peak_bytes = h->live_bytes;
    h->peak_blocks = h->live_blocks;
    __atomic_store_n(&h->peak_gen, h->peak_gen + 1, __ATOMIC_RELAXED);
    h->peak_ns = now;
    h->peak_at = h->nsamples;
    h->peak_sampled = 0;
    /* Exceeding a size for the first time is always a new maximum. */
    if (IGPROF_UNLIKELY(h->dump_above) && !h->dump_done && h->live_bytes > h->dump_above) {
      h->dump_done = 1;
      dump = 1;
    }
  }
  if (due) take_sample(h, now, at_peak);
  set_watch(h);
  return dump;
}

size_t igprof_heap_timeline(struct igprof_scratch *s, struct igprof_heap_sample **out,
                            struct igprof_heap_snapshot **snapshots, size_t *nsnapshots)
{
  struct igprof_heap *h = &igprof_heap;
  int locked = igprof_heap_lock(h);
  size_t n = 0, cap = (size_t) h->nsamples + 3;
  int peak_inserted = !h->peak_sampled && h->peak_bytes;
  struct igprof_heap_sample *v = igprof_scratch_alloc(s, sizeof *v * cap);
  struct igprof_heap_snapshot *snaps = igprof_scratch_alloc(s, sizeof *snaps * (h->nsnapshots + 1));
  *nsnapshots = 0;
  if (v && snaps) {
    v[n++] = (struct igprof_heap_sample){0, 0, 0}; /* the start */
    for (uint32_t i = 0; i <= h->nsamples; ++i) {
      if (i == h->peak_at && peak_inserted)
        v[n++] = (struct igprof_heap_sample){h->peak_ns - h->start_ns, h->peak_bytes, h->peak_blocks};
      if (i < h->nsamples) v[n++] = h->samples[i];
    }
    v[n++] = (struct igprof_heap_sample){coarse_ns() - h->start_ns, h->live_bytes, h->live_blocks}; /* now */
    for (uint32_t i = 0; i < h->nsnapshots; ++i) {
      const struct igprof_heap_snapshot *from = &h->snapshots[i];
      struct igprof_heap_path *paths = igprof_scratch_alloc(s, sizeof *paths * (from->count + 1));
      if (!paths) break;
      memcpy(paths, from->paths, sizeof *paths * from->count);
      uint32_t sample = 1 + from->sample + (peak_inserted && h->peak_at <= from->sample);
      snaps[(*nsnapshots)++] = (struct igprof_heap_snapshot){sample, from->count, paths, 0};
    }
  }
  igprof_heap_unlock(h, locked);
  *out = v;
  *snapshots = snaps;
  return v && snaps ? n : 0;
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
 * its MEM_LIVE, which the child's reset zeroed. Its timeline starts again. */
void igprof_heap_fork_child(void)
{
  struct igprof_heap *h = &igprof_heap;
  atomic_flag_clear(&h->lock);
  h->live_bytes = h->live_blocks = 0;
  h->peak_bytes = h->peak_blocks = 0;
  h->dump_done = 0; /* the child's heap may cross the size too: its own dump */
  __atomic_store_n(&h->peak_gen, h->peak_gen + 1, __ATOMIC_RELAXED);
  h->start_ns = h->peak_ns = coarse_ns();
  h->nsamples = 0;
  memset(igprof_heap_histogram, 0, sizeof igprof_heap_histogram);
  for (uint32_t i = 0; i < h->nsnapshots; ++i) drop_snapshot(&h->snapshots[i]);
  h->nsnapshots = 0;
  h->peak_at = 0;
  h->peak_sampled = 0;
  h->sample_due = h->start_ns + h->sample_ns;
  set_watch(h);
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
