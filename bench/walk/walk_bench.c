/* Nanoseconds per captured stack: the fast walker (as a memory hook calls
 * it) vs libunwind's unw_backtrace vs glibc's backtrace(), on the same
 * stacks, at several depths. Each figure is the median of REPS timed batches
 * of CALLS captures (thread CPU time), methods interleaved; the frames each method returned are printed so the
 * stacks are seen to be the same size.
 *
 * usage: walk_bench [DEPTH...]   (default 10 30 100)
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "walk_fast.h"

#define MAX_FRAMES 256
/* Captures per batch: 20000, or $WALK_BENCH_CALLS (fewer under an
 * emulator, where libunwind's checked reads cost microseconds each). */
static int CALLS = 20000;
#define REPS 9

enum method { FAST, UNW_BACKTRACE, GLIBC_BACKTRACE, NMETHODS, NO_CAPTURE = NMETHODS };

static double now_ns(void)
{
  struct timespec ts;
  /* CPU time of this thread: the machine is shared, and wall time would
   * count the moments another process had the core. */
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

struct result {
  double ns[NMETHODS];
  int frames[NMETHODS];
};

/* Stands where a malloc hook would: captures the stack of its caller. Like
 * the runtime's memory hooks, it keeps a frame pointer and hands its frame
 * record to the fast walker, which starts at the caller from there. */
static int last_frames;

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int capture(enum method m)
{
  static uintptr_t pcs[MAX_FRAMES];
  void *buf[MAX_FRAMES];
  int truncated;
  switch (m) {
  case FAST:
    last_frames = igprof_walk_fast_from_frame(pcs, MAX_FRAMES, __builtin_return_address(0),
                                              __builtin_frame_address(0), &truncated);
    if (last_frames < 0) /* no frame record to start from (ARM32): the runtime's fallback */
      last_frames = igprof_walk_fast_from_hook(pcs, MAX_FRAMES, __builtin_return_address(0),
                                               &truncated);
    return last_frames;
  case UNW_BACKTRACE: return last_frames = unw_backtrace(buf, MAX_FRAMES);
  case GLIBC_BACKTRACE: return last_frames = backtrace(buf, MAX_FRAMES);
  default: return 0; /* NO_CAPTURE: the cost of getting here */
  }
}

/* Methods alternate batch by batch, so a change in machine load hits all
 * of them alike; each figure is the median batch. */
__attribute__((noinline)) static void measure(struct result *r)
{
  double batch[NMETHODS][REPS];
  for (int m = 0; m < NMETHODS; m++)
    r->frames[m] = capture((enum method)m); /* warm caches and lazy binding */
  for (int rep = 0; rep < REPS; rep++) {
    for (int m = 0; m < NMETHODS; m++) {
      double t0 = now_ns();
      for (int i = 0; i < CALLS; i++)
        capture((enum method)m);
      batch[m][rep] = (now_ns() - t0) / CALLS;
    }
  }
  for (int m = 0; m < NMETHODS; m++) {
    qsort(batch[m], REPS, sizeof batch[m][0], cmp_double);
    r->ns[m] = batch[m][REPS / 2];
  }
}

/* Recursion with a frame that the optimiser cannot fold away. */
__attribute__((noinline)) static int descend(int n, struct result *r)
{
  volatile int pad = n;
  if (n <= 0) {
    measure(r);
    return 0;
  }
  int x = descend(n - 1, r);
  return x + pad;
}

/* Second scenario: consecutive captures come from two different call
 * chains of the same depth (different functions, different frame shapes),
 * so no walk can reuse the previous one's frames except the few outermost.
 * The time of descending the chains without capturing is subtracted. */
__attribute__((noinline)) static int chain_a(int n, enum method m)
{
  volatile int pad = n;
  if (n <= 0)
    return capture(m);
  return chain_a(n - 1, m) + pad;
}

__attribute__((noinline)) static int chain_b(int n, enum method m)
{
  volatile long pad[4] = {n, n, n, n};
  if (n <= 0)
    return capture(m);
  return chain_b(n - 1, m) + (int)pad[n & 3];
}

/* Third scenario: every capture's stack lies at another place. chain_a
 * runs below a block of 16 to 1024 bytes taken from the stack, a different
 * size each time, in turn: the frames are the same functions but at other
 * stack addresses, so no earlier walk can be joined below the frame that
 * took the block. With SHIFTS places, more than the fast walker keeps
 * records of, each walk steps every frame of the chain. */
#define SHIFTS 64

__attribute__((noinline)) static int shifted(int n, enum method m, int k)
{
  volatile char *block = alloca(16 * (size_t)(k + 1));
  block[0] = (char)k;
  return chain_a(n - 1, m) + block[0];
}

enum scenario { ALTERNATING, SHIFTED };

static double time_scenario(enum scenario sc, int n, enum method m)
{
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) {
    if (sc == SHIFTED)
      shifted(n, m, i % SHIFTS);
    else
      (i & 1 ? chain_a : chain_b)(n, m);
  }
  return (now_ns() - t0) / CALLS;
}

__attribute__((noinline)) static void measure_scenario(enum scenario sc, int depth,
                                                       struct result *r)
{
  double batch[NMETHODS + 1][REPS];
  int n = depth - 5; /* main, libc start x2, _start, this function */
  for (int m = 0; m < NMETHODS; m++) {
    if (sc == SHIFTED)
      shifted(n, (enum method)m, 0);
    else
      chain_a(n, (enum method)m);
    r->frames[m] = last_frames;
  }
  for (int rep = 0; rep < REPS; rep++)
    for (int m = 0; m <= NMETHODS; m++)
      batch[m][rep] = time_scenario(sc, n, (enum method)m);
  for (int m = 0; m <= NMETHODS; m++)
    qsort(batch[m], REPS, sizeof batch[m][0], cmp_double);
  for (int m = 0; m < NMETHODS; m++)
    r->ns[m] = batch[m][REPS / 2] - batch[NO_CAPTURE][REPS / 2];
}

static void print_row(int depth, const struct result *r)
{
  printf("| %d (fast %d, unw %d, glibc %d) | %.0f | %.0f | %.0f | %.1fx | %.1fx |\n", depth,
         r->frames[FAST], r->frames[UNW_BACKTRACE], r->frames[GLIBC_BACKTRACE], r->ns[FAST],
         r->ns[UNW_BACKTRACE], r->ns[GLIBC_BACKTRACE], r->ns[UNW_BACKTRACE] / r->ns[FAST],
         r->ns[GLIBC_BACKTRACE] / r->ns[FAST]);
}

static const char table_head[] =
    "| stack depth (frames) | fast walker ns | unw_backtrace ns | glibc backtrace ns | "
    "unw_backtrace / fast | backtrace / fast |\n|---|---|---|---|---|---|\n";

int main(int argc, char **argv)
{
  int depths_default[] = {10, 30, 100};
  int ndepths = argc > 1 ? argc - 1 : 3;
  if (getenv("WALK_BENCH_CALLS") && atoi(getenv("WALK_BENCH_CALLS")) > 0)
    CALLS = atoi(getenv("WALK_BENCH_CALLS"));
#if defined(__arm__)
  /* libunwind's EHABI method only, as the runtime sets it (unwind_private.c):
   * the same tables the fast walker reads. */
  setenv("UNW_ARM_UNWIND_METHOD", "4", 1);
#endif
  igprof_walk_fast_init();
  int depths[8];
  for (int i = 0; i < ndepths && i < 8; i++) {
    depths[i] = argc > 1 ? atoi(argv[i + 1]) : depths_default[i];
    if (depths[i] < 6 || depths[i] > MAX_FRAMES - 8) {
      fprintf(stderr, "walk_bench: depth %d out of range 6..%d\n", depths[i], MAX_FRAMES - 8);
      return 2;
    }
  }
  if (ndepths > 8)
    ndepths = 8;
  printf("Same stack captured again and again (a loop allocating from one place):\n\n%s",
         table_head);
  for (int i = 0; i < ndepths; i++) {
    struct result r;
    /* main, __libc_start_call_main, __libc_start_main, _start, measure and
     * capture's caller make up the rest of the requested depth. */
    descend(depths[i] - 5, &r);
    print_row(depths[i], &r);
  }
  printf("\nConsecutive captures from two different call chains:\n\n%s", table_head);
  for (int i = 0; i < ndepths; i++) {
    struct result r;
    measure_scenario(ALTERNATING, depths[i], &r);
    print_row(depths[i], &r);
  }
  printf("\nEach capture's stack at another address (%d places in turn; nothing to reuse):\n\n%s",
         SHIFTS, table_head);
  for (int i = 0; i < ndepths; i++) {
    struct result r;
    measure_scenario(SHIFTED, depths[i], &r);
    print_row(depths[i], &r);
  }
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  printf("\nfast walker: %lu walks, %lu recipe steps, %lu libunwind steps, %lu PC-cache misses\n",
         (unsigned long)st.walks, (unsigned long)st.frames_fast,
         (unsigned long)st.frames_unwinder, (unsigned long)st.cache_misses);
  return 0;
}
