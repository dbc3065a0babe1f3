/* Walk corpus, C part. Built twice (-O2 -fomit-frame-pointer and -O0); every
 * capture point compares the fast walker with libunwind (walk_check.h).
 *
 * Stacks exercised: deep mutual recursion with small, alloca'd and very
 * large frames; calls through function pointers and through the PLT into a
 * shared library that calls back; libc qsort calling our comparator; a
 * signal raised deep in the stack, handled on the normal stack and on an
 * alternate signal stack; one capture point reached from two call sites in
 * turn; a plugin loaded and unloaded with dlopen/dlclose;
 * threads (one of them without stack bounds, walked by libunwind alone);
 * and, all the while, a 5 kHz sampler interrupting at arbitrary instructions.
 *
 * usage: walk_corpus_c PLUGIN.so MIN_FRAMES MIN_SIGNAL_WALKS NAME
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "walk_check.h"
#include "walk_fast.h"

#define NOINLINE __attribute__((noinline))

typedef void (*corpus_fn)(int);
int corpus_lib_apply(corpus_fn fn, int n);
void corpus_lib_sort(corpus_fn fn, int n);
unsigned corpus_lib_burn(int rounds);

static void (*volatile hook_point)(void) = check_here;
static volatile unsigned sink;

/* ---- recursion with frames of every shape ------------------------------- */

NOINLINE int rec_small(int n);
NOINLINE int rec_alloca(int n);
NOINLINE int rec_big(int n);

static int (*const rec_next[3])(int) = {rec_small, rec_alloca, rec_big};

static int rec_step(int n)
{
  if (n <= 0) {
    hook_point();
    return 1;
  }
  if (n % 17 == 0)
    hook_point();
  /* every tenth level takes the 40 KB frame: deep but within 8 MB */
  int which = n % 10 == 5 ? 2 : n % 2;
  return rec_next[which](n - 1) + 1;
}

NOINLINE int rec_small(int n)
{
  volatile int local = n;
  int r = rec_step(n);
  return r + local;
}

NOINLINE int rec_alloca(int n)
{
  char *p = alloca(16 + (size_t)(n % 200) * 8);
  p[0] = (char)n;
  int r = rec_step(n);
  return r + ((volatile char *)p)[0];
}

NOINLINE int rec_big(int n)
{
  volatile char big[40000];
  big[n % sizeof big] = (char)n;
  int r = rec_step(n);
  return r + big[n % sizeof big];
}

/* ---- callbacks ----------------------------------------------------------- */

static void NOINLINE callback(int i)
{
  if (i % 3 == 0)
    hook_point();
  sink += (unsigned)i;
}

static int compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  if ((int)x % 97 == 0)
    hook_point();
  return (x > y) - (x < y);
}

NOINLINE static void sort_in_libc(int n)
{
  double *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++)
    v[i] = (double)(((unsigned)i * 7919u) % (unsigned)n);
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  free(v);
}

/* ---- signals raised deep in the stack ------------------------------------ */

static void on_usr1(int sig)
{
  (void)sig;
  hook_point(); /* walks back through the sigreturn frame into raise() */
}

NOINLINE static int raise_at_depth(int n)
{
  if (n == 0) {
    raise(SIGUSR1);
    return 0;
  }
  return raise_at_depth(n - 1) + 1;
}

/* ---- CPU work for the sampler -------------------------------------------- */

NOINLINE static double burn_math(int rounds)
{
  double acc = 0;
  for (int i = 1; i <= rounds; i++)
    acc += sin(i * 0.001) * exp(-i * 1e-6) + sqrt((double)i);
  return acc;
}

NOINLINE static unsigned burn_libc(int rounds)
{
  char buf[256];
  unsigned h = 0;
  for (int i = 0; i < rounds; i++) {
    snprintf(buf, sizeof buf, "%d:%s:%f", i, "walk", i * 0.5);
    h += (unsigned)strlen(buf);
    memmove(buf + 1, buf, 100);
  }
  return h;
}

NOINLINE static unsigned burn_nested(int depth, int rounds)
{
  if (depth == 0)
    return corpus_lib_burn(rounds) + burn_libc(rounds / 4);
  return burn_nested(depth - 1, rounds) * 3 + (unsigned)depth;
}

/* ---- dlopen / dlclose ---------------------------------------------------- */

/* One or two plugins (PATH[:PATH]), loaded in turn. With two, each load
 * records where the entry point landed, and the run must have seen the
 * second plugin at an address where the first one was walked before (see
 * corpus_plugin.c): otherwise the module change it tests did not happen. */
static char *plugin_paths[2];
static int plugin_count;
static uintptr_t plugin_entry_seen[2]; /* load addresses */
static int plugin_reused;

/* The harness's reference walk runs libunwind in the sampler's handler. A
 * handler interrupting this thread while it holds the loader lock (in
 * dlopen, dlclose or the walker's rebuild) would read the module list half
 * changed (libunwind's lookups call dl_iterate_phdr; the lock is
 * recursive), or, where libunwind keeps its cache (ARM, AArch64), wait
 * for the cache's lock while its holder, another thread's handler, waits
 * for the loader lock. So the sampler is held off around them. */
static void hold_sampler(int on)
{
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(on ? SIG_BLOCK : SIG_UNBLOCK, &prof, NULL);
}

NOINLINE static void plugin_cycle(int round)
{
  int which = round % plugin_count;
  const char *path = plugin_paths[which];
  hold_sampler(1);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "walk_corpus: dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
  igprof_walk_fast_modules_changed();
  void (*entry)(int) = (void (*)(int))dlsym(h, "corpus_plugin_entry");
  if (!entry) {
    fprintf(stderr, "walk_corpus: %s has no corpus_plugin_entry\n", path);
    exit(2);
  }
  /* Where the plugin was loaded (its entry's offset differs between the
   * two builds where a frame size changes an instruction's length, as
   * Thumb's sub sp does). */
  Dl_info where;
  uintptr_t base = dladdr((void *)entry, &where) ? (uintptr_t)where.dli_fbase : 0;
  if (plugin_count == 2 && base && base == plugin_entry_seen[!which])
    plugin_reused++;
  plugin_entry_seen[which] = base;
  entry(5);
  dlclose(h);
  igprof_walk_fast_modules_changed();
  /* The reference needs this too: libunwind keeps what it learnt about an
   * address after the module there is gone, and with the second plugin at
   * the same address it would stop at the first plugin frame. */
  unw_flush_cache(unw_local_addr_space, 0, 0);
  hold_sampler(0);
}

/* ---- one start, two callers ---------------------------------------------- */

/* The same capture point at the same stack address, reached from two call
 * sites in turn: each walk finds the record of the last one under its
 * start, with every slot the same but the return address into
 * two_sites. */
NOINLINE static void site_leaf(int i)
{
  volatile int local = i;
  hook_point();
  sink += (unsigned)local;
}

NOINLINE static void two_sites(int i)
{
  if (i & 1) {
    site_leaf(i);
    sink += 1;
  } else {
    site_leaf(i + 1);
    sink += 2;
  }
}

NOINLINE static void two_sites_loop(int n)
{
  for (int i = 0; i < n; i++)
    two_sites(i);
}

/* ---- one round of everything --------------------------------------------- */

NOINLINE static void workload(int round)
{
  rec_small(60 + round % 7);
  rec_alloca(250); /* deep: ~250 frames */
  corpus_lib_apply(callback, 30);
  corpus_lib_sort(callback, 2000);
  sort_in_libc(3000);
  raise_at_depth(round % 5);
  sink += (unsigned)burn_math(20000);
  sink += burn_nested(round % 6, 200);
  two_sites_loop(40);
}

static volatile int stop_threads;

static void *thread_main(void *arg)
{
  if (arg)
    check_thread_init(); /* the other thread has no bounds: libunwind walks it */
  for (int round = 0; !stop_threads; round++)
    workload(round);
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc != 5) {
    fprintf(stderr, "usage: %s PLUGIN.so[:PLUGIN2.so] MIN_FRAMES MIN_SIGNAL_WALKS NAME\n", argv[0]);
    return 2;
  }
  plugin_paths[0] = argv[1];
  plugin_count = 1;
  char *colon = strchr(argv[1], ':');
  if (colon) {
    *colon = '\0';
    plugin_paths[1] = colon + 1;
    plugin_count = 2;
  }
  long min_frames = atol(argv[2]), min_signal = atol(argv[3]);

  check_init();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);

  sampler_start(1000);
  pthread_t threads[2];
  pthread_create(&threads[0], NULL, thread_main, (void *)1);
  pthread_create(&threads[1], NULL, thread_main, NULL);

  for (int round = 0; round < 12 || sampler_more_rounds(min_signal, 3 * min_signal); round++) {
    workload(round);
    plugin_cycle(round);
  }
  if (plugin_count == 2 && plugin_reused == 0) {
    fprintf(stderr, "walk_corpus: the two plugins never shared an address: the module change "
                    "test did not run\n");
    return 1;
  }
  if (plugin_count == 2)
    printf("%s: plugins swapped at one address %d times\n", argv[4], plugin_reused);

  /* The same signal handled on an alternate stack. */
  static char altstack[1 << 18];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &sa, NULL);
  for (int i = 0; i < 5; i++)
    raise_at_depth(i);

  stop_threads = 1;
  pthread_join(threads[0], NULL);
  pthread_join(threads[1], NULL);
  sampler_stop();
  return check_report(argv[4], min_frames, min_signal);
}
