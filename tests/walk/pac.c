/* walk.pac (AArch64): the fast walker through code built with return-address
 * signing (-mbranch-protection=pac-ret, as this file is): every function
 * here signs its return address (paciasp) before saving it and authenticates
 * it (autiasp) after restoring it, and its CFI says so
 * (DW_CFA_AARCH64_negate_ra_state). A walk must give the code addresses,
 * signature stripped, whether it reads a return address from the stack or,
 * for an interrupted frame, from the link register.
 *
 * The reference is libgcc's unwinder (_Unwind_Backtrace), which follows the
 * signing state in the CFI and strips signed addresses (libunwind 1.6 does
 * neither). Hook walks from a leaf at several depths, signal walks that
 * interrupt a loop calling small signed functions, and walks from traps
 * between paciasp and the save and between the restore and autiasp (the
 * return address signed in x30) must equal it frame for frame, every frame
 * stepped by recipe. The walks must also have met signed return
 * addresses at all: a frame record of this file whose saved return address
 * has bits above the 48-bit address set. Without pointer authentication
 * (no HWCAP_PACA: paciasp is a no-op) the test says so and is skipped.
 *
 * usage: walk_pac ROUNDS */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unwind.h>

#include "cpu_timer.h"
#include "walk_fast.h"

#ifndef HWCAP_PACA
#define HWCAP_PACA (1UL << 30)
#endif

#define MAX 128
#define NOINLINE __attribute__((noinline))

struct trace {
  uintptr_t pcs[MAX];
  int n;
};

/* ---- the reference ------------------------------------------------------- */

struct collect {
  struct trace *t;
  uintptr_t from; /* record from the frame whose IP is this (0: the first) */
  uintptr_t pc;   /* and that frame is recorded as this exact PC (0: ip - 1) */
};

static _Unwind_Reason_Code collect_frame(struct _Unwind_Context *ctx, void *arg)
{
  struct collect *c = arg;
  int before;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &before);
  if (c->from) {
    if (ip != c->from)
      return _URC_NO_REASON;
    c->from = 0;
    c->t->pcs[c->t->n++] = c->pc ? c->pc : ip - 1;
    return _URC_NO_REASON;
  }
  if (ip == 0 || c->t->n == MAX)
    return _URC_END_OF_STACK;
  c->t->pcs[c->t->n++] = before ? ip : ip - 1;
  return _URC_NO_REASON;
}

static void reference(struct trace *t, uintptr_t from, uintptr_t exact_pc)
{
  struct collect c = {t, from, exact_pc};
  t->n = 0;
  _Unwind_Backtrace(collect_frame, &c);
}

static int same(const struct trace *a, const struct trace *b)
{
  return a->n == b->n && memcmp(a->pcs, b->pcs, sizeof a->pcs[0] * (size_t)a->n) == 0;
}

static void show(const char *what, const struct trace *fast, const struct trace *ref)
{
  printf("FAIL: %s: fast walker %d frames, libgcc %d frames\n", what, fast->n, ref->n);
  int n = fast->n > ref->n ? fast->n : ref->n;
  for (int i = 0; i < n && i < 24; i++)
    printf("  [%2d] %#lx %s %#lx\n", i, i < fast->n ? (unsigned long)fast->pcs[i] : 0ul,
           i < fast->n && i < ref->n && fast->pcs[i] == ref->pcs[i] ? "==" : "!=",
           i < ref->n ? (unsigned long)ref->pcs[i] : 0ul);
}

/* ---- signed return addresses --------------------------------------------- */

static volatile long sink;
static long signed_seen;
static volatile long failures; /* the signal handler's too */

/* A frame record's saved return address, as the stack holds it. */
static void note_record(const uintptr_t *record)
{
  if (record[1] >> 48)
    signed_seen++;
}

/* ---- hook walks ----------------------------------------------------------- */

static long hook_walks;

NOINLINE static void capture(void)
{
  struct trace fast, ref;
  uintptr_t ret = (uintptr_t)__builtin_return_address(0);
  int truncated;
  note_record(__builtin_frame_address(0));
  fast.n = igprof_walk_fast_from_hook(fast.pcs, MAX, (void *)ret, &truncated);
  reference(&ref, ret, 0);
  hook_walks++;
  if (!same(&fast, &ref) && failures++ < 3)
    show("hook walk", &fast, &ref);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

NOINLINE static int descend(int n)
{
  volatile int pad = n;
  if (n == 0)
    capture();
  else
    descend(n - 1);
  return pad;
}

/* ---- signal walks --------------------------------------------------------- */

static volatile long signal_walks;
static volatile int sampling;

NOINLINE static void on_prof(int sig, siginfo_t *si, void *ucv)
{
  (void)sig, (void)si;
  if (!sampling)
    return;
  const ucontext_t *uc = ucv;
  struct trace fast, ref;
  int truncated;
  fast.n = igprof_walk_fast_from_signal(fast.pcs, MAX, uc, &truncated);
  /* libgcc's walk from here: this handler, the signal trampoline, then
   * the interrupted frame, whose PC is exact. */
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
  reference(&ref, pc, pc);
  signal_walks++;
  if (!same(&fast, &ref) && failures++ < 3)
    show("signal walk", &fast, &ref);
}

/* Small functions that call others, so each signs and saves its return
 * address: most of their instructions are prologue and epilogue. */
NOINLINE static long leaf_add(long x)
{
  __asm__ volatile("" ::: "memory");
  return x + 1;
}

NOINLINE static long tiny(long x) { return leaf_add(x) * 3; }

NOINLINE static long spin(long rounds)
{
  long acc = 0;
  for (long i = 0; i < rounds; i++)
    acc += tiny(i);
  return acc;
}

/* ---- the link register, signed ---------------------------------------------
 *
 * qemu delivers asynchronous signals only where a block of translated code
 * starts, never between a paciasp and the save after it. Here a trap stops
 * the code exactly there, and again between the restore and autiasp: the
 * interrupted frame's return address is in x30, signed, and the CFI says
 * so. */
void pac_window(void);
__asm__(".text\n"
        ".p2align 2\n"
        ".type pac_window, %function\n"
        "pac_window:\n"
        ".cfi_startproc\n"
        "hint #25\n" /* paciasp */
        ".cfi_negate_ra_state\n"
        "brk #0x71\n"
        "stp x29, x30, [sp, #-16]!\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 29, -16\n"
        ".cfi_offset 30, -8\n"
        "mov x29, sp\n"
        "ldp x29, x30, [sp], #16\n"
        ".cfi_restore 30\n"
        ".cfi_restore 29\n"
        ".cfi_def_cfa_offset 0\n"
        "brk #0x72\n"
        "hint #29\n" /* autiasp */
        ".cfi_negate_ra_state\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size pac_window, .-pac_window\n");

static long trap_walks, traps_signed;

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
  (void)sig, (void)si;
  ucontext_t *uc = ucv;
  struct trace fast, ref;
  int truncated;
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
  if (uc->uc_mcontext.regs[30] >> 48)
    traps_signed++;
  fast.n = igprof_walk_fast_from_signal(fast.pcs, MAX, uc, &truncated);
  reference(&ref, pc, pc);
  trap_walks++;
  if (!same(&fast, &ref) && failures++ < 3)
    show("walk from a trap with the return address signed in x30", &fast, &ref);
  uc->uc_mcontext.pc = pc + 4; /* past the brk */
}

NOINLINE static void trap_walks_at(int depth)
{
  if (depth > 0) {
    trap_walks_at(depth - 1);
    __asm__ volatile("" ::: "memory");
    return;
  }
  pac_window();
}

int main(int argc, char **argv)
{
  if (argc != 2 || atol(argv[1]) < 1) {
    fprintf(stderr, "usage: %s ROUNDS\n", argv[0]);
    return 2;
  }
  if (!(getauxval(AT_HWCAP) & HWCAP_PACA)) {
    printf("skipped: this CPU has no pointer authentication (paciasp signs nothing)\n");
    return 77;
  }
  long rounds = atol(argv[1]);
  igprof_walk_fast_init();
  for (long r = 0; r < rounds; r++)
    descend((int)(r % 40));

  struct sigaction trap;
  memset(&trap, 0, sizeof trap);
  trap.sa_sigaction = on_trap;
  trap.sa_flags = SA_SIGINFO;
  sigaction(SIGTRAP, &trap, NULL);
  for (int d = 0; d < 8; d++)
    trap_walks_at(d);

  timer_t timer = cpu_timer_start(on_prof, 200000);
  sampling = 1;
  for (int chunk = 0; signal_walks < rounds / 4 && chunk < 400; chunk++)
    sink += spin(100000);
  sampling = 0;
  timer_delete(timer);

  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  printf("pac: %ld hook walks, %ld signal walks, %ld trap walks (%ld with x30 signed), %ld frame "
         "records with a signed return address, %ld walks differ from libgcc's; %lu frames by "
         "recipe, %lu by libunwind\n",
         hook_walks, signal_walks, trap_walks, traps_signed, signed_seen, failures,
         (unsigned long)st.frames_fast, (unsigned long)st.frames_unwinder);
  int ok = failures == 0;
  /* A signature is a few bits (7 with a 48-bit address space and the top
   * byte ignored): one that is all zero leaves a signed x30 looking
   * unsigned, and both trap windows of one depth sign the same value with
   * the same modifier, so about one run in twenty sees 2 of the 16 traps
   * "unsigned" (CI under qemu-aarch64: 14 of 16). Most must be signed. */
  if (signed_seen == 0 || traps_signed * 2 < trap_walks) {
    printf("FAIL: return addresses were not signed as expected: the test proves nothing\n");
    ok = 0;
  }
  if (signal_walks < rounds / 4 || trap_walks != 16) {
    printf("FAIL: %ld signal walks (at least %ld expected), %ld trap walks (16 expected)\n",
           signal_walks, rounds / 4, trap_walks);
    ok = 0;
  }
  /* Signed frames are recipes like any others: libunwind (1.6 reads no
   * DW_CFA_AARCH64_negate_ra_state) never steps them. */
  if (st.frames_unwinder != 0) {
    printf("FAIL: %lu frames were left to libunwind\n", (unsigned long)st.frames_unwinder);
    ok = 0;
  }
  return ok ? 0 : 1;
}
