/* Programs that treat the profiler roughly (tests/profiler/reliability.py).
 * Every allocation a mode makes is known, so the dumps can be checked
 * exactly; a mode that is killed from outside counts what it did in a file
 * the test reads afterwards.
 *
 *   hostile churn COUNTFILE THREADS  allocate and free in a loop until killed;
 *                                    COUNTFILE holds one 64-bit count of
 *                                    completed mallocs per thread
 *   hostile doublefree               free a block twice: glibc aborts inside free
 *   hostile overflow [thread]        recurse until the stack overflows
 *   hostile chatty LINES             print LINES buffered lines, allocate, exit 0
 *   hostile rmcwd                    remove the (empty) working directory, exit
 *   hostile daemon PIDFILE           daemon(0, 0); the child allocates and exits
 *   hostile altstack                 print what sigaltstack reports, set, clear
 *   hostile wait                     allocate, then wait for a line on stdin
 *   hostile checkpoints              igprof_dump_now() in a loop until killed
 *   hostile leaky N                  N live blocks at exit (a big dump: one ;LK each)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

/* ---- churn ------------------------------------------------------------- */

static volatile uint64_t *counts;

struct churner {
  int index;
};

NOINLINE static void churn_alloc(int index)
{
  void *keep[64] = {0};
  for (uint64_t i = 0;; ++i) {
    free(keep[i & 63]);
    keep[i & 63] = malloc(16 + (i & 255));
    counts[index] = i + 1;
  }
}

static void *churn_thread(void *arg)
{
  churn_alloc(((struct churner *) arg)->index);
  return NULL;
}

static int churn(const char *file, int threads)
{
  int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 4096) != 0) return 2;
  counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (counts == MAP_FAILED) return 2;
  static struct churner c[64];
  pthread_t t;
  for (int k = 1; k < threads && k < 64; ++k) {
    c[k].index = k;
    pthread_create(&t, NULL, churn_thread, &c[k]);
  }
  printf("ready\n");
  fflush(stdout);
  churn_alloc(0);
  return 0;
}

/* ---- the others ---------------------------------------------------------- */

NOINLINE static void *before_death(size_t n)
{
  void *p = malloc(n);
  sink = p;
  return p;
}

/* Through a pointer the compiler cannot see through: the second free is the point. */
static void (*volatile release)(void *) = free;

static int doublefree(void)
{
  before_death(1234);
  char *p = malloc(100);
  release(p);
  release(p);
  return 0;
}

static int (*volatile deeper)(int);

NOINLINE static int recurse(int n)
{
  volatile char pad[512];
  pad[0] = (char) n;
  return deeper(n + 1) + pad[0]; /* unbounded on purpose: through a pointer, so the compiler lets it be */
}

static void *overflow_thread(void *arg)
{
  (void) arg;
  return (void *) (intptr_t) recurse(0);
}

static int overflow(int in_thread)
{
  deeper = recurse;
  before_death(4321);
  if (in_thread) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_create(&t, &attr, overflow_thread, NULL);
    pthread_join(t, NULL);
    return 0;
  }
  return recurse(0);
}

NOINLINE static void chatty_alloc(void) { sink = malloc(777); }

static int chatty(int lines)
{
  for (int i = 0; i < lines; ++i) printf("line %d of the program's own output\n", i);
  chatty_alloc();
  return 0;
}

NOINLINE static void rmcwd_alloc(void) { sink = malloc(555); }

static int rmcwd(void)
{
  char dir[4096];
  if (!getcwd(dir, sizeof dir) || rmdir(dir) != 0) {
    perror("rmdir");
    return 2;
  }
  rmcwd_alloc();
  return 0;
}

NOINLINE static void daemon_alloc(void) { sink = malloc(2222); }

static int run_daemon(const char *pidfile)
{
  char tmp[4200];
  if (daemon(0, 0) != 0) {
    /* Only the child gets here (glibc forks first): leave the reason where
     * the test looks for the pid, e.g. "daemon: No such device" when
     * /dev/null is not the null device. */
    snprintf(tmp, sizeof tmp, "%s.err", pidfile);
    FILE *f = fopen(tmp, "w");
    if (f) fprintf(f, "daemon: %s\n", strerror(errno)), fclose(f);
    return 2;
  }
  daemon_alloc();
  snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
  FILE *f = fopen(tmp, "w");
  if (!f) return 2;
  fprintf(f, "%d\n", (int) getpid());
  fclose(f);
  rename(tmp, pidfile);
  return 0;
}

static void show_altstack(const char *when, const void *own)
{
  stack_t ss;
  if (sigaltstack(NULL, &ss) != 0) {
    printf("%s: sigaltstack failed\n", when);
    return;
  }
  printf("%s: %s%s, %s, size %zu\n", when, ss.ss_flags & SS_DISABLE ? "disabled" : "enabled",
         ss.ss_flags & SS_ONSTACK ? " on stack" : "",
         ss.ss_sp == NULL ? "no stack" : ss.ss_sp == own ? "its own stack" : "another stack",
         (size_t) ss.ss_size);
}

static int altstack(void)
{
  static char own[64 * 1024];
  show_altstack("at start", own);
  stack_t ss = {.ss_sp = own, .ss_flags = 0, .ss_size = sizeof own};
  if (sigaltstack(&ss, NULL) != 0) return 2;
  show_altstack("after setting its own", own);
  stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0}, old;
  if (sigaltstack(&off, &old) != 0) return 2;
  printf("disabling returned %s\n", old.ss_sp == own ? "its own stack" : "another stack");
  show_altstack("after disabling", own);
  return 0;
}

NOINLINE static void wait_alloc(void) { sink = malloc(4444); }

static int wait_line(void)
{
  wait_alloc();
  printf("waiting\n");
  fflush(stdout);
  char line[64];
  return fgets(line, sizeof line, stdin) ? 0 : 1;
}

static int checkpoints(void)
{
  int (*dump_now)(const char *) = (int (*)(const char *)) dlsym(RTLD_DEFAULT, "igprof_dump_now");
  if (!dump_now) return 2;
  for (int i = 0;; ++i) {
    before_death(100 + (size_t) i % 100);
    dump_now(NULL);
    if (i == 0) {
      printf("dumping\n");
      fflush(stdout);
    }
  }
}

NOINLINE static void leaky(int n)
{
  for (int i = 0; i < n; ++i) sink = malloc(8);
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "churn") == 0 && argc == 4) return churn(argv[2], atoi(argv[3]));
  if (strcmp(mode, "doublefree") == 0) return doublefree();
  if (strcmp(mode, "overflow") == 0) return overflow(argc > 2);
  if (strcmp(mode, "chatty") == 0 && argc == 3) return chatty(atoi(argv[2]));
  if (strcmp(mode, "rmcwd") == 0) return rmcwd();
  if (strcmp(mode, "daemon") == 0 && argc == 3) return run_daemon(argv[2]);
  if (strcmp(mode, "altstack") == 0) return altstack();
  if (strcmp(mode, "wait") == 0) return wait_line();
  if (strcmp(mode, "checkpoints") == 0) return checkpoints();
  if (strcmp(mode, "leaky") == 0 && argc == 3) {
    leaky(atoi(argv[2]));
    return 0;
  }
  fprintf(stderr, "usage: hostile MODE ... (see the source)\n");
  return 2;
}
