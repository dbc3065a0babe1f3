/* Allocation scenarios with known byte counts for the end-to-end tests.
 * Every allocating function is noinline and allocates through exactly one
 * call site per hooked entry point, so the dump's leaf frames name it.
 * Usage: memtest SCENARIO [args]; the expected figures are in
 * tests/profiler/e2e.py next to each scenario. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE void *do_malloc(size_t n) { return malloc(n); }
NOINLINE void *do_calloc(size_t n, size_t m) { return calloc(n, m); }
NOINLINE void *do_realloc(void *p, size_t n) { return realloc(p, n); }
NOINLINE void *do_reallocarray(void *p, size_t n, size_t m) { return reallocarray(p, n, m); }
NOINLINE void *do_memalign(size_t a, size_t n) { return memalign(a, n); }
NOINLINE void *do_aligned_alloc(size_t a, size_t n) { return aligned_alloc(a, n); }
NOINLINE int do_posix_memalign(void **p, size_t a, size_t n) { return posix_memalign(p, a, n); }
NOINLINE void *do_valloc(size_t n) { return valloc(n); }
NOINLINE void *do_pvalloc(size_t n) { return pvalloc(n); }

/* Every entry point once; frees some, leaks the rest. */
NOINLINE static void every_function(void)
{
  void *a = do_malloc(100);             /* freed */
  void *b = do_calloc(10, 30);          /* 300, leaked */
  void *c = do_memalign(64, 1000);      /* freed */
  void *d = do_aligned_alloc(128, 256); /* leaked */
  void *e;
  if (do_posix_memalign(&e, 32, 700) != 0) abort(); /* freed */
  void *f = do_valloc(5000);            /* leaked */
  void *g = do_pvalloc(10);             /* one page, leaked */
  void *h = do_reallocarray(NULL, 7, 11); /* 77, leaked */
  free(a);
  free(c);
  free(e);
  sink = b; sink = d; sink = f; sink = g; sink = h;
}

/* A realloc chain: 10 -> 20 -> ... -> 100 bytes, last one leaked. */
NOINLINE static void realloc_chain(void)
{
  void *p = NULL;
  for (int i = 1; i <= 10; ++i) p = do_realloc(p, (size_t) i * 10);
  sink = p;
}

NOINLINE static void leak_loop(int n, size_t size)
{
  for (int i = 0; i < n; ++i) sink = do_malloc(size);
}

static int basic(void)
{
  every_function();
  realloc_chain();
  leak_loop(5, 33);
  return 0;
}

/* Threads: each of 4 threads allocates 1000 blocks of (64 + t) bytes into a
 * shared array; then thread t frees the blocks of thread (t+1)%4. */
#define THREADS 4
#define PER_THREAD 1000
static void *blocks[THREADS][PER_THREAD];
static pthread_barrier_t barrier;

NOINLINE void *thread_alloc(size_t n) { return malloc(n); }

static void *thread_main(void *arg)
{
  int t = (int) (long) arg;
  for (int i = 0; i < PER_THREAD; ++i) blocks[t][i] = thread_alloc(64 + (size_t) t);
  pthread_barrier_wait(&barrier);
  int victim = (t + 1) % THREADS;
  for (int i = 0; i < PER_THREAD; ++i)
    if (i % 10 != 0) free(blocks[victim][i]); /* one in ten stays live */
  return NULL;
}

static int threads(void)
{
  pthread_t th[THREADS];
  pthread_barrier_init(&barrier, NULL, THREADS);
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, thread_main, (void *) t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  return 0;
}

/* phases: the counters and the live table change mode with the thread
 * count (plain updates while one thread runs, atomic ones once a second
 * exists, plain again in a forked child). Main allocates 500 x 100 bytes
 * alone; two threads then free all of them (250 each, across threads) and
 * allocate 20000 x 50 bytes each, kept (long enough for the two to overlap:
 * plain updates from both would lose counts); after the join a child is
 * forked that allocates 10 x 30 bytes and frees 3 of the threads' blocks. */
#define PHASE_MAIN 500
#define PHASE_THREAD 20000
static void *main_blocks[PHASE_MAIN];
static void *thread_blocks[2][PHASE_THREAD];
NOINLINE void *main_alloc(size_t n) { return malloc(n); }
NOINLINE void *phase_alloc(size_t n) { return malloc(n); }
NOINLINE void *fork_child_alloc(size_t n) { return malloc(n); }

static void *phase_thread(void *arg)
{
  int t = (int) (long) arg;
  for (int i = t; i < PHASE_MAIN; i += 2) free(main_blocks[i]);
  for (int i = 0; i < PHASE_THREAD; ++i) thread_blocks[t][i] = phase_alloc(50);
  return NULL;
}

static int phases(void)
{
  for (int i = 0; i < PHASE_MAIN; ++i) main_blocks[i] = main_alloc(100);
  pthread_t th[2];
  for (long t = 0; t < 2; ++t) pthread_create(&th[t], NULL, phase_thread, (void *) t);
  for (int t = 0; t < 2; ++t) pthread_join(th[t], NULL);
  pid_t pid = fork();
  if (pid == 0) {
    void *kept[10];
    for (int i = 0; i < 10; ++i) kept[i] = fork_child_alloc(30);
    for (int i = 0; i < 3; ++i) free(thread_blocks[0][i]);
    (void) kept;
    exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  printf("child %d\n", (int) pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

NOINLINE void *parent_alloc(size_t n) { return malloc(n); }
NOINLINE void *child_alloc(size_t n) { return malloc(n); }

/* fork: parent allocates 3 x 1000 before and 2 x 500 after; the child
 * allocates 4 x 250 and frees one of the parent's blocks. */
static int forking(void)
{
  void *p[3];
  for (int i = 0; i < 3; ++i) p[i] = parent_alloc(1000);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 4; ++i) sink = child_alloc(250);
    free(p[0]);
    exit(0);
  }
  for (int i = 0; i < 2; ++i) sink = parent_alloc(500);
  int status;
  waitpid(pid, &status, 0);
  printf("child %d status %d\n", (int) pid, WEXITSTATUS(status));
  return 0;
}

NOINLINE void *before_exec_alloc(size_t n) { return malloc(n); }

static int exec_self(const char *self)
{
  sink = before_exec_alloc(4321);
  execl(self, self, "basic", (char *) NULL);
  return 1;
}

NOINLINE void *exit_alloc(size_t n) { return malloc(n); }

/* execvp through a PATH whose first entries do not have the program. */
static int exec_path_search(const char *dir)
{
  char path[4096];
  snprintf(path, sizeof path, "/nonexistent/a:/nonexistent/b:/etc:%s", dir);
  setenv("PATH", path, 1);
  sink = before_exec_alloc(10);
  char *args[] = {"memtest", "exit", "0", NULL};
  execvp("memtest", args);
  return 1;
}

static int quick_exit_path(void)
{
  sink = exit_alloc(777);
  sink = exit_alloc(777);
  _exit(3);
}

static int aborting(void)
{
  sink = exit_alloc(999);
  abort();
}

static void on_segv(int sig)
{
  (void) sig;
  ssize_t w = write(1, "handler ran\n", 12);
  _exit(w == 12 ? 7 : 8);
}

static int crash_with_handler(void)
{
  signal(SIGSEGV, on_segv);
  sink = exit_alloc(555);
  raise(SIGSEGV);
  return 1;
}

static int segv(void)
{
  sink = exit_alloc(555);
  *(volatile int *) 16 = 1;
  return 1;
}

/* The libc contract seen by the program, printed for a native/profiled diff. */
NOINLINE static int contract(void) /* its own frame: profiler.e2e.contract counts its blocks */
{
  volatile size_t huge = (size_t) -1 / 2;
  errno = 0;
  void *p = calloc(huge, 4);
  printf("calloc overflow: %s errno=%d\n", p ? "ptr" : "NULL", errno);
  errno = 0;
  p = reallocarray(NULL, huge, 4);
  printf("reallocarray overflow: %s errno=%d\n", p ? "ptr" : "NULL", errno);
  void *q = malloc(8);
  errno = 0;
  p = reallocarray(q, huge, 4);
  printf("reallocarray overflow keeps block: %s errno=%d\n", p ? "ptr" : "NULL", errno);
  errno = 0;
  p = malloc(huge);
  printf("malloc huge: %s errno=%d\n", p ? "ptr" : "NULL", errno);
  p = malloc(0);
  printf("malloc(0): %s\n", p ? "unique ptr" : "NULL");
  free(p);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuse-after-free" /* q survived the failed reallocarray */
  p = realloc(q, 0);
#pragma GCC diagnostic pop
  printf("realloc(p,0): %s\n", p ? "ptr" : "NULL");
  void *r = NULL;
  int rc = posix_memalign(&r, 3, 16);
  printf("posix_memalign(3): rc=%d\n", rc);
  errno = 0;
  p = aligned_alloc(3, 16);
  printf("aligned_alloc(3): %s errno=%d\n", p ? "ptr" : "NULL", errno);
  errno = 1234;
  free(NULL);
  p = malloc(16);
  free(p);
  printf("errno kept across malloc/free: %d\n", errno);
  return 0;
}

static int dump_now(void)
{
  int (*fn)(const char *) = (int (*)(const char *)) dlsym(RTLD_DEFAULT, "igprof_dump_now");
  sink = exit_alloc(111);
  if (fn) fn("checkpoint.%p");
  sink = exit_alloc(222);
  printf("dump_now %s\n", fn ? "found" : "missing");
  return 0;
}

/* Waits for a dump trigger (flag file or signal) while holding 2 blocks. */
static int wait_for_dump(const char *ready)
{
  sink = exit_alloc(4096);
  sink = exit_alloc(4096);
  FILE *f = fopen(ready, "w");
  fprintf(f, "%d\n", (int) getpid());
  fclose(f);
  for (int i = 0; i < 100; ++i) usleep(20000);
  return 0;
}

/* fork while 3 threads keep allocating and freeing: the atfork handlers
 * must leave the child with usable profiler locks. Children alternate
 * exit() and _exit(). */
static atomic_int stop_churn;

static void *churn(void *arg)
{
  unsigned seed = (unsigned) (long) arg;
  void *keep[64] = {0};
  while (!atomic_load(&stop_churn)) {
    seed = seed * 1103515245u + 12345u;
    int i = (int) (seed >> 16) % 64;
    free(keep[i]);
    keep[i] = malloc(16 + (seed >> 8) % 2000);
  }
  for (int i = 0; i < 64; ++i) free(keep[i]);
  return NULL;
}

static int fork_stress(void)
{
  pthread_t th[3];
  for (long t = 0; t < 3; ++t) pthread_create(&th[t], NULL, churn, (void *) (t + 1));
  int bad = 0;
  for (int k = 0; k < 20; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 10; ++i) sink = child_alloc(100);
      if (k % 2) _exit(k);
      exit(k);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != k) bad++;
  }
  atomic_store(&stop_churn, 1);
  for (int t = 0; t < 3; ++t) pthread_join(th[t], NULL);
  printf("children with a wrong status: %d\n", bad);
  return 0;
}

/* The application's view of signals the profiler owns must be its own:
 * sigaction reads back what it set, its handlers run, SIG_IGN ignores. */
static volatile sig_atomic_t usr1_seen, term_seen;
static void on_usr1(int sig) { (void) sig; usr1_seen++; }
static void on_term_info(int sig, siginfo_t *si, void *uc)
{
  (void) uc;
  if (sig == SIGTERM && si->si_pid == getpid()) term_seen++;
}

static pthread_t main_thread;

static void *send_hup(void *arg)
{
  (void) arg;
  usleep(50000);
  pthread_kill(main_thread, SIGHUP);
  return NULL;
}

static int signal_view(void)
{
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGUSR1, NULL, &old);
  printf("USR1 handler reads back: %s\n", old.sa_handler == on_usr1 ? "yes" : "no");
  raise(SIGUSR1);
  raise(SIGUSR1);
  printf("USR1 handler ran %d times\n", (int) usr1_seen);
  signal(SIGINT, SIG_IGN);
  raise(SIGINT);
  sigaction(SIGINT, NULL, &old);
  printf("SIGINT ignored, reads back SIG_IGN: %s\n", old.sa_handler == SIG_IGN ? "yes" : "no");
  /* An ignored signal must not interrupt a sleep (no EINTR). */
  signal(SIGHUP, SIG_IGN);
  main_thread = pthread_self();
  pthread_t t;
  pthread_create(&t, NULL, send_hup, NULL);
  struct timespec ts = {0, 300000000};
  int rc = nanosleep(&ts, NULL);
  pthread_join(t, NULL);
  printf("nanosleep with an ignored SIGHUP: rc=%d\n", rc);
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_term_info;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGTERM, &sa, NULL);
  raise(SIGTERM);
  sigaction(SIGTERM, NULL, &old);
  printf("SIGTERM siginfo handler ran %d time(s), reset to SIG_DFL: %s\n", (int) term_seen,
         old.sa_handler == SIG_DFL ? "yes" : "no");
  sink = exit_alloc(42);
  return 0;
}

/* dlopen a library with its own allocator (ownalloc.c) and use it. */
static int dlopen_own(const char *lib)
{
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  int (*test)(void) = (int (*)(void)) dlsym(h, "own_alloc_test");
  if (!test) return 1;
  sink = exit_alloc(64); /* the process's own malloc still counts */
  printf("own_alloc_test %d\n", test());
  return 0;
}

/* wide K: 2^K distinct stacks, K calls below wide_stacks each, every call
 * wide_a or wide_b as the bits of the path say (the two call sites of each
 * are distinct frames): a call tree of about 2^(K+1) nodes. Each stack
 * allocates 16 bytes; every other block stays live. */
NOINLINE void *wide_b(int level, int k, unsigned path);
NOINLINE void *wide_a(int level, int k, unsigned path)
{
  if (level == k) return malloc(16);
  return (path >> level) & 1 ? wide_b(level + 1, k, path) : wide_a(level + 1, k, path);
}

NOINLINE void *wide_b(int level, int k, unsigned path)
{
  if (level == k) return malloc(16);
  return (path >> level) & 1 ? wide_b(level + 1, k, path) : wide_a(level + 1, k, path);
}

static int wide_stacks(int k)
{
  for (unsigned path = 0; path < 1u << k; ++path) {
    void *p = wide_a(0, k, path);
    if (path & 1) free(p);
  }
  printf("stacks %u\n", 1u << k);
  return 0;
}

int main(int argc, char **argv)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) { fprintf(stderr, "usage: memtest SCENARIO\n"); return 2; }
  const char *s = argv[1];
  if (!strcmp(s, "basic")) return basic();
  if (!strcmp(s, "threads")) return threads();
  if (!strcmp(s, "phases")) return phases();
  if (!strcmp(s, "fork")) return forking();
  if (!strcmp(s, "exec")) return exec_self(argv[0]);
  if (!strcmp(s, "execvp") && argc > 2) return exec_path_search(argv[2]);
  if (!strcmp(s, "_exit")) return quick_exit_path();
  if (!strcmp(s, "abort")) return aborting();
  if (!strcmp(s, "segv")) return segv();
  if (!strcmp(s, "segv-handler")) return crash_with_handler();
  if (!strcmp(s, "contract")) return contract();
  if (!strcmp(s, "dump-now")) return dump_now();
  if (!strcmp(s, "wait") && argc > 2) return wait_for_dump(argv[2]);
  if (!strcmp(s, "exit")) return atoi(argv[2]);
  if (!strcmp(s, "fork-stress")) return fork_stress();
  if (!strcmp(s, "signal-view")) return signal_view();
  if (!strcmp(s, "dlopen") && argc > 2) return dlopen_own(argv[2]);
  if (!strcmp(s, "wide") && argc > 2) return wide_stacks(atoi(argv[2]));
  fprintf(stderr, "memtest: unknown scenario %s\n", s);
  return 2;
}
