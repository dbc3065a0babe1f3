/* The fast walker through frames without unwind entries (ARM32: code
 * built without unwind tables, EXIDX_CANTUNWIND, most of Debian's armhf
 * code), stepped by reading their prologues (src/arch/arm_prologue.c).
 * libunwind cannot be the reference (its walk ends at the first such
 * frame): the expected frames come from the chain's construction
 * (prologue_chain.c), named by dladdr, in order, up to main.
 *   - hook walks (igprof_walk_fast_from_hook) from the innermost function,
 *     three times;
 *   - signal walks (SIGPROF, ITIMER_PROF) while each function of the chain
 *     works a while before its call and the leaf spins: every walk whose
 *     interrupted frame is one of the chain's must give the rest of the
 *     chain from there; at least 8 functions interrupted, 20 walks in the
 *     leaf;
 *   - a walk from a context as a signal at the leaf's first instruction
 *     leaves it (the registers of its entry, saved by entry_probe), which
 *     a signal hits only now and then;
 *   - a hook walk with prologue reading off, which must end at the
 *     innermost function, as libunwind's does.
 * Between pc_cmp and pc_plt lie qsort's frames, in libc.so.6: one or more
 * frames of it are expected there, whatever their names. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#include "entry_probe.h"
#include "walk_fast.h"

extern void (*volatile chain_leaf)(void);
extern volatile int chain_stop;
extern volatile unsigned long chain_spins, chain_work;
int prologue_chain(int x);
void pc_spin(void);

#define LIBC "<libc>"
static const char *const expected[] = {"pc_spin", "pc_inner",       "pc_fp",  "pc_vpush", "pc_cmp",
                                       LIBC,      "pc_plt",         "pc_big", "pc_sub",   "pc_push",
                                       "pc_varargs", "prologue_chain", "run",  "main"};
#define N_EXPECTED (int)(sizeof expected / sizeof expected[0])
#define MAX 64

static uintptr_t hook_pcs[MAX];
static int hook_n;

static void capture(void)
{
  int trunc;
  hook_n = igprof_walk_fast_from_hook(hook_pcs, MAX, __builtin_return_address(0), &trunc);
}

#define WALKS 200
static uintptr_t sig_pcs[WALKS][MAX];
static int sig_n[WALKS];
static volatile int sig_walks;

static void on_prof(int sig, siginfo_t *si, void *ucv)
{
  (void)sig, (void)si;
  int k = sig_walks;
  if (k >= WALKS) {
    chain_stop = 1;
    return;
  }
  int trunc;
  sig_n[k] = igprof_walk_fast_from_signal(sig_pcs[k], MAX, ucv, &trunc);
  sig_walks = k + 1;
}

/* The name of the function at pc, LIBC for libc.so.6's, "?" without one.
 * Asked at pc | 1: a Thumb function's symbol value has bit 0 set, so
 * dladdr names its first byte (a signal's pc at its entry: qemu-user
 * delivers a pending signal where a translated block starts, and a call's
 * target starts one) after the function before it; bit 0 never leaves
 * the instruction at pc, A32 or Thumb. */
static const char *name_of(uintptr_t pc)
{
  Dl_info info;
  if (!dladdr((void *)(pc | 1), &info))
    return "?";
  if (info.dli_fname && strstr(info.dli_fname, "/libc.so"))
    return LIBC;
  return info.dli_sname ? info.dli_sname : "?";
}

/* Whether pcs[0 .. n) name expected[from ..] up to main; prints the walk
 * if not. */
static int matches(const char *what, const uintptr_t *pcs, int n, int from)
{
  int i = 0, e = from;
  while (e < N_EXPECTED && i < n) {
    const char *got = name_of(pcs[i]);
    if (strcmp(got, expected[e]) == 0) {
      i++;
      if (strcmp(expected[e], LIBC) != 0 || i == n || strcmp(name_of(pcs[i]), LIBC) != 0)
        e++; /* one or more libc frames */
      continue;
    }
    break;
  }
  if (e == N_EXPECTED)
    return 1;
  printf("%s: frame %d is %s (%#lx), expected %s; the walk:\n", what, i,
         i < n ? name_of(pcs[i]) : "(none)", i < n ? (unsigned long)pcs[i] : 0UL, expected[e]);
  for (int k = 0; k < n; k++)
    printf("  [%d] %#lx %s\n", k, (unsigned long)pcs[k], name_of(pcs[k]));
  return 0;
}

static uintptr_t entry_pcs[MAX];
static int entry_n;

/* The walk from the context a signal at pc_spin's first instruction would
 * give (entry_probe.h, called as the chain's leaf). */
__attribute__((noinline)) static void entry_walk(void) { entry_n = walk_from_entry((uintptr_t)pc_spin, entry_pcs, MAX); }

__attribute__((noinline)) int run(int x)
{
  int r = prologue_chain(x);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return r;
}

int main(void)
{
  int failures = 0;
  igprof_walk_fast_init();
  chain_leaf = capture;
  for (int round = 0; round < 3; round++) {
    hook_n = 0;
    run(round + 1);
    if (!matches("hook walk", hook_pcs, hook_n, 1))
      failures++;
  }
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  printf("hook walks: %llu frames stepped by their prologue\n", (unsigned long long)st.frames_prologue);
  if (st.frames_prologue < 3 * 9) {
    printf("FAIL: fewer than 27 frames stepped by their prologue\n");
    failures++;
  }
  chain_leaf = pc_spin;
  chain_work = 3000000;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_PROF, &it, NULL);
  run(11);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  chain_work = 0;
  int in_leaf = 0, checked = 0, outside = 0, bad = 0, functions = 0, seen[N_EXPECTED] = {0};
  for (int k = 0; k < sig_walks; k++) {
    const char *first = sig_n[k] ? name_of(sig_pcs[k][0]) : "(none)";
    int from = -1;
    for (int e = 0; e < N_EXPECTED && from < 0; e++)
      if (strcmp(first, expected[e]) == 0)
        from = e;
    if (from < 0) {
      outside++;
      continue;
    }
    checked++;
    in_leaf += from == 0;
    functions += seen[from]++ == 0;
    if (!matches("signal walk", sig_pcs[k], sig_n[k], from) && ++bad > 5)
      break;
  }
  printf("signal walks: %d, %d in the chain checked (%d in the spinning leaf, %d functions interrupted), "
         "%d elsewhere, %d wrong; %lu spins\n",
         sig_walks, checked, in_leaf, functions, outside, bad, chain_spins);
  if (bad) {
    printf("FAIL: %d signal walks differ from the chain\n", bad);
    failures++;
  }
  if (functions < 8) {
    printf("FAIL: signals interrupted only %d of the chain's functions, expected at least 8\n", functions);
    failures++;
  }
  if (in_leaf < 20) {
    printf("FAIL: only %d signal walks in the spinning leaf, expected at least 20\n", in_leaf);
    failures++;
  }
  /* At the leaf's first instruction (nothing of it to read back from). */
  entry_regs[10] = (uintptr_t)entry_walk;
  chain_leaf = entry_probe;
  run(5);
  /* frame 0 by address: the leaf's first instruction exactly */
  if (entry_n < 1 || entry_pcs[0] != ((uintptr_t)pc_spin & ~(uintptr_t)1)) {
    printf("FAIL: walk at the leaf's first instruction: frame 0 is %#lx, expected pc_spin at %#lx\n",
           entry_n ? (unsigned long)entry_pcs[0] : 0UL, (unsigned long)pc_spin);
    failures++;
  } else if (!matches("walk at the leaf's first instruction", entry_pcs + 1, entry_n - 1, 1))
    failures++;
  else
    printf("walk at the leaf's first instruction: %d frames\n", entry_n);

  /* Off: the walk ends at the first frame without a table entry. Last,
   * so that every walk before it reads prologues. */
  igprof_walk_fast_set_prologues(0);
  chain_leaf = capture;
  run(7);
  igprof_walk_fast_set_prologues(1);
  if (hook_n != 1 || strcmp(name_of(hook_pcs[0]), "pc_inner") != 0) {
    printf("FAIL: prologue reading off: %d frames, the first %s; expected pc_inner alone\n", hook_n,
           hook_n ? name_of(hook_pcs[0]) : "(none)");
    failures++;
  }

  return failures != 0;
}
