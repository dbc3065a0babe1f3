/* A shared library with an allocator of its own (a bump allocator over a
 * static arena), linked -Bsymbolic so its own calls reach its own malloc:
 * loaded with dlopen after start-up, it must still be profiled. */
#include <stddef.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static _Alignas(16) char arena[1 << 20];
static size_t used;

void *malloc(size_t n)
{
  n = (n + 15) & ~(size_t) 15;
  if (used + n > sizeof arena) return NULL;
  void *p = arena + used;
  used += n;
  return p;
}

void free(void *p) { (void) p; }

void *calloc(size_t n, size_t m)
{
  void *p = malloc(n * m);
  if (p) memset(p, 0, n * m);
  return p;
}

void *realloc(void *p, size_t n)
{
  void *q = malloc(n);
  if (q && p) memcpy(q, p, n); /* test only: callers never grow */
  return q;
}

NOINLINE void *own_alloc(size_t n) { return malloc(n); }

/* 10 blocks of 48 bytes, 4 freed: MEM_TOTAL (10, 480), MEM_LIVE (6, 288). */
int own_alloc_test(void)
{
  void *p[10];
  for (int i = 0; i < 10; ++i) p[i] = own_alloc(48);
  for (int i = 0; i < 4; ++i) free(p[i]);
  return p[9] != NULL;
}
