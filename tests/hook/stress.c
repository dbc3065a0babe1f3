/* hook.stress: 64 functions are hooked one after another while 4 threads
 * call, in a loop, every function hooked so far (through trampolines in the
 * very chunks the installs keep writing to) and 16 functions that are never
 * hooked; 2 more threads race to install the same hooks into the same
 * results (the documented way to re-hook: the loser gets already-hooked and
 * the live chain is never cleared), and a child forked halfway calls the
 * functions hooked before the fork through the hooks it inherited, and the
 * unhooked ones. Every call must return the original's result; each
 * function is patched exactly once; every replacement runs.
 *
 * The callers never run a function while it is being patched: hook.h rules
 * that out (a thread stopped between two instructions of the patched bytes
 * would resume in the middle of the new jump). That holds in the child too:
 * the racers start just before the fork, and the function one of them was
 * patching at that instant stays half written in the child, parked on its
 * branch to itself for good (one run in about 15 under qemu-arm spun there,
 * in fns[HOOKED / 2]), so the child calls none of the functions hooked
 * after the fork. Nor does the child install hooks: forked from a process
 * whose other threads may be inside the dynamic loader (the racers look up
 * symbol sizes), it may only make async-signal-safe calls, and installing
 * takes the loader lock. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "check.h"
#include "hook.h"
#include "hook_internal.h"

#define N 64
#define CALLERS 4
#define UNHOOKED 16 /* fns[N - UNHOOKED .. N) are called but never hooked */
#define HOOKED (N - UNHOOKED)

/* 64 distinct functions, each long enough for the patch */
#define F(i)                                                   \
  static __attribute__((noinline)) long f##i(long x)           \
  {                                                            \
    for (int k = 0; k < 3; k++)                                \
      __asm__ volatile("" : "+r"(x));                          \
    return x * (i + 2) + i;                                    \
  }
#define F8(a) F(a##0) F(a##1) F(a##2) F(a##3) F(a##4) F(a##5) F(a##6) F(a##7)
F8(1) F8(2) F8(3) F8(4) F8(5) F8(6) F8(7) F8(8)
#define P8(a) f##a##0, f##a##1, f##a##2, f##a##3, f##a##4, f##a##5, f##a##6, f##a##7,
static long (*const fns[N])(long) = {P8(1) P8(2) P8(3) P8(4) P8(5) P8(6) P8(7) P8(8)};
static const long mul[N] = {
#define M8(a) a##0 + 2, a##1 + 2, a##2 + 2, a##3 + 2, a##4 + 2, a##5 + 2, a##6 + 2, a##7 + 2,
    M8(1) M8(2) M8(3) M8(4) M8(5) M8(6) M8(7) M8(8)};
static const long add[N] = {
#define A8(a) a##0, a##1, a##2, a##3, a##4, a##5, a##6, a##7,
    A8(1) A8(2) A8(3) A8(4) A8(5) A8(6) A8(7) A8(8)};

static struct hook_result hooks[N];
static atomic_long counts[N];
static atomic_int stop, wrong, published;

#define R(i)                                                            \
  static long r##i(long x)                                              \
  {                                                                     \
    counts[i]++;                                                        \
    return ((long (*)(long))hooks[i].chain)(x);                         \
  }
/* replacement k serves function k: indices 0..63 */
R(0) R(1) R(2) R(3) R(4) R(5) R(6) R(7) R(8) R(9) R(10) R(11) R(12) R(13) R(14) R(15)
R(16) R(17) R(18) R(19) R(20) R(21) R(22) R(23) R(24) R(25) R(26) R(27) R(28) R(29) R(30)
R(31) R(32) R(33) R(34) R(35) R(36) R(37) R(38) R(39) R(40) R(41) R(42) R(43) R(44) R(45)
R(46) R(47) R(48) R(49) R(50) R(51) R(52) R(53) R(54) R(55) R(56) R(57) R(58) R(59) R(60)
R(61) R(62) R(63)
static long (*const repls[N])(long) = {
    r0,  r1,  r2,  r3,  r4,  r5,  r6,  r7,  r8,  r9,  r10, r11, r12, r13, r14, r15,
    r16, r17, r18, r19, r20, r21, r22, r23, r24, r25, r26, r27, r28, r29, r30, r31,
    r32, r33, r34, r35, r36, r37, r38, r39, r40, r41, r42, r43, r44, r45, r46, r47,
    r48, r49, r50, r51, r52, r53, r54, r55, r56, r57, r58, r59, r60, r61, r62, r63};

static int call_range(long n, int from, int to)
{
  int bad = 0;
  for (int i = from; i < to; i++) {
    long (*volatile f)(long) = fns[i];
    if (f(n) != n * mul[i] + add[i])
      bad++;
  }
  return bad;
}

static int call_all(long n) { return call_range(n, 0, N); }

static void *caller(void *arg)
{
  (void)arg;
  for (long n = 0; !stop; n++) {
    int hooked = atomic_load_explicit(&published, memory_order_acquire);
    wrong += call_range(n, 0, hooked) + call_range(n, HOOKED, N);
  }
  return NULL;
}

/* Installs the same hooks as main, racing it. */
static atomic_int racer_ok;
static void *racer(void *arg)
{
  (void)arg;
  for (int i = 0; i < HOOKED; i++) {
    enum hook_status st = hook_install_at((void *)fns[i], hook_function_size((uintptr_t)fns[i]),
                                          (void *)repls[i], &hooks[i]);
    if (st == HOOK_OK)
      racer_ok++;
    else if (st != HOOK_ERR_ALREADY_HOOKED)
      wrong++;
  }
  return NULL;
}

int main(void)
{
  pthread_t callers[CALLERS], racers[2];
  for (int i = 0; i < CALLERS; i++)
    CHECK_EQ_LONG(pthread_create(&callers[i], NULL, caller, NULL), 0);
  int main_ok = 0;
  pid_t child = -1;
  for (int i = 0; i < HOOKED; i++) {
    if (i == HOOKED / 2) {
      CHECK_EQ_LONG(pthread_create(&racers[0], NULL, racer, (void *)0), 0);
      CHECK_EQ_LONG(pthread_create(&racers[1], NULL, racer, (void *)1), 0);
      child = fork();
      if (child == 0) {
        /* only this thread exists here; the first half is hooked */
        long before = counts[0];
        int bad = call_range(7, 0, HOOKED / 2) + call_range(7, HOOKED, N);
        _exit(bad == 0 && counts[0] == before + 1 ? 0 : 3);
      }
    }
    enum hook_status st = hook_install_at((void *)fns[i], hook_function_size((uintptr_t)fns[i]),
                                          (void *)repls[i], &hooks[i]);
    if (st == HOOK_OK)
      main_ok++;
    CHECK(st == HOOK_OK || st == HOOK_ERR_ALREADY_HOOKED);
    atomic_store_explicit(&published, i + 1, memory_order_release);
    usleep(2000);
  }
  usleep(50000);
  stop = 1;
  for (int i = 0; i < CALLERS; i++)
    CHECK_EQ_LONG(pthread_join(callers[i], NULL), 0);
  for (int i = 0; i < 2; i++)
    CHECK_EQ_LONG(pthread_join(racers[i], NULL), 0);
  int status;
  CHECK_EQ_LONG(waitpid(child, &status, 0), child);
  CHECK_EQ_LONG(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status), 0);
  /* each function was patched exactly once, by main or by a racer */
  CHECK_EQ_LONG(main_ok + racer_ok, HOOKED);
  for (int i = 0; i < HOOKED; i++)
    CHECK(hooks[i].chain != NULL && (uintptr_t)hooks[i].chain - (uintptr_t)hooks[i].trampoline ==
                                         ARCH_TRAMPOLINE_HEAD);
  CHECK_EQ_LONG(wrong, 0);
  for (int i = 0; i < HOOKED; i++)
    CHECK(counts[i] > 0);
  for (int i = HOOKED; i < N; i++)
    CHECK_EQ_LONG(counts[i], 0);
  CHECK_EQ_LONG(call_all(5), 0);
  return check_report("hook.stress");
}
