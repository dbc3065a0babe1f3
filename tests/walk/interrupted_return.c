/* An interrupted PC that is also a return address, where the two unwind
 * rows differ (x86): ir_popper pops its caller's argument (`ret $4` on
 * i386, as for a structure returned in memory; `ret $8` here on x86_64),
 * so at the return address in ir_caller_* (ir_site_*) the stack pointer is
 * a word higher once the call has returned than while it runs. A walk
 * through the call (a hook walk from inside ir_popper) must use the row of
 * the call instruction; a walk from a signal at the return address, the
 * row at it. The signal is a single-step trap after ir_popper's return
 * (the trap flag set just before it), so it lands there every time.
 *
 * Both orders are walked, the walker's PC cache empty and then full: site
 * a is met as a return address first, site b as an interrupted PC first.
 * Each signal walk must be the hook walk from the site on: the site
 * exactly, then the same frames. Every walk is also compared with
 * libunwind (check_here, check_signal), whose cache of rows keyed by the
 * PC alone gave the first lookup's row to the other kind of frame
 * (walk_check.c, check_init).
 *
 * usage: walk_interrupted_return */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#include "walk_check.h"
#include "walk_fast.h"

#define MAX 64
#define ROUNDS 3
enum { HOOK_WALK = 1, TRAP = 2 };

/* ir_caller_X(flags): calls ir_popper(flags) with one argument word on the
 * stack, which ir_popper pops on return. ir_popper walks (ir_hook_point)
 * if flags has HOOK_WALK, and sets the trap flag before its return if it
 * has TRAP. ir_reg_cfa traps at ir_reg_cfa_trap, just after it moved the
 * stack pointer down, where its CFA is in %rcx / %ecx (a register the fast
 * walker does not track) from that PC on: the row before it has the CFA
 * 32 bytes off. */
#if defined(__x86_64__)
#define IR_CALLER(n)                                                                                         \
  ".globl ir_caller_" n "\n.hidden ir_caller_" n "\n.type ir_caller_" n ", @function\n"                      \
  "ir_caller_" n ":\n .cfi_startproc\n"                                                                      \
  " sub $8, %rsp\n .cfi_adjust_cfa_offset 8\n"                                                               \
  " push $7\n .cfi_adjust_cfa_offset 8\n"                                                                    \
  " call ir_popper\n"                                                                                        \
  ".globl ir_site_" n "\n.hidden ir_site_" n "\nir_site_" n ":\n .cfi_adjust_cfa_offset -8\n"                \
  " add $8, %rsp\n .cfi_adjust_cfa_offset -8\n"                                                              \
  " ret\n .cfi_endproc\n.size ir_caller_" n ", . - ir_caller_" n "\n"
__asm__(".text\n.p2align 4\n.type ir_popper, @function\nir_popper:\n .cfi_startproc\n"
        " sub $16, %rsp\n .cfi_adjust_cfa_offset 16\n"
        " mov %rdi, (%rsp)\n"
        " test $1, %dil\n jz 1f\n call ir_hook_point\n"
        "1: mov (%rsp), %rax\n"
        " add $16, %rsp\n .cfi_adjust_cfa_offset -16\n"
        " test $2, %al\n jz 2f\n"
        " pushfq\n .cfi_adjust_cfa_offset 8\n"
        " orq $0x100, (%rsp)\n"
        " popfq\n .cfi_adjust_cfa_offset -8\n"
        "2: ret $8\n .cfi_endproc\n.size ir_popper, . - ir_popper\n" IR_CALLER("a") IR_CALLER("b"));
__asm__(".text\n.p2align 4\n.globl ir_reg_cfa\n.hidden ir_reg_cfa\n.type ir_reg_cfa, @function\n"
        "ir_reg_cfa:\n .cfi_startproc\n"
        " push %rbp\n .cfi_adjust_cfa_offset 8\n .cfi_offset %rbp, -16\n"
        " mov %rsp, %rcx\n"
        " pushfq\n .cfi_adjust_cfa_offset 8\n orq $0x100, (%rsp)\n popfq\n .cfi_adjust_cfa_offset -8\n"
        " sub $32, %rsp\n"
        ".globl ir_reg_cfa_trap\n.hidden ir_reg_cfa_trap\nir_reg_cfa_trap:\n .cfi_def_cfa %rcx, 16\n"
        " nop\n"
        " mov %rcx, %rsp\n .cfi_def_cfa %rsp, 16\n"
        " pop %rbp\n .cfi_def_cfa_offset 8\n .cfi_restore %rbp\n"
        " ret\n .cfi_endproc\n.size ir_reg_cfa, . - ir_reg_cfa\n");
#define PC_REG REG_RIP
#elif defined(__i386__)
#define IR_CALLER(n)                                                                                         \
  ".globl ir_caller_" n "\n.hidden ir_caller_" n "\n.type ir_caller_" n ", @function\n"                      \
  "ir_caller_" n ":\n .cfi_startproc\n"                                                                      \
  " sub $12, %esp\n .cfi_adjust_cfa_offset 12\n"                                                             \
  " pushl 16(%esp)\n .cfi_adjust_cfa_offset 4\n"                                                             \
  " call ir_popper\n"                                                                                        \
  ".globl ir_site_" n "\n.hidden ir_site_" n "\nir_site_" n ":\n .cfi_adjust_cfa_offset -4\n"                \
  " add $12, %esp\n .cfi_adjust_cfa_offset -12\n"                                                            \
  " ret\n .cfi_endproc\n.size ir_caller_" n ", . - ir_caller_" n "\n"
__asm__(".text\n.p2align 4\n.type ir_popper, @function\nir_popper:\n .cfi_startproc\n"
        " sub $8, %esp\n .cfi_adjust_cfa_offset 8\n"
        " testl $1, 12(%esp)\n jz 1f\n call ir_hook_point\n"
        "1: movl 12(%esp), %eax\n"
        " add $8, %esp\n .cfi_adjust_cfa_offset -8\n"
        " testl $2, %eax\n jz 2f\n"
        " pushfl\n .cfi_adjust_cfa_offset 4\n"
        " orl $0x100, (%esp)\n"
        " popfl\n .cfi_adjust_cfa_offset -4\n"
        "2: ret $4\n .cfi_endproc\n.size ir_popper, . - ir_popper\n" IR_CALLER("a") IR_CALLER("b"));
__asm__(".text\n.p2align 4\n.globl ir_reg_cfa\n.hidden ir_reg_cfa\n.type ir_reg_cfa, @function\n"
        "ir_reg_cfa:\n .cfi_startproc\n"
        " push %ebp\n .cfi_adjust_cfa_offset 4\n .cfi_offset %ebp, -8\n"
        " mov %esp, %ecx\n"
        " pushfl\n .cfi_adjust_cfa_offset 4\n orl $0x100, (%esp)\n popfl\n .cfi_adjust_cfa_offset -4\n"
        " sub $32, %esp\n"
        ".globl ir_reg_cfa_trap\n.hidden ir_reg_cfa_trap\nir_reg_cfa_trap:\n .cfi_def_cfa %ecx, 8\n"
        " nop\n"
        " mov %ecx, %esp\n .cfi_def_cfa %esp, 8\n"
        " pop %ebp\n .cfi_def_cfa_offset 4\n .cfi_restore %ebp\n"
        " ret\n .cfi_endproc\n.size ir_reg_cfa, . - ir_reg_cfa\n");
#define PC_REG REG_EIP
#else
#error "x86 only: no other port's calls pop their caller's stack"
#endif

void ir_caller_a(long flags);
void ir_caller_b(long flags);
void ir_reg_cfa(long flags);
extern const char ir_site_a[], ir_site_b[], ir_reg_cfa_trap[];

static uintptr_t hook_pcs[MAX], trap_pcs[MAX], trap_pc, handler_pcs[MAX];
static int n_hook, n_trap, traps, n_handler;

__attribute__((noinline, used, visibility("hidden"))) void ir_hook_point(void)
{
  int trunc;
  n_hook = igprof_walk_fast_from_hook(hook_pcs, MAX, __builtin_return_address(0), &trunc);
  check_here();
}

/* A hook walk from the trap's handler, back through the signal frame. */
__attribute__((noinline)) static void walk_in_handler(void)
{
  int trunc;
  n_handler = igprof_walk_fast_from_hook(handler_pcs, MAX, __builtin_return_address(0), &trunc);
  check_here();
}

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
  (void) sig;
  (void) si;
  ucontext_t *uc = ucv;
  uc->uc_mcontext.gregs[REG_EFL] &= ~0x100; /* one step only */
  trap_pc = (uintptr_t) uc->uc_mcontext.gregs[PC_REG];
  int trunc;
  n_trap = igprof_walk_fast_from_signal(trap_pcs, MAX, uc, &trunc);
  traps++;
  check_signal(uc);
  if (trap_pc == (uintptr_t) ir_reg_cfa_trap) walk_in_handler();
}

/* One call site in main for every call, so that every walk's outer frames
 * are the same. */
__attribute__((noinline)) static void run(int site, long flags)
{
  static void (*const fns[])(long) = {ir_caller_a, ir_caller_b, ir_reg_cfa};
  fns[site](flags);
  __asm__ volatile("" ::: "memory"); /* no tail call */
}

static int failures;

static void expect(int ok, const char *what, int round, char site)
{
  if (!ok) {
    fprintf(stderr, "FAIL: round %d, site %c: %s\n", round, site, what);
    failures++;
  }
}

int main(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGTRAP, &sa, NULL);
  check_init();
  static const struct {
    int site;
    long flags;
  } steps[] = {{0, HOOK_WALK}, {0, TRAP}, {1, TRAP}, {1, HOOK_WALK}};
  for (int round = 0; round < ROUNDS; round++) {
    uintptr_t hook[2][MAX], trap[2][MAX];
    int nh[2] = {0, 0}, nt[2] = {0, 0};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
      int site = steps[s].site;
      n_hook = n_trap = 0;
      int traps_before = traps;
      trap_pc = 0;
      run(site, steps[s].flags);
      if (steps[s].flags & HOOK_WALK) {
        nh[site] = n_hook;
        memcpy(hook[site], hook_pcs, sizeof hook_pcs);
      } else {
        uintptr_t want = (uintptr_t) (site ? ir_site_b : ir_site_a);
        expect(traps == traps_before + 1 && trap_pc == want, "one trap, at the site", round, "ab"[site]);
        nt[site] = n_trap;
        memcpy(trap[site], trap_pcs, sizeof trap_pcs);
      }
    }
    for (int site = 0; site < 2; site++) {
      char name = "ab"[site];
      uintptr_t at = (uintptr_t) (site ? ir_site_b : ir_site_a);
      /* hook walk: ir_popper's frame, then the call at the site */
      expect(nh[site] >= 4 && hook[site][1] == at - 1, "the hook walk passes the site's call", round, name);
      expect(nt[site] >= 3 && trap[site][0] == at, "the signal walk starts at the site", round, name);
      int same = nh[site] >= 2 && nt[site] == nh[site] - 1;
      for (int i = 1; same && i < nt[site]; i++) same = trap[site][i] == hook[site][i + 1];
      expect(same, "the signal walk goes on as the hook walk does past the site", round, name);
      if (!same || round == 0) {
        printf("site %c, round %d: hook walk", name, round);
        for (int i = 0; i < nh[site]; i++) printf(" %#lx", (unsigned long) hook[site][i]);
        printf("\n  signal walk");
        for (int i = 0; i < nt[site]; i++) printf(" %#lx", (unsigned long) trap[site][i]);
        printf("\n");
      }
    }
    /* The CFA in a register the fast walker does not track: the signal walk
     * has it from the signal's context, the hook walk from the handler from
     * the signal frame, through libunwind. Both go on as site a's signal
     * walk does (one call instruction in run for every site; main's call
     * of run is another one here). */
    n_trap = n_handler = 0;
    int traps_before = traps;
    run(2, 0);
    uintptr_t at = (uintptr_t) ir_reg_cfa_trap;
    expect(traps == traps_before + 1 && trap_pc == at, "one trap, at ir_reg_cfa_trap", round, 'r');
    int same = n_trap == nt[0] && n_trap >= 3 && trap_pcs[0] == at;
    for (int i = 1; same && i < n_trap; i++) same = i == 2 || trap_pcs[i] == trap[0][i];
    expect(same, "the signal walk gives the trap's PC, then site a's callers", round, 'r');
    int j = 1;
    while (j < n_handler && handler_pcs[j] != at) j++;
    int through = j < n_handler && n_handler - j == n_trap;
    for (int i = 0; through && i < n_trap; i++) through = handler_pcs[j + i] == trap_pcs[i];
    expect(through, "the hook walk from the handler goes on as the signal walk does", round, 'r');
    if (!same || !through || round == 0) {
      printf("register CFA, round %d: signal walk", round);
      for (int i = 0; i < n_trap; i++) printf(" %#lx", (unsigned long) trap_pcs[i]);
      printf("\n  hook walk in the handler");
      for (int i = 0; i < n_handler; i++) printf(" %#lx", (unsigned long) handler_pcs[i]);
      printf("\n");
    }
  }
  /* Every walk against libunwind: hook walks from ir_hook_point (ir_popper,
   * ir_caller, run, main, the C library's start) and from the handler,
   * signal walks from the trap. */
  if (check_report("interrupted_return", ROUNDS * 2 * 9, ROUNDS * 2) != 0) failures++;
  if (failures) return 1;
  printf("interrupted_return: %d rounds, each site walked as a return address and as an "
         "interrupted PC, both orders, and a CFA in a register walked from the signal and "
         "from its handler: same frames\n",
         ROUNDS);
  return 0;
}
