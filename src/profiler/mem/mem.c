/* The memory profiler module "mem" (igprof -mp).
 *
 * Every malloc-family entry point is hooked by patching its prologue, so
 * calls from inside libc and through pointers are caught too. Each
 * replacement calls the original first, with the guard held (glibc's realloc
 * calls malloc internally, calloc may call others: those inner calls then go
 * straight through and are not counted twice), then records the result:
 *
 *   MEM_TOTAL  ticks = calls, value = bytes allocated
 *   MEM_MAX    ticks = calls, value = largest single allocation
 *   MEM_LIVE   ticks = blocks still live, value = their bytes,
 *              peak = the call path's high-water mark; ;LK lists the blocks
 *   MEM_PEAK   ticks, value = MEM_LIVE's at the moment the whole process's
 *              live bytes reached their maximum (heap.h)
 *
 * The application sees exactly libc's behaviour: same results, errno exactly
 * as the original left it on success and on failure (saved after the
 * original, around our bookkeeping), nothing recorded for a failed call.
 */
#define _GNU_SOURCE
#include "heap.h"
#include "mem_internal.h"
#include "options.h"
#include "walk.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum overhead { OVERHEAD_NONE, OVERHEAD_INCLUDE, OVERHEAD_DELTA };

static enum overhead overhead = OVERHEAD_NONE;
/* --min-size/--max-size: an allocation of `requested` bytes is walked when
 * requested - size_min <= size_span (unsigned: one compare for both ends). */
static uint64_t size_min = 0, size_max = UINT64_MAX, size_span = UINT64_MAX;
static int c_total = -1, c_max = -1, c_live = -1, c_peak = -1;
/* --lifetimes: MEM_TEMP, MEM_SHORT, MEM_LIFETIME (lifetime_end). */
static int lifetimes;
/* Per-allocation work beyond the counters (record_extras, --sample): one test. */
static int extras;
/* --sample: only sampled blocks enter the live table, each with its weight
 * in blocks where --lifetimes keeps a birth (the two do not combine). With
 * nothing else to do per allocation (no -mo, no --histogram: sample_early),
 * an allocation that does not reach its thread's countdown ends in
 * allocated(), before record. */
static int sampling, sample_early;
static int64_t short_ns;
static int c_temp = -1, c_short = -1, c_lifetime = -1;
/* The exit summary (heap.c): at a terminal only, always or never. */
static enum { SUMMARY_AUTO, SUMMARY_ALWAYS, SUMMARY_NEVER } summary = SUMMARY_AUTO;
static int counting;     /* the "mem" module itself is on */
static int hooks_state;  /* 0 not tried, 1 installed, -1 failed */
static size_t page_size;

#define MAX_LISTENERS 4
static const struct igprof_alloc_listener *listeners[MAX_LISTENERS];
static int listener_count;

/* The originals of one definition set of the malloc family. Slot 0 holds the
 * process-wide definitions (libc's, or a preloaded allocator's); a library
 * loaded later that defines its own malloc family (and calls it directly,
 * e.g. linked -Bsymbolic) gets the next slot: each slot has its own
 * replacement functions, so every call reaches the allocator it was meant for. */
struct mem_chain {
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  void (*free)(void *);
  void *(*memalign)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
};

#define MEM_SLOTS 4
static struct mem_chain chains[MEM_SLOTS];
static int slots_used = 1;

static void tell_alloc(void *ptr, size_t size, void *caller)
{
  for (int i = 0; i < listener_count; ++i)
    if (listeners[i]->on_alloc) listeners[i]->on_alloc(ptr, size, caller);
}

/* Before the original runs (free, realloc): errno kept for it. */
static void tell_free(void *ptr, void *caller)
{
  int saved = errno;
  for (int i = 0; i < listener_count; ++i)
    if (listeners[i]->on_free) listeners[i]->on_free(ptr, caller);
  errno = saved;
}

static void tell_call(enum igprof_alloc_fn fn, void *result, void *old, size_t n, size_t m,
                      size_t align, void *caller)
{
  const struct igprof_alloc_call c = {fn, result, old, n, m, align, caller};
  int saved = errno;
  for (int i = 0; i < listener_count; ++i)
    if (listeners[i]->on_call) listeners[i]->on_call(&c);
  errno = saved;
}

/* A listener's view of one call (tracers): guard held, errno kept. */
#define TELL(fn, result, old, n, m, align)                                                \
  do {                                                                                    \
    if (IGPROF_UNLIKELY(listener_count))                                                  \
      tell_call(IGPROF_ALLOC_##fn, result, old, n, m, align, caller);                       \
  } while (0)

/* The stack of an allocation made by a function whose own frame is gone
 * (the replacement runs in its place): its entry address stands for it as
 * the innermost frame, above the walk from its caller. */
static __attribute__((noinline)) struct igprof_node *capture_below(uintptr_t entry, void *caller,
                                                                   const void *frame)
{
  struct igprof_thread *t = &igprof_tls;
  int truncated = 0;
  if (IGPROF_UNLIKELY(!t->ready) && igprof_thread_prepare() != 0) return NULL;
  /* walk_pcs has room for the walk's slack beyond depth: one more fits. */
  int max = igprof_config.depth - 1, n = 0;
  if (max > 0) n = igprof_walk_from_hook_frame(t->walk_pcs + 1, max, caller, frame, &truncated);
  else truncated = 1;
  t->walk_pcs[0] = entry;
  return igprof_tree_push(t->walk_pcs, n + 1, truncated);
}

/* --lifetimes and --histogram for a new block; returns its birth (0
 * without --lifetimes). */
static __attribute__((noinline)) int64_t record_extras(void *ptr, uint64_t size)
{
  if (igprof_heap_histogram_on) igprof_heap_histogram_add(size);
  if (!lifetimes) return 0;
  igprof_tls.last_alloc = (uintptr_t) ptr;
  return igprof_heap_now();
}

/* Record a new block; guard held. `frame` is the replacement's frame
 * address (the walk starts at the caller from there); `entry` is 0, or the
 * innermost frame to add (capture_below); `usable` gives -mo its sizes. */
static inline __attribute__((always_inline)) void record_from(void *ptr, size_t requested, void *caller,
                                                              const void *frame, uintptr_t entry,
                                                              size_t (*usable)(void *))
{
  uint64_t size = requested;
  if (IGPROF_UNLIKELY(listener_count)) tell_alloc(ptr, requested, caller);
  if (!counting) return;
  if (overhead != OVERHEAD_NONE) {
    size_t have = usable ? usable(ptr) : requested; /* unknown: as asked, no overhead */
    size = overhead == OVERHEAD_INCLUDE ? have : have - requested;
    if (overhead == OVERHEAD_DELTA && size == 0) return;
  }
  int64_t blocks = 1, bytes = (int64_t) size;
  if (IGPROF_UNLIKELY(sampling)) {
    if (igprof_heap_histogram_on) igprof_heap_histogram_add(size); /* every allocation: exact */
    if (IGPROF_LIKELY(!igprof_mem_sample(size, &blocks, &bytes))) return;
  }
  igprof_live_prefetch((uintptr_t) ptr); /* its miss overlaps the walk */
  struct igprof_node *node;
  if (IGPROF_UNLIKELY((uint64_t) requested - size_min > size_span)) node = igprof_capture_synthetic(IGPROF_PC_SIZE_FILTERED);
  else node = entry ? capture_below(entry, caller, frame) : igprof_capture_from_hook(caller, frame);
  struct igprof_counter_value *c = node ? igprof_node_counters(node) : NULL;
  if (!c) return;
  /* The counter block is usually cold: ask for it, insert the block (its
   * slot was asked for before the walk), then count. */
  __builtin_prefetch(c, 1);
  if (IGPROF_UNLIKELY(extras)) {
    if (sampling) {
      igprof_live_insert_born((uintptr_t) ptr, node, (uint64_t) bytes, blocks);
      igprof_heap_alloc_n(node, c, blocks, bytes, (int64_t) size);
      return;
    }
    int64_t birth = record_extras(ptr, size);
    if (lifetimes) igprof_live_insert_born((uintptr_t) ptr, node, size, birth);
    else igprof_live_insert((uintptr_t) ptr, node, size);
  } else {
    igprof_live_insert((uintptr_t) ptr, node, size);
  }
  igprof_heap_alloc(node, c, (int64_t) size);
}

/* --lifetimes: a block of the node allocated at `birth` ends now (free,
 * realloc): temporary if it is its thread's latest allocation (nothing
 * allocated in between, heaptrack's "temporary"), short-lived if younger
 * than the threshold, and its age added up. */
static __attribute__((noinline, cold)) void lifetime_end(struct igprof_node *node, void *ptr, uint64_t size,
                                                          int64_t birth)
{
  struct igprof_counter_value *c = igprof_node_counters(node);
  if (!c) return;
  int saved = errno; /* a clock read */
  int64_t age = igprof_heap_now() - birth;
  errno = saved;
  if ((uintptr_t) ptr == igprof_tls.last_alloc) {
    igprof_tls.last_alloc = 0;
    igprof_counter_block_add(c, c_temp, 1, (int64_t) size);
  }
  if (age < short_ns) igprof_counter_block_add(c, c_short, 1, (int64_t) size);
  igprof_counter_block_add(c, c_lifetime, 1, age / 1000);
}

static void record(void *ptr, size_t requested, void *caller, const void *frame)
{
  record_from(ptr, requested, caller, frame, 0, malloc_usable_size);
}

void igprof_mem_record_operator(void *ptr, size_t size, void *caller, const void *frame, uintptr_t entry,
                                size_t (*usable)(void *))
{
  record_from(ptr, size, caller, frame, entry, usable);
}

int igprof_mem_counting(void) { return counting; }

/* Forget a block that is about to be freed or moved; guard held. Must run
 * before the real free: once freed, another thread may get the address. */
static inline __attribute__((always_inline)) int forget(void *ptr, void *caller, struct igprof_node **node,
                                                       uint64_t *size, int64_t *blocks)
{
  if (IGPROF_UNLIKELY(listener_count)) tell_free(ptr, caller);
  if (!counting) return 0;
  *blocks = 1;
  if (IGPROF_UNLIKELY(sampling)) {
    if (!igprof_live_remove_born((uintptr_t) ptr, node, size, blocks)) return 0;
  } else if (IGPROF_UNLIKELY(lifetimes)) {
    int64_t birth;
    if (!igprof_live_remove_born((uintptr_t) ptr, node, size, &birth)) return 0;
    lifetime_end(*node, ptr, *size, birth);
  } else if (!igprof_live_remove((uintptr_t) ptr, node, size)) {
    return 0;
  }
  /* The release that follows reads the node and its counter block, both
   * likely cold: ask for the node now, the caller frees in between. */
  __builtin_prefetch(*node);
  return 1;
}

/* A block out of the live table whose MEM_LIVE release waits for the
 * original's call (see igprof_thread.releasing). */
static inline void releasing(struct igprof_node *node, uint64_t size, int64_t blocks)
{
  igprof_tls.releasing_size = size;
  igprof_tls.releasing_blocks = blocks;
  igprof_tls.releasing = node;
}

static inline void release(struct igprof_node *node, uint64_t size, int64_t blocks)
{
  igprof_tls.releasing = NULL;
  igprof_heap_release_n(node, blocks, (int64_t) size);
}

void igprof_mem_settle(void)
{
  struct igprof_node *node = igprof_tls.releasing;
  if (node) release(node, igprof_tls.releasing_size, igprof_tls.releasing_blocks);
}

/* Around the original of a call that releases `ptr` (free, operator
 * delete); guard held, errno kept. Out of the live table before the
 * original: once released, another thread may get the address. Counted off
 * MEM_LIVE after it: the block left the live table before it, so no other
 * thread can meet it; only the counter update waits. */
static inline void release_begin(struct igprof_mem_release *r, void *ptr, void *caller)
{
  /* errno: forget leaves it alone (tell_free and lifetime_end keep it). */
  r->had = forget(ptr, caller, &r->node, &r->size, &r->blocks);
  if (r->had) releasing(r->node, r->size, r->blocks);
}

static inline void release_end(const struct igprof_mem_release *r)
{
  if (r->had) release(r->node, r->size, r->blocks); /* leaves errno alone */
}

void igprof_mem_release_begin(struct igprof_mem_release *r, void *ptr, void *caller)
{
  release_begin(r, ptr, caller);
}

void igprof_mem_release_end(const struct igprof_mem_release *r) { release_end(r); }

#define ACTIVE() IGPROF_MEM_ACTIVE()

/* The replacements' bodies, for the chain `c` of the definition that was
 * called; `caller` is the return address into the code that called it. */

/* The common tail of an allocating replacement: record a success (errno
 * kept as the original left it) and leave the profiler. */
static inline void *allocated(void *p, size_t size, void *caller, const void *frame)
{
  if (p) {
    if (IGPROF_UNLIKELY(sample_early) && IGPROF_LIKELY(!listener_count)) {
      int64_t left = igprof_tls.sample_left - (int64_t) size;
      if (IGPROF_LIKELY(left > 0)) {
        igprof_tls.sample_left = left;
        igprof_leave();
        return p;
      }
      /* It reaches the countdown: record_from draws its weight. */
    }
    int saved = errno;
    record(p, size, caller, frame);
    errno = saved;
  }
  igprof_leave();
  return p;
}

#define THROUGH(call) IGPROF_MEM_THROUGH(call)
#define THROUGH_VOID(call) IGPROF_MEM_THROUGH_VOID(call)
#define CHAIN(c, name) IGPROF_MEM_CHAIN((c)->name)

static inline void *mem_malloc_body(const struct mem_chain *c, void *caller, const void *frame,
                                    size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, malloc)(n);
  void *p = THROUGH(CHAIN(c, malloc)(n));
  TELL(MALLOC, p, NULL, n, 0, 0);
  return allocated(p, n, caller, frame);
}

static inline void *mem_calloc_body(const struct mem_chain *c, void *caller, const void *frame,
                                    size_t n, size_t m)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, calloc)(n, m);
  void *p = THROUGH(CHAIN(c, calloc)(n, m));
  TELL(CALLOC, p, NULL, n, m, 0);
  return allocated(p, n * m, caller, frame); /* no overflow: calloc succeeded */
}

/* The free of a block found in the live table (release_begin), guard held. */
static __attribute__((noinline)) void free_recorded(void (*orig)(void *), void *p, struct igprof_mem_release *r)
{
  releasing(r->node, r->size, r->blocks);
  THROUGH_VOID(orig(p));
  release_end(r);
  igprof_leave();
}

static inline __attribute__((always_inline)) void mem_free_body(const struct mem_chain *c, void *caller, void *p)
{
  if (!p || !ACTIVE() || !igprof_enter()) {
    CHAIN(c, free)(p);
    return;
  }
  TELL(FREE, NULL, p, 0, 0, 0);
  struct igprof_mem_release r;
  if (IGPROF_UNLIKELY(sampling)) {
    /* Most blocks were not sampled: their free is the live table's test;
     * a sampled one's in a function of its own. */
    r.had = forget(p, caller, &r.node, &r.size, &r.blocks);
    if (r.had) {
      free_recorded(CHAIN(c, free), p, &r);
      return;
    }
    THROUGH_VOID(CHAIN(c, free)(p));
    igprof_leave();
    return;
  }
  release_begin(&r, p, caller);
  THROUGH_VOID(CHAIN(c, free)(p));
  release_end(&r);
  igprof_leave();
}

/* realloc and reallocarray: `size` is the new size (SIZE_MAX if n*m
 * overflows, which the original then refuses). */
static inline void *mem_resize(const struct mem_chain *c, void *caller, const void *frame,
                               void *old, size_t size, int array, size_t n, size_t m)
{
  struct igprof_node *old_node = NULL;
  uint64_t old_size = 0;
  if (old && IGPROF_UNLIKELY(listener_count)) tell_free(old, caller);
  /* With --sample the birth is the block's weight in blocks (record_from). */
  int64_t birth = 0, old_blocks = 1;
  int had = old && counting
            && (IGPROF_UNLIKELY(lifetimes || sampling)
                  ? igprof_live_remove_born((uintptr_t) old, &old_node, &old_size, &birth)
                  : igprof_live_remove((uintptr_t) old, &old_node, &old_size));
  if (had && sampling) old_blocks = birth;
  if (had) releasing(old_node, old_size, old_blocks);
  void *p = THROUGH(array ? CHAIN(c, reallocarray)(old, n, m) : CHAIN(c, realloc)(old, n));
  int saved = errno;
  if (IGPROF_UNLIKELY(lifetimes) && had && (p || size == 0)) lifetime_end(old_node, old, old_size, birth);
  if (p) {
    if (had) release(old_node, old_size, old_blocks);
    record(p, size, caller, frame);
  } else if (had && size != 0) {
    /* Failed: the old block is still there, unchanged. */
    igprof_tls.releasing = NULL;
    if (lifetimes || sampling) igprof_live_insert_born((uintptr_t) old, old_node, old_size, birth);
    else igprof_live_insert((uintptr_t) old, old_node, old_size);
  } else if (had) {
    /* realloc(p, 0) freed p. */
    release(old_node, old_size, old_blocks);
  }
  errno = saved;
  return p;
}

static inline void *mem_realloc_body(const struct mem_chain *c, void *caller, const void *frame,
                                     void *old, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, realloc)(old, n);
  void *p = mem_resize(c, caller, frame, old, n, 0, n, 0);
  TELL(REALLOC, p, old, n, 0, 0);
  igprof_leave();
  return p;
}

static inline void *mem_reallocarray_body(const struct mem_chain *c, void *caller, const void *frame,
                                          void *old, size_t n, size_t m)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, reallocarray)(old, n, m);
  size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) bytes = SIZE_MAX; /* the original fails with ENOMEM */
  void *p = mem_resize(c, caller, frame, old, bytes, 1, n, m);
  TELL(REALLOCARRAY, p, old, n, m, 0);
  igprof_leave();
  return p;
}

static inline void *mem_memalign_body(const struct mem_chain *c, void *caller, const void *frame,
                                      size_t align, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, memalign)(align, n);
  void *p = THROUGH(CHAIN(c, memalign)(align, n));
  TELL(MEMALIGN, p, NULL, n, 0, align);
  return allocated(p, n, caller, frame);
}

static inline void *mem_aligned_alloc_body(const struct mem_chain *c, void *caller, const void *frame,
                                           size_t align, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, aligned_alloc)(align, n);
  void *p = THROUGH(CHAIN(c, aligned_alloc)(align, n));
  TELL(ALIGNED_ALLOC, p, NULL, n, 0, align);
  return allocated(p, n, caller, frame);
}

static inline int mem_posix_memalign_body(const struct mem_chain *c, void *caller, const void *frame,
                                          void **out, size_t align, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, posix_memalign)(out, align, n);
  int rc = THROUGH(CHAIN(c, posix_memalign)(out, align, n));
  /* errno as the original left it: glibc sets ENOMEM on some failures too. */
  int saved = errno;
  TELL(POSIX_MEMALIGN, rc == 0 ? *out : NULL, NULL, n, 0, align);
  if (rc == 0) record(*out, n, caller, frame);
  errno = saved;
  igprof_leave();
  return rc;
}

static inline void *mem_valloc_body(const struct mem_chain *c, void *caller, const void *frame,
                                    size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, valloc)(n);
  void *p = THROUGH(CHAIN(c, valloc)(n));
  TELL(VALLOC, p, NULL, n, 0, 0);
  return allocated(p, n, caller, frame);
}

static inline void *mem_pvalloc_body(const struct mem_chain *c, void *caller, const void *frame,
                                     size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return CHAIN(c, pvalloc)(n);
  void *p = THROUGH(CHAIN(c, pvalloc)(n));
  TELL(PVALLOC, p, NULL, n, 0, 0);
  /* pvalloc hands out whole pages: that is what the caller asked for. */
  return allocated(p, n ? (n + page_size - 1) & ~(page_size - 1) : page_size, caller, frame);
}

/* The replacement functions of slot k: __builtin_return_address(0) must be
 * taken in the function the patched entry jumps to. */
#define RA __builtin_return_address(0)
#define FA __builtin_frame_address(0)
#define MEM_SLOT(k)                                                                                      \
  static void *mem_malloc_##k(size_t n) { return mem_malloc_body(&chains[k], RA, FA, n); }                  \
  static void *mem_calloc_##k(size_t n, size_t m) { return mem_calloc_body(&chains[k], RA, FA, n, m); }     \
  static void *mem_realloc_##k(void *p, size_t n) { return mem_realloc_body(&chains[k], RA, FA, p, n); }    \
  static void *mem_reallocarray_##k(void *p, size_t n, size_t m)                                        \
  {                                                                                                     \
    return mem_reallocarray_body(&chains[k], RA, FA, p, n, m);                                              \
  }                                                                                                     \
  static void mem_free_##k(void *p) { mem_free_body(&chains[k], RA, p); }                                   \
  static void *mem_memalign_##k(size_t a, size_t n) { return mem_memalign_body(&chains[k], RA, FA, a, n); } \
  static int mem_posix_memalign_##k(void **o, size_t a, size_t n)                                       \
  {                                                                                                     \
    return mem_posix_memalign_body(&chains[k], RA, FA, o, a, n);                                            \
  }                                                                                                     \
  static void *mem_aligned_alloc_##k(size_t a, size_t n)                                                \
  {                                                                                                     \
    return mem_aligned_alloc_body(&chains[k], RA, FA, a, n);                                                \
  }                                                                                                     \
  static void *mem_valloc_##k(size_t n) { return mem_valloc_body(&chains[k], RA, FA, n); }                  \
  static void *mem_pvalloc_##k(size_t n) { return mem_pvalloc_body(&chains[k], RA, FA, n); }                \
  static const struct mem_chain replacements_##k = {                                                    \
    mem_malloc_##k, mem_calloc_##k, mem_realloc_##k, mem_reallocarray_##k, mem_free_##k,                \
    mem_memalign_##k, mem_posix_memalign_##k, mem_aligned_alloc_##k, mem_valloc_##k, mem_pvalloc_##k,  \
  };

MEM_SLOT(0)
MEM_SLOT(1)
MEM_SLOT(2)
MEM_SLOT(3)

static const struct mem_chain *const replacements[MEM_SLOTS] = {&replacements_0, &replacements_1,
                                                                &replacements_2, &replacements_3};

/* ---------------------------------------------------------------- */

/* `value` as the index of one of `names` (in enum order) into *out; a
 * one-line reason in err otherwise. */
static int choose(const char *key, const char *value, const char *const *names, int n, int *out, char *err,
                  size_t errlen)
{
  for (int i = 0; i < n; ++i)
    if (strcmp(value, names[i]) == 0) {
      *out = i;
      return 0;
    }
  char list[128];
  size_t len = 0;
  for (int i = 0; i < n && len < sizeof list; ++i)
    len += igprof_format(list + len, sizeof list - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
  igprof_format(err, errlen, "mem:%s must be %s, not '%s'", key, list, value);
  return -1;
}

static int mem_option(const char *key, const char *value, char *err, size_t errlen)
{
  static const char *const overheads[] = {"none", "include", "delta"};
  static const char *const summaries[] = {"auto", "always", "never"};
  int choice = 0;
  if (strcmp(key, "overhead") == 0 && value) {
    if (choose(key, value, overheads, 3, &choice, err, errlen) != 0) return -1;
    overhead = (enum overhead) choice;
    return 0;
  }
  if (strcmp(key, "summary") == 0 && value) {
    if (choose(key, value, summaries, 3, &choice, err, errlen) != 0) return -1;
    summary = choice;
    return 0;
  }
  if (strcmp(key, "timeline") == 0 && value) {
    unsigned long long bytes = 0, ms = 0;
    if (igprof_options_timeline(value, &bytes, &ms) != 0) {
      igprof_format(err, errlen, "mem:timeline must be <n>ms or a size in bytes above 0, not '%s'", value);
      return -1;
    }
    igprof_heap_set_timeline((int64_t) bytes, (int64_t) ms);
    return 0;
  }
  if (strcmp(key, "snapshots") == 0 && value) {
    long every = igprof_options_int(value, 1, 1000000);
    if (every < 0) {
      igprof_format(err, errlen, "mem:snapshots must be a number 1..1000000, not '%s'", value);
      return -1;
    }
    igprof_heap_set_snapshots((uint32_t) every);
    return 0;
  }
  if ((strcmp(key, "min_size") == 0 || strcmp(key, "max_size") == 0) && value) {
    unsigned long long bytes;
    if (igprof_options_size(value, &bytes) != 0) {
      igprof_format(err, errlen, "mem:%s must be a size in bytes (suffix k, M or G), not '%s'", key, value);
      return -1;
    }
    if (key[1] == 'i') size_min = bytes;
    else size_max = bytes;
    if (size_min > size_max) {
      igprof_format(err, errlen, "mem:min_size (%llu) is above mem:max_size (%llu)", (unsigned long long) size_min,
                    (unsigned long long) size_max);
      return -1;
    }
    size_span = size_max - size_min;
    return 0;
  }
  if (strcmp(key, "lifetimes") == 0 && value) {
    long ms = igprof_options_ms(value);
    if (ms < 0) {
      igprof_format(err, errlen, "mem:lifetimes must be <n>ms (1..3600000), not '%s'", value);
      return -1;
    }
    if (sampling) goto no_lifetimes;
    lifetimes = extras = 1;
    short_ns = (int64_t) ms * 1000000;
    return 0;
  }
  if (strcmp(key, "histogram") == 0 && !value) {
    igprof_heap_histogram_on = extras = 1;
    return 0;
  }
  if (strcmp(key, "sample") == 0 && value) {
    unsigned long long bytes;
    if (igprof_options_size(value, &bytes) != 0 || bytes == 0 || bytes > IGPROF_MEM_SAMPLE_MAX) {
      igprof_format(err, errlen, "mem:sample must be a size in bytes 1..1G (suffix k, M or G), not '%s'", value);
      return -1;
    }
    if (lifetimes) goto no_lifetimes;
    igprof_mem_sample_mean = bytes;
    sampling = extras = 1;
    return 0;
  }
  if (strcmp(key, "seed") == 0 && value) {
    long seed = igprof_options_int(value, 0, 2147483647);
    if (seed < 0) {
      igprof_format(err, errlen, "mem:seed must be a number 0..2147483647, not '%s'", value);
      return -1;
    }
    igprof_mem_sample_set_seed((uint64_t) seed);
    return 0;
  }
  if (strcmp(key, "dump_at") == 0 && value) {
    unsigned long long bytes;
    if (igprof_options_size(value, &bytes) != 0 || bytes == 0) {
      igprof_format(err, errlen, "mem:dump_at must be a size in bytes above 0 (suffix k, M or G), not '%s'", value);
      return -1;
    }
    igprof_heap_set_dump_above((int64_t) bytes);
    return 0;
  }
  igprof_format(err, errlen, "unknown option 'mem:%s'", key);
  return -1;
no_lifetimes:
  igprof_format(err, errlen, "mem:sample and mem:lifetimes do not combine (lifetimes need every block)");
  return -1;
}

/* The functions in hook order: free first, so a block is never recorded
 * without its free being seen. */
#define MEM_ALLOCATORS(X) \
  X(malloc) X(calloc) X(realloc) X(reallocarray) X(memalign) X(posix_memalign) X(aligned_alloc) \
  X(valloc) X(pvalloc)
#define MEM_FUNCTIONS(X) X(free) MEM_ALLOCATORS(X)

static int install_hooks(void)
{
  if (hooks_state) return hooks_state > 0 ? 0 : -1;
  hooks_state = -1;
  page_size = (size_t) sysconf(_SC_PAGESIZE);
  struct mem_chain *c = &chains[0];
  c->free = igprof_hook("mem", "free", (void *) replacements[0]->free, 1);
  if (!c->free) return -1; /* without free, MEM_LIVE would be wrong: nothing at all */
#define HOOK(name)                                                          \
  c->name = igprof_hook("mem", #name, (void *) replacements[0]->name, 1);   \
  if (!c->name) c->name = name; /* reported; calls still reach libc */
  MEM_ALLOCATORS(HOOK)
#undef HOOK
  hooks_state = 1;
  return 0;
}

/* A library just loaded that defines malloc-family functions of its own
 * (not the ones already hooked): hook them with the next slot's
 * replacements, whose chains lead to that library's originals. */
static void malloc_family_loaded(const char *path)
{
  void *found[10];
  size_t sizes[10];
  int i = 0, any = 0;
  /* Only the library's own definitions: a lookup through its dependencies
   * would find libc's even where another allocator is the process's (and
   * hooked), as jemalloc or tcmalloc preloaded are. */
#define FIND(name)                                              \
  found[i] = hook_lookup_exported(#name, path, &sizes[i]);      \
  if (found[i] && igprof_hook_is_installed(found[i])) found[i] = NULL; \
  any |= found[i] != NULL;                                      \
  ++i;
  MEM_FUNCTIONS(FIND)
#undef FIND
  if (!any) return;
  if (slots_used == MEM_SLOTS) {
    igprof_warn("mem: %s defines its own allocator, but all %d slots are taken: not profiled", path,
                MEM_SLOTS);
    return;
  }
  int k = slots_used++;
  struct mem_chain *c = &chains[k];
  i = 0;
#define INSTALL(name)                                                                             \
  if (found[i])                                                                                   \
    __atomic_store_n((void **) &c->name, igprof_hook_at("mem", #name, found[i], sizes[i],          \
                                                        (void *) replacements[k]->name, 1),       \
                     __ATOMIC_RELEASE);                                                           \
  if (!c->name) c->name = chains[0].name;                                                         \
  ++i;
  MEM_FUNCTIONS(INSTALL)
#undef INSTALL
  igprof_debug("mem: allocator of %s hooked in slot %d", path, k);
}

static void mem_library_loaded(const char *path)
{
  if (hooks_state != 1) return;
  malloc_family_loaded(path);
  if (counting) igprof_mem_cxx_library_loaded(path);
}

int igprof_mem_listen(const struct igprof_alloc_listener *l)
{
  if (listener_count == MAX_LISTENERS) return -1;
  if (install_hooks() != 0) return -1;
  listeners[listener_count++] = l;
  return 0;
}

static int mem_start(void)
{
  /* IgProf's slot order, so IgProf's tools list them alike. */
  c_total = igprof_counter_define("MEM_TOTAL", IGPROF_COUNTER_SUM, 0);
  c_max = igprof_counter_define("MEM_MAX", IGPROF_COUNTER_MAX, 0);
  c_live = igprof_counter_define("MEM_LIVE", IGPROF_COUNTER_TICK, 1);
  if (c_total < 0 || c_max < 0 || c_live < 0) return -1;
  c_peak = igprof_heap_start(c_total, c_max, c_live);
  if (c_peak < 0) return -1;
  if (sampling) igprof_live_keep_births(); /* the sampled blocks' weights */
  sample_early = sampling && overhead == OVERHEAD_NONE && !igprof_heap_histogram_on;
  if (lifetimes) {
    igprof_live_keep_births();
    c_temp = igprof_counter_define("MEM_TEMP", IGPROF_COUNTER_SUM, 0);
    c_short = igprof_counter_define("MEM_SHORT", IGPROF_COUNTER_SUM, 0);
    c_lifetime = igprof_counter_define("MEM_LIFETIME", IGPROF_COUNTER_SUM, 0);
    if (c_temp < 0 || c_short < 0 || c_lifetime < 0) return -1;
  }
  if (install_hooks() != 0) return -1;
  counting = 1;
  igprof_mem_cxx_start();
  return 0;
}

static void mem_fork_child(void)
{
  if (!counting) return;
  /* The child's profile is its own: it starts from zero (igprof_live_fork_child
   * emptied the live table). */
  uint32_t mask = 1u << c_total | 1u << c_max | 1u << c_live | 1u << c_peak;
  if (lifetimes) mask |= 1u << c_temp | 1u << c_short | 1u << c_lifetime;
  igprof_tree_reset_counters(mask);
  igprof_heap_fork_child();
  atomic_store_explicit(&igprof_mem_sampled, 0, memory_order_relaxed);
}

/* The heap's peak on stderr: by default only when stderr is a terminal, so
 * the program's captured stderr stays its own (design.md §3.6). */
static void mem_before_final_dump(void)
{
  if (!counting || summary == SUMMARY_NEVER) return;
  int saved = errno;
  if (summary == SUMMARY_ALWAYS || isatty(2)) {
    igprof_heap_summary();
    if (sampling)
      igprof_warn("heap figures estimated from %llu allocations sampled, one per %llu bytes on average",
                  (unsigned long long) atomic_load_explicit(&igprof_mem_sampled, memory_order_relaxed),
                  (unsigned long long) igprof_mem_sample_mean);
  }
  errno = saved; /* an exec that fails goes on with the program */
}

static struct igprof_module mem_module = {
  .name = "mem",
  .option = mem_option,
  .start = mem_start,
  .fork_child = mem_fork_child,
  .before_final_dump = mem_before_final_dump,
  .library_loaded = mem_library_loaded,
};
IGPROF_MODULE(mem_module);
