/* What every malloc-family function leaves in errno, on failure (huge sizes,
 * overflowing products, bad alignments) and on success, printed one line a
 * call so that a native run and a profiled run can be compared line for line
 * (tests/profiler/e2e.py, scenario "errno"). errno is preset before each call
 * to a value no allocator uses, so "left alone" and "set" differ. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SENTINEL 4321

static size_t huge(void)
{
  volatile size_t h = SIZE_MAX;
  return h;
}

static void show(const char *call, const void *p)
{
  int e = errno;
  printf("%s: %s errno=%d\n", call, p ? "ptr" : "NULL", e);
}

static void show_rc(const char *call, int rc, const void *p)
{
  int e = errno;
  printf("%s: rc=%d %s errno=%d\n", call, rc, rc == 0 && p ? "ptr" : "-", e);
}

/* A function the allocator in use does not define (jemalloc has no pvalloc
 * or reallocarray): glibc's would hand out a block that the allocator's free
 * cannot take. Such calls are skipped, the same way in every run. */
static int foreign(const char *name)
{
  Dl_info fn, mine;
  void *f = dlsym(RTLD_DEFAULT, name), *m = dlsym(RTLD_DEFAULT, "malloc");
  return !f || !m || !dladdr(f, &fn) || !dladdr(m, &mine) || fn.dli_fbase != mine.dli_fbase;
}

/* Each call twice: errno preset to the sentinel, then to 0. */
#define TRY(fn, call, expr)                                                                \
  do {                                                                                   \
    if (foreign(#fn)) {                                                                  \
      printf("%s: skipped\n", call);                                                     \
      break;                                                                             \
    }                                                                                    \
    for (int pass = 0; pass < 2; ++pass) {                                               \
      errno = pass ? 0 : SENTINEL;                                                       \
      void *r_ = (expr);                                                                 \
      show(call, r_);                                                                    \
      free(r_);                                                                          \
    }                                                                                    \
  } while (0)

#define TRY_POSIX(call, align, size)                                                     \
  do {                                                                                   \
    if (foreign("posix_memalign")) {                                                     \
      printf("%s: skipped\n", call);                                                     \
      break;                                                                             \
    }                                                                                    \
    for (int pass = 0; pass < 2; ++pass) {                                               \
      void *r_ = NULL;                                                                   \
      errno = pass ? 0 : SENTINEL;                                                       \
      int rc_ = posix_memalign(&r_, (align), (size));                                    \
      show_rc(call, rc_, r_);                                                            \
      if (rc_ == 0) free(r_);                                                            \
    }                                                                                    \
  } while (0)

int main(void)
{
  size_t h = huge();
  /* An allocator's first call may set errno while it initialises itself
   * (mimalloc reads its options): that happens before the profiler's
   * start-up in a profiled run, so make it happen here first. */
  free(malloc(1));
  TRY(malloc, "malloc(SIZE_MAX)", malloc(h));
  TRY(malloc, "malloc(PTRDIFF_MAX+1)", malloc(h / 2 + 1));
  TRY(malloc, "malloc(100)", malloc(100));
  TRY(malloc, "malloc(0)", malloc(0));
  TRY(calloc, "calloc(SIZE_MAX/2,4)", calloc(h / 2, 4));
  TRY(calloc, "calloc(1,SIZE_MAX)", calloc(1, h));
  TRY(calloc, "calloc(10,10)", calloc(10, 10));
  TRY(realloc, "realloc(NULL,SIZE_MAX)", realloc(NULL, h));
  TRY(realloc, "realloc(NULL,50)", realloc(NULL, 50));
  TRY(reallocarray, "reallocarray(NULL,SIZE_MAX/2,4)", reallocarray(NULL, h / 2, 4));
  TRY(reallocarray, "reallocarray(NULL,5,5)", reallocarray(NULL, 5, 5));
  TRY(memalign, "memalign(64,SIZE_MAX)", memalign(64, h));
  TRY(memalign, "memalign(SIZE_MAX/2+2,16)", memalign(h / 2 + 2, 16));
  TRY(memalign, "memalign(64,100)", memalign(64, 100));
  TRY(aligned_alloc, "aligned_alloc(64,SIZE_MAX)", aligned_alloc(64, h));
  TRY(aligned_alloc, "aligned_alloc(3,16)", aligned_alloc(3, 16));
  TRY(aligned_alloc, "aligned_alloc(64,128)", aligned_alloc(64, 128));
  TRY(valloc, "valloc(SIZE_MAX)", valloc(h));
  TRY(valloc, "valloc(10)", valloc(10));
  TRY(pvalloc, "pvalloc(SIZE_MAX)", pvalloc(h));
  TRY(pvalloc, "pvalloc(10)", pvalloc(10));
  TRY_POSIX("posix_memalign(64,SIZE_MAX)", 64, h);
  TRY_POSIX("posix_memalign(3,16)", 3, 16);
  TRY_POSIX("posix_memalign(0,16)", 0, 16);
  TRY_POSIX("posix_memalign(64,100)", 64, 100);

  /* A block kept by a failed resize, then resized and released. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuse-after-free" /* p survives the failed resizes */
  for (int pass = 0; pass < 2; ++pass) {
    void *p = malloc(16);
    errno = pass ? 0 : SENTINEL;
    void *q = realloc(p, h);
    show("realloc(p,SIZE_MAX)", q);
    if (!foreign("reallocarray")) {
      errno = pass ? 0 : SENTINEL;
      q = reallocarray(p, h / 2, 4);
      show("reallocarray(p,SIZE_MAX/2,4)", q);
    }
    errno = pass ? 0 : SENTINEL;
    q = realloc(p, 64);
    show("realloc(p,64)", q);
    errno = pass ? 0 : SENTINEL;
    free(q);
    show("free(p)", NULL);
    errno = pass ? 0 : SENTINEL;
    q = realloc(malloc(8), 0);
    show("realloc(p,0)", q);
    errno = pass ? 0 : SENTINEL;
    free(NULL);
    show("free(NULL)", NULL);
  }
#pragma GCC diagnostic pop
  return 0;
}
