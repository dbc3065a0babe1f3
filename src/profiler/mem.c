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
 *
 * The application sees exactly libc's behaviour: same results, same errno
 * (saved around our bookkeeping), nothing recorded for a failed call.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum overhead { OVERHEAD_NONE, OVERHEAD_INCLUDE, OVERHEAD_DELTA };

static enum overhead overhead = OVERHEAD_NONE;
static int c_total = -1, c_max = -1, c_live = -1;
static int counting;     /* the "mem" module itself is on */
static int hooks_state;  /* 0 not tried, 1 installed, -1 failed */
static size_t page_size;

#define MAX_LISTENERS 4
static const struct igprof_alloc_listener *listeners[MAX_LISTENERS];
static int listener_count;

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static void (*real_free)(void *);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);

static void tell_alloc(void *ptr, size_t size, void *caller)
{
  for (int i = 0; i < listener_count; ++i)
    if (listeners[i]->on_alloc) listeners[i]->on_alloc(ptr, size, caller);
}

static void tell_free(void *ptr, void *caller)
{
  for (int i = 0; i < listener_count; ++i)
    if (listeners[i]->on_free) listeners[i]->on_free(ptr, caller);
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
      tell_call(IGPROF_ALLOC_##fn, result, old, n, m, align, __builtin_return_address(0)); \
  } while (0)

/* Record a new block; guard held. */
static void record(void *ptr, size_t requested, void *caller)
{
  uint64_t size = requested;
  if (IGPROF_UNLIKELY(listener_count)) tell_alloc(ptr, requested, caller);
  if (!counting) return;
  if (overhead != OVERHEAD_NONE) {
    size_t usable = malloc_usable_size(ptr);
    size = overhead == OVERHEAD_INCLUDE ? usable : usable - requested;
    if (overhead == OVERHEAD_DELTA && size == 0) return;
  }
  struct igprof_node *node = igprof_capture_from_hook(caller);
  if (!node) return;
  igprof_counter_add(node, c_total, 1, (int64_t) size);
  igprof_counter_add(node, c_max, 1, (int64_t) size);
  igprof_counter_add(node, c_live, 1, (int64_t) size);
  igprof_live_insert((uintptr_t) ptr, node, size);
}

/* Forget a block that is about to be freed or moved; guard held. Must run
 * before the real free: once freed, another thread may get the address. */
static void forget(void *ptr, void *caller)
{
  struct igprof_node *node;
  uint64_t size;
  if (IGPROF_UNLIKELY(listener_count)) tell_free(ptr, caller);
  if (counting && igprof_live_remove((uintptr_t) ptr, &node, &size)) igprof_counter_release(node, c_live, 1, (int64_t) size);
}

#define ACTIVE() IGPROF_LIKELY(atomic_load_explicit(&igprof_state.active, memory_order_relaxed))

static void *mem_malloc(size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_malloc(n);
  void *p = real_malloc(n);
  TELL(MALLOC, p, NULL, n, 0, 0);
  if (p) {
    int saved = errno;
    record(p, n, __builtin_return_address(0));
    errno = saved;
  }
  igprof_leave();
  return p;
}

static void *mem_calloc(size_t n, size_t m)
{
  if (!ACTIVE() || !igprof_enter()) return real_calloc(n, m);
  void *p = real_calloc(n, m);
  TELL(CALLOC, p, NULL, n, m, 0);
  if (p) {
    int saved = errno;
    record(p, n * m, __builtin_return_address(0)); /* no overflow: calloc succeeded */
    errno = saved;
  }
  igprof_leave();
  return p;
}

static void mem_free(void *p)
{
  if (!p || !ACTIVE() || !igprof_enter()) {
    real_free(p);
    return;
  }
  TELL(FREE, NULL, p, 0, 0, 0);
  int saved = errno;
  forget(p, __builtin_return_address(0));
  errno = saved;
  real_free(p);
  igprof_leave();
}

/* realloc and reallocarray share this: `call` runs the original. */
static void *resize(void *old, size_t size, void *caller, void *(*call)(void *, size_t, size_t),
                    size_t a, size_t b)
{
  struct igprof_node *old_node = NULL;
  uint64_t old_size = 0;
  if (old && IGPROF_UNLIKELY(listener_count)) tell_free(old, caller);
  int had = old && counting && igprof_live_remove((uintptr_t) old, &old_node, &old_size);
  void *p = call(old, a, b);
  int saved = errno;
  if (p) {
    if (had) igprof_counter_release(old_node, c_live, 1, (int64_t) old_size);
    record(p, size, caller);
  } else if (had && size != 0) {
    /* Failed: the old block is still there, unchanged. */
    igprof_live_insert((uintptr_t) old, old_node, old_size);
  } else if (had) {
    /* realloc(p, 0) freed p. */
    igprof_counter_release(old_node, c_live, 1, (int64_t) old_size);
  }
  errno = saved;
  return p;
}

static void *call_realloc(void *p, size_t n, size_t unused)
{
  (void) unused;
  return real_realloc(p, n);
}

static void *call_reallocarray(void *p, size_t n, size_t m) { return real_reallocarray(p, n, m); }

static void *mem_realloc(void *old, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_realloc(old, n);
  void *p = resize(old, n, __builtin_return_address(0), call_realloc, n, 0);
  TELL(REALLOC, p, old, n, 0, 0);
  igprof_leave();
  return p;
}

static void *mem_reallocarray(void *old, size_t n, size_t m)
{
  if (!ACTIVE() || !igprof_enter()) return real_reallocarray(old, n, m);
  size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) bytes = SIZE_MAX; /* the original fails with ENOMEM */
  void *p = resize(old, bytes, __builtin_return_address(0), call_reallocarray, n, m);
  TELL(REALLOCARRAY, p, old, n, m, 0);
  igprof_leave();
  return p;
}

static void *mem_memalign(size_t align, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_memalign(align, n);
  void *p = real_memalign(align, n);
  TELL(MEMALIGN, p, NULL, n, 0, align);
  if (p) {
    int saved = errno;
    record(p, n, __builtin_return_address(0));
    errno = saved;
  }
  igprof_leave();
  return p;
}

static void *mem_aligned_alloc(size_t align, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_aligned_alloc(align, n);
  void *p = real_aligned_alloc(align, n);
  TELL(ALIGNED_ALLOC, p, NULL, n, 0, align);
  if (p) {
    int saved = errno;
    record(p, n, __builtin_return_address(0));
    errno = saved;
  }
  igprof_leave();
  return p;
}

static int mem_posix_memalign(void **out, size_t align, size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_posix_memalign(out, align, n);
  int saved = errno;
  int rc = real_posix_memalign(out, align, n);
  TELL(POSIX_MEMALIGN, rc == 0 ? *out : NULL, NULL, n, 0, align);
  if (rc == 0) record(*out, n, __builtin_return_address(0));
  errno = saved; /* posix_memalign reports through its result, never errno */
  igprof_leave();
  return rc;
}

static void *mem_valloc(size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_valloc(n);
  void *p = real_valloc(n);
  TELL(VALLOC, p, NULL, n, 0, 0);
  if (p) {
    int saved = errno;
    record(p, n, __builtin_return_address(0));
    errno = saved;
  }
  igprof_leave();
  return p;
}

static void *mem_pvalloc(size_t n)
{
  if (!ACTIVE() || !igprof_enter()) return real_pvalloc(n);
  void *p = real_pvalloc(n);
  TELL(PVALLOC, p, NULL, n, 0, 0);
  if (p) {
    int saved = errno;
    /* pvalloc hands out whole pages: that is what the caller asked for. */
    size_t rounded = n ? (n + page_size - 1) & ~(page_size - 1) : page_size;
    record(p, rounded, __builtin_return_address(0));
    errno = saved;
  }
  igprof_leave();
  return p;
}

/* ---------------------------------------------------------------- */

static int mem_option(const char *key, const char *value, char *err, size_t errlen)
{
  if (strcmp(key, "overhead") == 0 && value) {
    if (strcmp(value, "none") == 0) overhead = OVERHEAD_NONE;
    else if (strcmp(value, "include") == 0) overhead = OVERHEAD_INCLUDE;
    else if (strcmp(value, "delta") == 0) overhead = OVERHEAD_DELTA;
    else {
      igprof_format(err, errlen, "mem:overhead must be none, include or delta, not '%s'", value);
      return -1;
    }
    return 0;
  }
  igprof_format(err, errlen, "unknown option 'mem:%s'", key);
  return -1;
}

#define HOOK(name)                                                                    \
  do {                                                                                \
    real_##name = igprof_hook("mem", #name, (void *) mem_##name, 1);                  \
    if (!real_##name) ok = 0;                                                         \
  } while (0)

static int install_hooks(void)
{
  int ok = 1;
  if (hooks_state) return hooks_state > 0 ? 0 : -1;
  hooks_state = -1;
  page_size = (size_t) sysconf(_SC_PAGESIZE);
  /* free first: a block must never be recorded without its free being seen. */
  HOOK(free);
  if (!real_free) return -1;
  HOOK(malloc);
  HOOK(calloc);
  HOOK(realloc);
  HOOK(reallocarray);
  HOOK(memalign);
  HOOK(posix_memalign);
  HOOK(aligned_alloc);
  HOOK(valloc);
  HOOK(pvalloc);
  (void) ok; /* a missing hook was reported; the others still count */
  if (!real_malloc) real_malloc = malloc;
  if (!real_calloc) real_calloc = calloc;
  if (!real_realloc) real_realloc = realloc;
  if (!real_reallocarray) real_reallocarray = reallocarray;
  if (!real_memalign) real_memalign = memalign;
  if (!real_posix_memalign) real_posix_memalign = posix_memalign;
  if (!real_aligned_alloc) real_aligned_alloc = aligned_alloc;
  if (!real_valloc) real_valloc = valloc;
  if (!real_pvalloc) real_pvalloc = pvalloc;
  hooks_state = 1;
  return 0;
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
  c_total = igprof_counter_define("MEM_TOTAL", IGPROF_COUNTER_TICK, 0);
  c_max = igprof_counter_define("MEM_MAX", IGPROF_COUNTER_MAX, 0);
  c_live = igprof_counter_define("MEM_LIVE", IGPROF_COUNTER_TICK, 1);
  if (c_total < 0 || c_max < 0 || c_live < 0) return -1;
  if (install_hooks() != 0) return -1;
  counting = 1;
  return 0;
}

static void mem_fork_child(void)
{
  if (!counting) return;
  /* The child's profile is its own: it starts from zero (igprof_live_fork_child
   * emptied the live table). */
  igprof_tree_reset_counters(1u << c_total | 1u << c_max | 1u << c_live);
}

static struct igprof_module mem_module = {
  .name = "mem",
  .option = mem_option,
  .start = mem_start,
  .fork_child = mem_fork_child,
};
IGPROF_MODULE(mem_module);
