/* The profiler's private memory. Nothing the profiler keeps comes from the
 * application's allocator (design.md §3.1): tree nodes, counters and thread
 * buffers are bumped out of per-thread mmap chunks and never freed, so the
 * fast path takes no lock and is safe in a signal handler; bigger, shorter
 * lived things (live-table shards, dump scratch) take whole pages. */
#include "internal.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHUNK_SIZE (256u * 1024u)
#define ALIGN 16u

void *igprof_mmap_syscall(void *addr, size_t len, int prot, int flags, int fd, long long off)
{
#ifdef SYS_mmap2
  return (void *) syscall(SYS_mmap2, addr, len, prot, flags, fd, (long) (off >> 12));
#else
  return (void *) syscall(SYS_mmap, addr, len, prot, flags, fd, (long) off);
#endif
}

static void *arena_alloc(size_t size, size_t align)
{
  struct igprof_thread *t = &igprof_tls;
  size = (size + align - 1) & ~(size_t) (align - 1);
  if (IGPROF_UNLIKELY(size > CHUNK_SIZE / 4)) return igprof_pages_alloc(size);
  if (align > ALIGN && t->arena_next) {
    char *next = (char *) (((uintptr_t) t->arena_next + align - 1) & ~(uintptr_t) (align - 1));
    t->arena_next = next < t->arena_end ? next : t->arena_end;
  }
  if (IGPROF_UNLIKELY((size_t) (t->arena_end - t->arena_next) < size)) {
    char *chunk = igprof_pages_alloc(CHUNK_SIZE);
    if (!chunk) return NULL;
    t->arena_next = chunk;
    t->arena_end = chunk + CHUNK_SIZE;
  }
  void *p = t->arena_next;
  t->arena_next += size;
  return p;
}

void *igprof_arena_alloc(size_t size) { return arena_alloc(size, ALIGN); }

void *igprof_arena_alloc_lines(size_t size) { return arena_alloc(size, IGPROF_CACHE_LINE); }

struct scratch_block {
  struct scratch_block *next;
  size_t size, used;
};

void *igprof_scratch_alloc(struct igprof_scratch *s, size_t size)
{
  size = (size + ALIGN - 1) & ~(size_t) (ALIGN - 1);
  struct scratch_block *b = s->head;
  size_t header = (sizeof *b + ALIGN - 1) & ~(size_t) (ALIGN - 1);
  if (!b || b->size - b->used < size) {
    size_t want = size + header > (1u << 20) ? size + header : (1u << 20);
    want = (want + 4095) & ~(size_t) 4095;
    b = igprof_pages_alloc(want);
    if (!b) return NULL;
    b->size = want;
    b->used = header;
    b->next = s->head;
    s->head = b;
  }
  void *p = (char *) b + b->used;
  b->used += size;
  return p;
}

size_t igprof_scratch_resident(const struct igprof_scratch *s)
{
  size_t page = (size_t) sysconf(_SC_PAGESIZE), bytes = 0;
  unsigned char vec[256];
  for (const struct scratch_block *b = s->head; b; b = b->next)
    for (size_t at = 0; at < b->size; at += page * sizeof vec) {
      size_t len = b->size - at < page * sizeof vec ? b->size - at : page * sizeof vec;
      if (mincore((char *) b + at, len, vec) != 0) return (size_t) -1;
      for (size_t k = 0; k < (len + page - 1) / page; ++k) bytes += (vec[k] & 1) ? page : 0;
    }
  return bytes;
}

void igprof_scratch_release(struct igprof_scratch *s)
{
  while (s->head) {
    struct scratch_block *b = s->head;
    s->head = b->next;
    igprof_pages_free(b, b->size);
  }
}
