/* The profiler's private memory at its lowest level: whole pages from the
 * kernel, never from the program's allocator (design.md §3.1). One mmap of
 * private anonymous memory, no lock, no libc state: usable in a signal
 * handler. The runtime's arena (src/profiler/arena.c) bumps its chunks out
 * of these; the walker (src/walk), a library of its own that the tests link
 * without the runtime, takes its tables and buffers from here too.
 * MAP_NORESERVE: a large mapping costs address space only until touched. */
#ifndef IGPROF_COMMON_PAGE_ALLOC_H
#define IGPROF_COMMON_PAGE_ALLOC_H

#include <stddef.h>
#include <sys/mman.h>

/* `size` bytes (rounded up to pages by the kernel), zeroed; NULL if the
 * kernel refuses. */
static inline void *igprof_pages_map(size_t size, int extra_flags)
{
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | extra_flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static inline void *igprof_pages_alloc(size_t size) { return igprof_pages_map(size, 0); }

/* As igprof_pages_alloc, for memory the caller is about to write all of
 * (a live-table shard that is filled as it is made): the kernel maps every
 * page at once, one call, rather than taking a fault on each first write. */
static inline void *igprof_pages_alloc_filled(size_t size) { return igprof_pages_map(size, MAP_POPULATE); }

/* Give back what igprof_pages_alloc(size) gave (NULL: nothing). */
static inline void igprof_pages_free(void *p, size_t size)
{
  if (p) munmap(p, size);
}

#endif
