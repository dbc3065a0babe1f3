/* Shared library of the walk corpus: reached through the PLT, calls back
 * into the program and into libc, so stacks cross module boundaries. */
#include <stdlib.h>
#include <string.h>

typedef void (*corpus_fn)(int);

__attribute__((noinline)) int corpus_lib_apply(corpus_fn fn, int n)
{
  volatile int sum = 0;
  for (int i = 0; i < n; i++) {
    fn(i);
    sum += i;
  }
  return sum;
}

static corpus_fn sort_callback;

static int compare_ints(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  if (((unsigned)x * 2654435761u) % 211 == 0)
    sort_callback(x);
  return (x > y) - (x < y);
}

/* qsort inside libc calling back into this library, which calls the program. */
__attribute__((noinline)) void corpus_lib_sort(corpus_fn fn, int n)
{
  int *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++)
    v[i] = (int)(((unsigned)i * 7919u) % (unsigned)n);
  sort_callback = fn;
  qsort(v, (size_t)n, sizeof *v, compare_ints);
  free(v);
}

/* CPU work inside the library for the sampler. */
__attribute__((noinline)) unsigned corpus_lib_burn(int rounds)
{
  char buf[512];
  unsigned h = 0;
  for (int r = 0; r < rounds; r++) {
    memset(buf, r, sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++)
      h = h * 31 + (unsigned char)buf[i];
    h ^= (unsigned)strlen(buf);
  }
  return h;
}
