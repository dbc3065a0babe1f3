/* The heap over time: scenarios whose global peak is known exactly, for
 * tests/profiler/heap.py (which holds the expected figures). Every
 * allocating function is noinline with one call site, so the dump's leaf
 * frames name it. Nothing is printed before a scenario ends: stdio's buffer
 * would be one more block in the heap.
 * Usage: heaptest SCENARIO */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE void *peak_a(size_t n) { return malloc(n); }
NOINLINE void *peak_b(size_t n) { return malloc(n); }
NOINLINE void *peak_c(size_t n) { return calloc(1, n); }
NOINLINE void *peak_d(size_t n) { return malloc(n); }
NOINLINE void *peak_grow(void *p, size_t n) { return realloc(p, n); }

/* One thread; the live bytes after each step on the right. The maximum,
 * 5300, is first reached when peak_c allocates; reaching it again later
 * (peak_a) is not a new maximum, and the last peak_d stops one byte short. */
static int single(void)
{
  void *a[4], *b[2];
  for (int i = 0; i < 3; ++i) a[i] = peak_a(1000); /* 3000 */
  for (int i = 0; i < 2; ++i) b[i] = peak_b(500);  /* 4000 */
  for (int i = 0; i < 3; ++i) free(a[i]);          /* 1000 */
  void *g = peak_grow(NULL, 100);                  /* 1100 */
  g = peak_grow(g, 300);                           /* 1300 */
  void *c = peak_c(4000);                          /* 5300: the peak */
  free(c);                                         /* 1300 */
  for (int i = 0; i < 4; ++i) a[i] = peak_a(1000); /* 5300 again */
  for (int i = 0; i < 4; ++i) free(a[i]);          /* 1300 */
  free(b[0]);                                      /* 800 */
  g = peak_grow(g, 200);                           /* 700 */
  sink = peak_d(4599);                             /* 5299 */
  sink = b[1];
  sink = g;
  return 0;
}

/* threshold: run with --dump-at-peak 10k (10240 bytes). The live bytes
 * after each step on the right: reaching 10240 does not exceed it, the
 * 1-byte th_d does, once; later maxima write no second dump. */
NOINLINE void *th_a(size_t n) { return malloc(n); }
NOINLINE void *th_b(size_t n) { return malloc(n); }
NOINLINE void *th_c(size_t n) { return malloc(n); }
NOINLINE void *th_d(size_t n) { return malloc(n); }

static int threshold(void)
{
  void *a0 = th_a(4000), *a1 = th_a(4000);  /* 8000 */
  void *b0 = th_b(2000);                    /* 10000 */
  free(a0);                                 /* 6000 */
  void *c = th_c(4000);                     /* 10000 */
  void *b1 = th_b(240);                     /* 10240 */
  void *d = th_d(1);                        /* 10241: the dump */
  free(d);                                  /* 10240 */
  d = th_d(1);                              /* 10241 */
  void *a2 = th_a(5000);                    /* 15241 */
  free(a1); free(a2); free(b0); free(b1); free(d);
  sink = c;                                 /* 4000 at exit */
  return 0;
}

/* slow: 1000 bytes every 20 ms, 10 times, then all freed: a timeline by
 * time. grow: 20000 blocks of 16 bytes, kept: a timeline by bytes that
 * outgrows its 4096 samples. */
static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

NOINLINE void *slow_alloc(size_t n) { return malloc(n); }
NOINLINE void *grow_alloc(size_t n) { return malloc(n); }

static int slow(void)
{
  void *p[10];
  for (int i = 0; i < 10; ++i) {
    p[i] = slow_alloc(1000);
    sleep_ms(20);
  }
  for (int i = 0; i < 10; ++i) free(p[i]);
  return 0;
}

static int grow(void)
{
  for (int i = 0; i < 20000; ++i) sink = grow_alloc(16);
  return 0;
}

/* sizes: two blocks each of 10, 100, 1000 and 10000 bytes, one of each
 * freed (with --min-size/--max-size the test picks which are walked). */
NOINLINE void *size_10(void) { return malloc(10); }
NOINLINE void *size_100(void) { return malloc(100); }
NOINLINE void *size_1000(void) { return calloc(10, 100); }
NOINLINE void *size_10000(void) { return malloc(10000); }

static int sizes(void)
{
  void *(*const fn[4])(void) = {size_10, size_100, size_1000, size_10000};
  for (int i = 0; i < 4; ++i) {
    free(fn[i]());
    sink = fn[i]();
  }
  return 0;
}

/* pages (-mm): mappings and heap growth whose live pages are known; P is
 * the page size. map_a keeps 3 pages; map_b maps 5 and unmaps the middle
 * one (two ranges live, 4 pages); map_c maps 2 that remap_c moves to 4;
 * map_d maps 1 and unmaps it; grow_brk moves the break up 10000 bytes and
 * shrink_brk down 4000; a malloc of 1 MiB maps (glibc's threshold is
 * 128 KiB) and its free unmaps. */
static size_t page;
NOINLINE void *map_pages(size_t n)
{
  return mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
NOINLINE void *map_a(void) { return map_pages(3); }
NOINLINE void *map_b(void) { return map_pages(5); }
NOINLINE void *map_c(void) { return map_pages(2); }
NOINLINE void *map_d(void) { return map_pages(1); }
NOINLINE void *remap_c(void *p) { return mremap(p, 2 * page, 4 * page, MREMAP_MAYMOVE); }
NOINLINE void *grow_brk(void) { return sbrk(10000); }
NOINLINE void *shrink_brk(void) { return sbrk(-4000); }
NOINLINE void *big_malloc(void) { return malloc(1 << 20); }

static int pages(void)
{
  page = (size_t) sysconf(_SC_PAGESIZE);
  sink = map_a();
  char *b = map_b();
  if (munmap(b + 2 * page, page) != 0) return 1;
  void *c = map_c();
  if (c == MAP_FAILED || remap_c(c) == MAP_FAILED) return 1;
  if (munmap(map_d(), page) != 0) return 1;
  /* qemu-user refuses to move the break over a mapping of its own above
   * it, in some runs: a status of its own, for the test to run again. */
  if (grow_brk() == (void *) -1) return 3;
  if (shrink_brk() == (void *) -1) return 1;
  free(big_malloc());
  return 0;
}

/* lifetimes (--lifetimes 20ms): temp_alloc's blocks are freed at once
 * (temporary, short-lived); of short_alloc's, the first is freed at once
 * after another allocation (short-lived, not temporary), the second 60 ms
 * later with nothing allocated since (temporary, not short-lived);
 * long_alloc's lives 60 ms; regrow_alloc's is realloc'ed at once
 * (temporary, short-lived), the new block kept. */
NOINLINE void *temp_alloc(size_t n) { return malloc(n); }
NOINLINE void *short_alloc(size_t n) { return malloc(n); }
NOINLINE void *long_alloc(size_t n) { return malloc(n); }
NOINLINE void *regrow_alloc(size_t n) { return malloc(n); }
NOINLINE void *realloc_site(void *p, size_t n) { return realloc(p, n); }

static int lifetimes(void)
{
  free(temp_alloc(100));
  free(temp_alloc(200));
  void *l = long_alloc(1000);
  void *s = short_alloc(50), *s2 = short_alloc(70);
  free(s);
  sleep_ms(60);
  free(l);
  free(s2);
  sink = realloc_site(regrow_alloc(10), 20);
  return 0;
}

/* Threads: 4 threads churn (allocate and free at once), then each
 * allocates one big block of 100000 * (t + 1) bytes and waits for the
 * others: the peak is the moment the last big block is allocated. Then
 * they free them and churn again, with at most 4 small blocks live. */
#define THREADS 4
#define CHURN 20000
static pthread_barrier_t barrier;

NOINLINE void *churn_alloc(size_t n) { return malloc(n); }
NOINLINE void *big_0(size_t n) { return malloc(n); }
NOINLINE void *big_1(size_t n) { return malloc(n); }
NOINLINE void *big_2(size_t n) { return malloc(n); }
NOINLINE void *big_3(size_t n) { return malloc(n); }
static void *(*const big[THREADS])(size_t) = {big_0, big_1, big_2, big_3};

static void churn(size_t n)
{
  for (int i = 0; i < CHURN; ++i) free(churn_alloc(n));
}

static void *barrier_thread(void *arg)
{
  int t = (int) (intptr_t) arg;
  churn(16 + (size_t) t);
  pthread_barrier_wait(&barrier);
  void *p = big[t](100000 * (size_t) (t + 1));
  pthread_barrier_wait(&barrier);
  free(p);
  churn(32);
  return NULL;
}

/* Threads racing for the peak: each keeps a ring of 8 blocks of sizes from
 * its own generator and replaces the oldest, so the live total moves up
 * and down with all four at once and the maximum comes at a moment nobody
 * chose. Only the consistency of the figures can be checked. */
NOINLINE void *race_0(size_t n) { return malloc(n); }
NOINLINE void *race_1(size_t n) { return malloc(n); }
NOINLINE void *race_2(size_t n) { return malloc(n); }
NOINLINE void *race_3(size_t n) { return malloc(n); }
static void *(*const race[THREADS])(size_t) = {race_0, race_1, race_2, race_3};

static void *race_thread(void *arg)
{
  int t = (int) (intptr_t) arg;
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t) (t + 1);
  void *ring[8] = {0};
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    free(ring[i % 8]);
    ring[i % 8] = race[t](1 + (size_t) (x % 4096));
  }
  for (int i = 0; i < 8; ++i) free(ring[i]);
  return NULL;
}

/* fork: the child's heap starts empty (the parent's blocks are not its
 * own), so its peak is its own 3000 bytes; the parent's is its 10000. */
static int forking(void)
{
  void *a = peak_a(10000);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    free(peak_c(3000));
    sink = peak_d(2000);
    _exit(0);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  free(a);
  sink = peak_b(500);
  return 0;
}

static int threaded(void *(*body)(void *))
{
  pthread_t th[THREADS];
  pthread_barrier_init(&barrier, NULL, THREADS);
  for (intptr_t t = 0; t < THREADS; ++t)
    if (pthread_create(&th[t], NULL, body, (void *) t) != 0) return 1;
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) { fprintf(stderr, "usage: heaptest SCENARIO\n"); return 2; }
  const char *s = argv[1];
  if (!strcmp(s, "single")) return single();
  if (!strcmp(s, "barrier")) return threaded(barrier_thread);
  if (!strcmp(s, "race")) return threaded(race_thread);
  if (!strcmp(s, "fork")) return forking();
  if (!strcmp(s, "threshold")) return threshold();
  if (!strcmp(s, "slow")) return slow();
  if (!strcmp(s, "grow")) return grow();
  if (!strcmp(s, "sizes")) return sizes();
  if (!strcmp(s, "pages")) return pages();
  if (!strcmp(s, "lifetimes")) return lifetimes();
  fprintf(stderr, "heaptest: unknown scenario %s\n", s);
  return 2;
}
