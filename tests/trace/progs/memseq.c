/* A known sequence of malloc-family calls for trace.mem.*: the program
 * prints what each call returned, so the test can predict every trace line. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct record {
  const char *what;
  void *old, *result;
};

static struct record log_[32];
static int nlog;

static void note(const char *what, void *old, void *result)
{
  log_[nlog++] = (struct record){what, old, result};
}

int main(void)
{
  free(malloc(1357)); /* start marker */
  void *a = malloc(123);
  note("malloc", NULL, a);
  void *b = calloc(4, 25);
  note("calloc", NULL, b);
  uintptr_t a_addr = (uintptr_t) a; /* a is gone after realloc */
  void *c = realloc(a, 1000);
  note("realloc", (void *) a_addr, c);
  void *d = reallocarray(NULL, 10, 30);
  note("reallocarray", NULL, d);
  void *e = memalign(64, 200);
  note("memalign", NULL, e);
  void *f = NULL;
  int rc = posix_memalign(&f, 128, 300);
  note("posix_memalign", NULL, rc == 0 ? f : NULL);
  void *g = aligned_alloc(256, 512);
  note("aligned_alloc", NULL, g);
  void *h = valloc(100);
  note("valloc", NULL, h);
  void *i = pvalloc(5000);
  note("pvalloc", NULL, i);
  /* fails: ENOMEM (more than any object may have); volatile: GCC would
   * refuse the constant size at compile time */
  volatile size_t too_big = (size_t)PTRDIFF_MAX + 1;
  void *fail = malloc(too_big);
  note("malloc-fail", NULL, fail);
  free(b);
  free(c);
  free(d);
  free(e);
  free(f);
  free(g);
  free(h);
  free(i);
  free(NULL); /* not traced */
  free(malloc(2468)); /* end marker */
  for (int k = 0; k < nlog; ++k) printf("%s %p %p\n", log_[k].what, log_[k].old, log_[k].result);
  printf("pid %d\n", (int) getpid());
  return 7;
}
