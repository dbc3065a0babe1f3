/* The page profiler module "pages" (igprof -mm): the memory a process maps
 * (mmap, mremap) and its heap growth (brk, sbrk), per call path, so memory
 * that malloc never sees - a custom allocator's arenas, big buffers mapped
 * directly - is accounted, and malloc's own mappings show at the call that
 * made malloc map them:
 *
 *   MMAP_TOTAL  ticks = calls that mapped, value = bytes mapped
 *   MMAP_LIVE   ticks = ranges still mapped, value = their bytes,
 *               peak = the call path's high-water mark
 *
 * mmap and mremap count whole pages; brk and sbrk the bytes the break moved.
 * A range unmapped (munmap, a mapping placed over it, the break moving down,
 * mremap moving it) leaves MMAP_LIVE of the path that mapped it, split when
 * only part of it goes. mremap is a release of the old range and a new
 * mapping at the mremap call, as realloc is for malloc. The profiler's own
 * mappings are not counted (made with the guard held); libc's mappings made
 * inside a malloc-family hook are (see pages_begin).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "spinlock.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int c_total = -1, c_live = -1;
static size_t page_size;
static uintptr_t libc_lo, libc_hi;

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);
static int (*real_munmap)(void *, size_t);
static int (*real_brk)(void *);
static void *(*real_sbrk)(intptr_t);

/* ---------------------------------------------------------------- */
/* The live ranges: sorted by start, never overlapping                */
/* ---------------------------------------------------------------- */

struct range {
  uintptr_t start, end;
  struct igprof_node *node;
};

static atomic_flag ranges_lock;
static struct range *ranges;
static size_t nranges, ranges_cap;

static void live_add(struct igprof_node *node, int64_t ranges_delta, int64_t bytes)
{
  struct igprof_counter_value *c = igprof_node_counters(node);
  if (c) igprof_counter_block_add(c, c_live, ranges_delta, bytes);
}

/* The first range that ends after addr. */
static size_t first_after(uintptr_t addr)
{
  size_t lo = 0, hi = nranges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ranges[mid].end <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Room for one more range at index i. Returns 0, or -1 without memory (the
 * range then goes uncounted, never the program's call). */
static int open_slot(size_t i)
{
  if (nranges == ranges_cap) {
    size_t cap = ranges_cap ? ranges_cap * 2 : 256;
    struct range *fresh = igprof_pages_alloc(sizeof *fresh * cap);
    if (!fresh) return -1;
    if (ranges) {
      memcpy(fresh, ranges, sizeof *fresh * nranges);
      igprof_pages_free(ranges, sizeof *fresh * ranges_cap);
    }
    ranges = fresh;
    ranges_cap = cap;
  }
  memmove(&ranges[i + 1], &ranges[i], sizeof *ranges * (nranges - i));
  nranges++;
  return 0;
}

/* [start, end) is no longer mapped: every range overlapping it loses the
 * overlap, is cut short, split in two or goes. Lock held. */
static void forget(uintptr_t start, uintptr_t end)
{
  size_t i = first_after(start);
  while (i < nranges && ranges[i].start < end) {
    struct range *r = &ranges[i];
    uintptr_t lo = r->start > start ? r->start : start, hi = r->end < end ? r->end : end;
    if (lo == r->start && hi == r->end) {
      live_add(r->node, -1, -(int64_t) (hi - lo));
      memmove(r, r + 1, sizeof *ranges * (nranges - i - 1));
      nranges--;
      continue;
    }
    if (lo > r->start && hi < r->end) { /* a hole in the middle: two ranges */
      if (open_slot(i + 1) != 0) return;
      r = &ranges[i];
      ranges[i + 1] = (struct range){hi, r->end, r->node};
      r->end = lo;
      live_add(r->node, 1, -(int64_t) (hi - lo));
      return;
    }
    live_add(r->node, 0, -(int64_t) (hi - lo));
    if (lo == r->start) r->start = hi;
    else r->end = lo;
    ++i;
  }
}

static void remember(uintptr_t start, uintptr_t end, struct igprof_node *node)
{
  forget(start, end); /* a mapping placed over others (MAP_FIXED) replaces them */
  size_t i = first_after(start);
  if (open_slot(i) != 0) return;
  ranges[i] = (struct range){start, end, node};
  live_add(node, 1, (int64_t) (end - start));
}

static void ranges_forget(uintptr_t start, uintptr_t end)
{
  if (start >= end) return;
  igprof_spin_lock(&ranges_lock);
  forget(start, end);
  igprof_spin_unlock(&ranges_lock);
}

/* A new range [start, start + bytes) mapped by the call at `caller`. */
static void mapped(void *caller, const void *frame, uintptr_t start, size_t bytes)
{
  if (!bytes) return;
  struct igprof_node *node = igprof_capture_from_hook(caller, frame);
  struct igprof_counter_value *c = node ? igprof_node_counters(node) : NULL;
  if (!c) return;
  igprof_counter_block_add(c, c_total, 1, (int64_t) bytes);
  igprof_spin_lock(&ranges_lock);
  remember(start, start + bytes, node);
  igprof_spin_unlock(&ranges_lock);
}

static size_t whole_pages(size_t len) { return (len + page_size - 1) & ~(page_size - 1); }

/* ---------------------------------------------------------------- */
/* The hooks                                                          */
/* ---------------------------------------------------------------- */

enum entry { ENTERED = 1, FROM_MALLOC = 2 };

/* Is this call the program's? The profiler's own (guard held, BUSY) are
 * not; libc's inside a malloc-family hook running the original (THROUGH),
 * told apart by the caller being libc, are: the allocator maps for the
 * program. Either way the guard is BUSY while the call is counted. */
static int pages_begin(void *caller, int *entry)
{
  if (!IGPROF_LIKELY(atomic_load_explicit(&igprof_state.active, memory_order_relaxed))) return 0;
  if (igprof_enter()) {
    *entry = ENTERED;
    return 1;
  }
  if (igprof_tls.guard != IGPROF_GUARD_THROUGH || (uintptr_t) caller < libc_lo || (uintptr_t) caller >= libc_hi)
    return 0;
  igprof_through_end();
  *entry = FROM_MALLOC;
  return 1;
}

static void pages_end(int entry)
{
  if (entry == ENTERED) igprof_leave();
  else igprof_through_begin();
}

#define RA __builtin_return_address(0)
#define FA __builtin_frame_address(0)

static void *pages_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  int entry;
  if (IGPROF_UNLIKELY(!real_mmap)) return igprof_mmap_syscall(addr, len, prot, flags, fd, off);
  if (!pages_begin(RA, &entry)) return real_mmap(addr, len, prot, flags, fd, off);
  void *r = real_mmap(addr, len, prot, flags, fd, off);
  int saved = errno;
  if (r != MAP_FAILED) mapped(RA, FA, (uintptr_t) r, whole_pages(len));
  pages_end(entry);
  errno = saved;
  return r;
}

#if UINTPTR_MAX == 0xffffffffu
/* 32-bit glibc's mmap64 is a function of its own, with a 64-bit offset. */
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);

static void *pages_mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
  int entry;
  if (IGPROF_UNLIKELY(!real_mmap64)) return igprof_mmap_syscall(addr, len, prot, flags, fd, off);
  if (!pages_begin(RA, &entry)) return real_mmap64(addr, len, prot, flags, fd, off);
  void *r = real_mmap64(addr, len, prot, flags, fd, off);
  int saved = errno;
  if (r != MAP_FAILED) mapped(RA, FA, (uintptr_t) r, whole_pages(len));
  pages_end(entry);
  errno = saved;
  return r;
}
#endif

/* Forgotten before the call: once unmapped, another thread may map the
 * range again and must not lose it. Linux unmaps any page-aligned range of
 * a non-zero length, mapped or not: other calls fail and change nothing. */
static int pages_munmap(void *addr, size_t len)
{
  int entry;
  if (IGPROF_UNLIKELY(!real_munmap)) return (int) syscall(SYS_munmap, addr, len);
  if (!pages_begin(RA, &entry)) return real_munmap(addr, len);
  if (len && !((uintptr_t) addr & (page_size - 1))) ranges_forget((uintptr_t) addr, (uintptr_t) addr + whole_pages(len));
  int rc = real_munmap(addr, len);
  int saved = errno;
  pages_end(entry);
  errno = saved;
  return rc;
}

static void *pages_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
  int entry;
  if (!(flags & MREMAP_FIXED)) new_addr = NULL; /* the fifth argument exists only then */
  if (!pages_begin(RA, &entry)) return real_mremap(old, old_len, new_len, flags, new_addr);
  void *r = real_mremap(old, old_len, new_len, flags, new_addr);
  int saved = errno;
  if (r != MAP_FAILED) {
    ranges_forget((uintptr_t) old, (uintptr_t) old + whole_pages(old_len));
    mapped(RA, FA, (uintptr_t) r, whole_pages(new_len));
  }
  pages_end(entry);
  errno = saved;
  return r;
}

/* The break before a brk or sbrk call: sbrk(0) is only a read. */
static uintptr_t current_break(void) { return (uintptr_t) real_sbrk(0); }

/* The break moved from `from` to `to` by the call at `caller`. */
static void break_moved(void *caller, const void *frame, uintptr_t from, uintptr_t to)
{
  if (to > from) mapped(caller, frame, from, to - from);
  else ranges_forget(to, from);
}

static int pages_brk(void *addr)
{
  int entry;
  if (!pages_begin(RA, &entry)) return real_brk(addr);
  uintptr_t from = current_break();
  int rc = real_brk(addr);
  int saved = errno;
  if (rc == 0) break_moved(RA, FA, from, (uintptr_t) addr);
  pages_end(entry);
  errno = saved;
  return rc;
}

static void *pages_sbrk(intptr_t increment)
{
  int entry;
  if (!increment || !pages_begin(RA, &entry)) return real_sbrk(increment);
  void *r = real_sbrk(increment);
  int saved = errno;
  if (r != (void *) -1) break_moved(RA, FA, (uintptr_t) r, (uintptr_t) r + (uintptr_t) increment);
  pages_end(entry);
  errno = saved;
  return r;
}

/* ---------------------------------------------------------------- */

static int pages_start(void)
{
  c_total = igprof_counter_define("MMAP_TOTAL", IGPROF_COUNTER_SUM, 0);
  c_live = igprof_counter_define("MMAP_LIVE", IGPROF_COUNTER_TICK, 0);
  if (c_total < 0 || c_live < 0) return -1;
  page_size = (size_t) sysconf(_SC_PAGESIZE);
  size_t size;
  igprof_module_span_at((uintptr_t) hook_lookup("mmap", NULL, NULL, &size), &libc_lo, &libc_hi);
  real_mmap = igprof_hook("pages", "mmap", (void *) pages_mmap, 1);
  if (!real_mmap) return -1;
#if UINTPTR_MAX == 0xffffffffu
  real_mmap64 = igprof_hook("pages", "mmap64", (void *) pages_mmap64, 1);
#else
  /* The same function as mmap on 64-bit glibc: then this returns mmap's chain. */
  igprof_hook("pages", "mmap64", (void *) pages_mmap, 0);
#endif
  real_mremap = igprof_hook("pages", "mremap", (void *) pages_mremap, 1);
  if (!real_mremap) real_mremap = mremap;
  real_munmap = igprof_hook("pages", "munmap", (void *) pages_munmap, 1);
  if (!real_munmap) real_munmap = munmap;
  real_sbrk = igprof_hook("pages", "sbrk", (void *) pages_sbrk, 1);
  if (!real_sbrk) real_sbrk = sbrk;
  real_brk = igprof_hook("pages", "brk", (void *) pages_brk, 1);
  if (!real_brk) real_brk = brk;
  return 0;
}

/* The child's mappings count from its fork, as its allocations do. */
static void pages_fork_child(void)
{
  atomic_flag_clear(&ranges_lock);
  nranges = 0;
  igprof_tree_reset_counters(1u << c_total | 1u << c_live);
}

static struct igprof_module pages_module = {
  .name = "pages",
  .start = pages_start,
  .fork_child = pages_fork_child,
};
IGPROF_MODULE(pages_module);
