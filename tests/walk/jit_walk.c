/* The fast walker through machine code made at run time (jit_code.h): an
 * anonymous mapping without unwind information, as a JIT compiler leaves.
 *
 * Every walk must name exactly the frames on the stack:
 *  - hook walks from C code called by JIT code that keeps the frame-pointer
 *    chain (one JIT frame, then two in a row) go through the JIT frames and
 *    on into the C frames that called them, to the end of the stack;
 *  - through JIT code that uses the frame-pointer register for data they
 *    stop after its frame, marked WALK_STOPPED;
 *  - signal walks that interrupt a JIT loop do the same from the exact PC.
 * And they must be cheap: no system call made by the walker, no frame
 * handed to libunwind, the guessed recipe derived once per address
 * (counters of walk_fast_stats, over ROUNDS walks of each kind).
 *
 * usage: walk_jit ROUNDS
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../arch/frame.h"
#include "cpu_timer.h"
#include "jit_code.h"
#include "walk_fast.h"

#define MAX 256
#define NOINLINE __attribute__((noinline))

struct capture {
  uintptr_t pcs[MAX];
  int n, truncated;
  uintptr_t ret; /* the return address the walk started from */
};

static struct jit_code jit;
static struct capture base, got;
static volatile long sink;
static int failures;

NOINLINE static void capture(struct capture *c)
{
  void *ret = __builtin_return_address(0);
  c->ret = (uintptr_t)ret;
  c->n = igprof_walk_fast_from_hook(c->pcs, MAX, ret, &c->truncated);
  __asm__ volatile("" ::: "memory"); /* no tail call */
}

NOINLINE static void callback(long arg)
{
  capture(&got);
  sink += arg;
}

/* The C caller of the JIT code. `base` is the walk from here: its frames
 * after the first are the ones every walk from inside must end with. */
NOINLINE static void c_enter(enum jit_function_id id, long arg)
{
  capture(&base);
  jit_call(&jit, id, callback, arg);
  sink++;
}

static void fail(const char *what, const struct capture *c, const uintptr_t *want, int n_want,
                 int trunc_want)
{
  failures++;
  printf("FAIL: %s: %d frames (truncated %d), expected %d (truncated %d)\n", what, c->n,
         c->truncated, n_want, trunc_want);
  int n = c->n > n_want ? c->n : n_want;
  for (int i = 0; i < n && i < 16; i++)
    printf("  [%2d] got %#lx want %#lx\n", i, i < c->n ? (unsigned long)c->pcs[i] : 0ul,
           i < n_want ? (unsigned long)want[i] : 0ul);
}

/* `first` frames given, then base's frames from its second on. */
static int check(const char *what, const struct capture *c, const uintptr_t *first, int n_first,
                 int with_base, int trunc_want)
{
  uintptr_t want[MAX];
  int n = 0;
  for (int i = 0; i < n_first; i++)
    want[n++] = first[i];
  for (int i = 1; with_base && i < base.n && n < MAX; i++)
    want[n++] = base.pcs[i];
  int same = c->n == n && c->truncated == trunc_want;
  for (int i = 0; same && i < n; i++)
    same = c->pcs[i] == want[i];
  if (!same)
    fail(what, c, want, n, trunc_want);
  return same;
}

static struct walk_fast_stats stats_now(void)
{
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  return st;
}

/* The walker's own cost over a stretch of walks: none of it in the kernel
 * or in libunwind; at most `guesses` addresses newly given the
 * frame-pointer recipe (each is cached). */
static void check_cost(const char *what, struct walk_fast_stats a, struct walk_fast_stats b,
                       long walks, uint64_t guesses)
{
  printf("%s: %ld walks, %lu frames by recipe, %lu recipes guessed, "
         "%lu by libunwind, %lu system calls\n",
         what, walks, (unsigned long)(b.frames_fast - a.frames_fast),
         (unsigned long)(b.guesses - a.guesses),
         (unsigned long)(b.frames_unwinder - a.frames_unwinder),
         (unsigned long)(b.kernel_calls - a.kernel_calls));
  if (b.kernel_calls != a.kernel_calls || b.frames_unwinder != a.frames_unwinder ||
      b.unwinder_replays != a.unwinder_replays || b.walks_unwinder != a.walks_unwinder ||
      b.guesses - a.guesses > guesses) {
    printf("FAIL: %s: the walker made system calls, asked libunwind, or guessed more than %lu "
           "recipes\n",
           what, (unsigned long)guesses);
    failures++;
  }
}

static void hook_walks(long rounds)
{
  const struct jit_function *f = jit.fn;
  struct walk_fast_stats a = stats_now();
  for (long r = 0; r < rounds; r++) {
    c_enter(JIT_WITH_FP, r);
    uintptr_t one[] = {got.ret - 1, f[JIT_WITH_FP].call_ret - 1, f[JIT_WITH_FP].caller - 1};
    if (!check("callback <- JIT (frame pointer) <- c_enter", &got, one, 3, 1, WALK_COMPLETE))
      return;

    c_enter(JIT_OUTER, r);
    uintptr_t two[] = {got.ret - 1, f[JIT_WITH_FP].call_ret - 1, f[JIT_OUTER].call_ret - 1,
                       f[JIT_OUTER].caller - 1};
    if (f[JIT_WITH_FP].caller != f[JIT_OUTER].call_ret) {
      printf("FAIL: the outer JIT function's call returns to %#lx, not %#lx\n",
             (unsigned long)f[JIT_WITH_FP].caller, (unsigned long)f[JIT_OUTER].call_ret);
      failures++;
      return;
    }
    if (!check("callback <- JIT <- JIT <- c_enter", &got, two, 4, 1, WALK_COMPLETE))
      return;

    c_enter(JIT_WITHOUT_FP, r);
    uintptr_t stop[] = {got.ret - 1, f[JIT_WITHOUT_FP].call_ret - 1};
    if (!check("callback <- JIT (no frame pointer)", &got, stop, 2, 0, WALK_STOPPED))
      return;
  }
  /* Three addresses without unwind data: the two JIT call sites of the
   * callback's caller and the outer function's. */
  check_cost("hook walks through JIT frames", a, stats_now(), rounds * 6, 3);
}

/* ---- signal walks interrupting JIT code ---------------------------------- */

#define SAMPLES 32

static struct capture samples[SAMPLES];
static uintptr_t sample_pc[SAMPLES];
static volatile int nsamples;
static volatile int spinning = -1; /* the jit_function_id running, or -1 */

static void on_prof(int sig, siginfo_t *si, void *ucv)
{
  (void)sig, (void)si;
  const ucontext_t *uc = ucv;
  struct frame_regs regs;
  frame_regs_from_ucontext(&regs, uc);
  uintptr_t pc = regs.pc;
  int id = spinning, k = nsamples;
  if (id < 0 || k >= SAMPLES || pc < jit.fn[id].loop || pc >= jit.fn[id].loop_end)
    return; /* only where the JIT frame is complete */
  samples[k].n = igprof_walk_fast_from_signal(samples[k].pcs, MAX, uc, &samples[k].truncated);
  sample_pc[k] = pc;
  nsamples = k + 1;
}

NOINLINE static void c_spin(enum jit_function_id id)
{
  capture(&base);
  nsamples = 0;
  spinning = id;
  /* At most about ten seconds of CPU, far more than needed. */
  for (int chunk = 0; nsamples < SAMPLES && chunk < 20000; chunk++)
    jit_spin(&jit, id, 1 << 20);
  spinning = -1;
  sink++;
}

static void signal_walks(void)
{
  timer_t timer = cpu_timer_start(on_prof, 1000000);

  const struct jit_function *f = jit.fn;
  for (int id = JIT_SPIN_FP; id <= JIT_SPIN_WITHOUT_FP; id++) {
    struct walk_fast_stats a = stats_now();
    c_spin(id);
    int n = nsamples;
    if (n < SAMPLES) {
      printf("FAIL: only %d samples in the JIT loop\n", n);
      failures++;
    }
    for (int k = 0; k < n; k++) {
      uintptr_t first[] = {sample_pc[k], f[id].caller - 1};
      if (id == JIT_SPIN_FP &&
          !check("signal in a JIT loop (frame pointer)", &samples[k], first, 2, 1, WALK_COMPLETE))
        break;
      if (id == JIT_SPIN_WITHOUT_FP &&
          !check("signal in a JIT loop (no frame pointer)", &samples[k], first, 1, 0, WALK_STOPPED))
        break;
    }
    /* The loop's two instructions are the only new addresses. */
    check_cost(id == JIT_SPIN_FP ? "signal walks in JIT code (frame pointer)"
                                 : "signal walks in JIT code (no frame pointer)",
               a, stats_now(), n + 1, 2);
  }
  timer_delete(timer);
}

int main(int argc, char **argv)
{
  if (argc != 2 || atol(argv[1]) < 1) {
    fprintf(stderr, "usage: %s ROUNDS\n", argv[0]);
    return 2;
  }
  if (!jit_code_make(&jit)) {
    perror("walk_jit: cannot make code");
    return 2;
  }
  igprof_walk_fast_init();
  hook_walks(atol(argv[1]));
  signal_walks();
  if (failures)
    return 1;
  printf("ok\n");
  return 0;
}
