/* ARM32 walk tests: the context a signal at a function's first instruction
 * would give, which a real signal hits only now and then. Call entry_probe
 * in the function's place: it keeps r4-r11, sp and lr as they are at a
 * function's first instruction in entry_regs[0..9] and goes on to
 * entry_regs[10] (set it first) with lr unchanged, so that function runs
 * as the probed one would have, its caller's frame intact; there,
 * walk_from_entry walks from that context with the PC at `fn`'s first
 * instruction. One executable includes this once. */
#ifndef IGPROF_TESTS_WALK_ENTRY_PROBE_H
#define IGPROF_TESTS_WALK_ENTRY_PROBE_H
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "walk_fast.h"

unsigned long entry_regs[11];
void entry_probe(void);
__asm__(".text\n.balign 4\n.arm\n.globl entry_probe\n.type entry_probe, %function\nentry_probe:\n"
        "  ldr r12, 1f\n"
        "0:add r12, pc, r12\n"
        "  stmia r12, {r4-r11}\n"
        "  str sp, [r12, #32]\n"
        "  str lr, [r12, #36]\n"
        "  ldr r12, [r12, #40]\n"
        "  bx r12\n"
        "1:.word entry_regs - (0b + 8)\n"
        ".size entry_probe, . - entry_probe\n");

/* `fn`: the function's address as C gives it (bit 0 set for Thumb). */
static inline int walk_from_entry(uintptr_t fn, uintptr_t *pcs, int max)
{
  ucontext_t uc;
  memset(&uc, 0, sizeof uc);
  getcontext(&uc);
  mcontext_t *mc = &uc.uc_mcontext;
  mc->arm_r4 = entry_regs[0], mc->arm_r5 = entry_regs[1], mc->arm_r6 = entry_regs[2];
  mc->arm_r7 = entry_regs[3], mc->arm_r8 = entry_regs[4], mc->arm_r9 = entry_regs[5];
  mc->arm_r10 = entry_regs[6], mc->arm_fp = entry_regs[7];
  mc->arm_sp = entry_regs[8], mc->arm_lr = entry_regs[9];
  mc->arm_pc = fn & ~(uintptr_t)1;
  mc->arm_cpsr = (mc->arm_cpsr & ~0x20ul) | (fn & 1 ? 0x20 : 0);
  int trunc;
  return igprof_walk_fast_from_signal(pcs, max, &uc, &trunc);
}
#endif
