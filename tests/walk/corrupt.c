/* A corrupt stack must end the walk cleanly: no fault, no endless loop, at
 * most `max` frames, the interrupted PC always first.
 *
 * Each trial builds a fake interrupted context whose stack is a buffer on
 * this thread's real stack, filled with a mix of random words, pointers back
 * into the buffer and pointers into the code of this program and of libc
 * (so that the walker keeps finding "valid" return addresses and frame
 * recipes and follows them), then walks it with
 * igprof_walk_fast_from_signal. A second series points the stack pointer at
 * unmapped memory.
 *
 * The frames no recipe describes go to libunwind, which does not check every
 * address it reads (on i386 none): this program defines the walker's escape
 * slot and a SIGSEGV/SIGBUS handler that jumps out of a faulting unw_step,
 * as the runtime does, and counts the faults the walker abandoned.
 *
 * usage: walk_corrupt TRIALS
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "../arch/frame.h"
#include "walk_fast.h"

/* The walker's escape (walk_fast.h): the runtime's is per thread, this
 * single-threaded test needs one. */
static void *escape;
void **igprof_unwind_escape_slot(void) { return &escape; }
static long faults_seen;

static void on_fault(int sig, siginfo_t *si, void *ucv)
{
  (void)si;
  ucontext_t *uc = ucv;
  if (!escape) {
    signal(sig, SIG_DFL); /* not inside a walk: die of it */
    return;
  }
  sigjmp_buf *to = escape;
  escape = NULL;
  faults_seen++;
  sigprocmask(SIG_SETMASK, &uc->uc_sigmask, NULL);
  siglongjmp(*to, 1);
}

#define WORDS 4096
#define MAX 256

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) { /* xorshift64*: reproducible */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static uintptr_t code_targets[64];
static int ncode;

static uintptr_t random_word(const uintptr_t *buf)
{
  uint64_t r = next_random();
  switch (r % 4) {
  case 0: return (uintptr_t)next_random();                          /* noise */
  case 1: return (uintptr_t)&buf[next_random() % WORDS];            /* into the stack */
  default: return code_targets[r % (uint64_t)ncode] + (r >> 40) % 64; /* into code */
  }
}

__attribute__((noinline)) static int one_trial(int wild_sp, long *frames, long *deep)
{
  uintptr_t buf[WORDS];
  for (int i = 0; i < WORDS; i++)
    buf[i] = random_word(buf);
  ucontext_t uc;
  memset(&uc, 0, sizeof uc);
  uintptr_t pc = code_targets[next_random() % (uint64_t)ncode] + next_random() % 64;
#if defined(__arm__)
  pc &= ~(uintptr_t)1; /* an interrupted PC: arm_pc has no Thumb bit (cpsr says the state) */
#endif
  struct frame_regs regs = {
      .pc = pc,
      .sp = wild_sp ? (uintptr_t)(0x100000000000ull + (next_random() % 0x1000) * 4096)
                    : (uintptr_t)&buf[next_random() % (WORDS / 2)],
      .fp = random_word(buf),
  };
  frame_regs_to_ucontext(&uc, &regs);
  uintptr_t pcs[MAX];
  int truncated = -1;
  int n = igprof_walk_fast_from_signal(pcs, MAX, &uc, &truncated);
  if (n < 1 || n > MAX || pcs[0] != pc || truncated < WALK_COMPLETE || truncated > WALK_STOPPED) {
    printf("FAIL: trial gave n=%d pcs[0]=%#lx (pc %#lx) truncated=%d\n", n,
           n > 0 ? (unsigned long)pcs[0] : 0ul, (unsigned long)pc, truncated);
    return 0;
  }
  *frames += n;
  if (n > 1)
    (*deep)++;
  __asm__ volatile("" ::"r"(buf) : "memory");
  return 1;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: %s TRIALS\n", argv[0]);
    return 2;
  }
  long trials = atol(argv[1]);
  /* Code of this program and of libc, at function starts and inside. */
  uintptr_t fns[] = {(uintptr_t)one_trial, (uintptr_t)random_word, (uintptr_t)main,
                     (uintptr_t)memset, (uintptr_t)memcpy, (uintptr_t)qsort,
                     (uintptr_t)printf, (uintptr_t)strtol, (uintptr_t)mmap,
                     (uintptr_t)getenv, (uintptr_t)atol, (uintptr_t)fwrite};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
    for (int k = 0; k < 5; k++)
      code_targets[ncode++] = fns[i] + (uintptr_t)k * 24;

#if defined(__arm__)
  setenv("UNW_ARM_UNWIND_METHOD", "4", 1); /* the tables only, as in the runtime */
#endif
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  igprof_walk_fast_init();
  long frames = 0, deep = 0;
  for (long t = 0; t < trials; t++)
    if (!one_trial(0, &frames, &deep))
      return 1;
  for (long t = 0; t < trials / 10; t++)
    if (!one_trial(1, &frames, &deep))
      return 1;
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  printf("corrupt: %ld trials, %ld frames, %ld walks past frame 0, %lu cut, %lu libunwind steps, "
         "%lu faults inside libunwind abandoned\n",
         trials + trials / 10, frames, deep, (unsigned long)st.walks_cut,
         (unsigned long)st.frames_unwinder, (unsigned long)st.unwinder_faults);
  if ((long)st.unwinder_faults != faults_seen) {
    printf("FAIL: the handler escaped %ld faults, the walker counted %lu\n", faults_seen,
           (unsigned long)st.unwinder_faults);
    return 1;
  }
  /* The garbage must have been followed some of the time, or this test
   * proves nothing about the checks. */
  if (deep < trials / 20) {
    printf("FAIL: only %ld of %ld walks went past the first frame\n", deep, trials);
    return 1;
  }
  return 0;
}
