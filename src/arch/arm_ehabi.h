/* ARM EHABI unwinding tables (.ARM.exidx, .ARM.extab): the lookup of a
 * PC's entry and a signal-safe interpreter of its unwinding instructions,
 * for the ARM32 fast walker (docs/stack-walking.md, "ARM32").
 *
 * Plain C without system calls, allocation or global state: every read of
 * the stack is checked against the bounds the caller gives, every read of
 * a table against the table's own extent, so a corrupt table or stack can
 * only end a step, never fault. Built for the host too (its tests run in
 * the native suite on hand-made tables).
 */
#ifndef IGPROF_ARCH_ARM_EHABI_H
#define IGPROF_ARCH_ARM_EHABI_H

#include <stddef.h>
#include <stdint.h>

/* The core registers of a frame: r0-r15 (r13 sp, r14 lr, r15 pc); words
 * of the target (uintptr_t, so a host test can point them at its memory). */
struct ehabi_regs {
  uintptr_t r[16];
};

enum ehabi_result {
  EHABI_OK,          /* regs describe the caller (r[15] its return address) */
  EHABI_END,         /* EXIDX_CANTUNWIND or "refuse to unwind": the stack ends here */
  EHABI_UNSUPPORTED, /* an instruction the interpreter does not take (iWMMXt, spare codes) */
  EHABI_BAD_TABLE,   /* an entry or its instructions run outside the table given */
  EHABI_BAD_STACK,   /* a read outside [lo, hi), or a stack pointer that goes down */
  EHABI_INTERPRET,   /* ehabi_shape: the caller's sp is no register plus a constant
                      * (it pops sp, or sets vsp from a register after pops) */
};

/* A module's index table as loaded: `exidx` holds `count` entries of two
 * words, sorted by function address, at their load address (the prel31
 * offsets in them are relative to where each word is). `extab_lo`,
 * `extab_hi` bound the words an entry may point at (the module's mapped
 * read-only data). */
struct ehabi_table {
  const uint32_t *exidx;
  size_t count;
  uintptr_t extab_lo, extab_hi;
};

/* The entry covering `pc` (the last entry whose function starts at or
 * below it), or NULL when pc lies below the first. */
const uint32_t *ehabi_find(const struct ehabi_table *t, uintptr_t pc);

/* The unwinding instructions of `entry` applied to `regs`, reading the
 * stack only within [lo, hi): on EHABI_OK regs are the caller's, with
 * r[15] the return address (lr where the instructions do not pop pc). */
enum ehabi_result ehabi_step(const struct ehabi_table *t, const uint32_t *entry, struct ehabi_regs *regs,
                             uintptr_t lo, uintptr_t hi);

/* What an entry's instructions do, said the way a frame recipe says it:
 * the caller's stack pointer is r[base] + cfa (base 13: this frame's sp;
 * otherwise the register "vsp = r[n]" names, at this frame), and each
 * register of `saved` (bit n: rn) was saved at the caller's stack pointer
 * plus save_at[n] (a negative offset). pc (r15) in `saved` means the
 * return address is popped into pc; otherwise it is lr's save slot, or
 * still in lr when lr is not in `saved` either (a leaf). */
struct ehabi_shape {
  unsigned base;
  int32_t cfa;
  uint32_t saved;
  uint32_t reads; /* registers "vsp = r[n]" reads before any pop of them */
  int32_t save_at[16];
};

/* The shape of `entry`'s instructions, read without a stack: EHABI_OK, or
 * EHABI_END (EXIDX_CANTUNWIND, "refuse to unwind"), EHABI_INTERPRET (only
 * ehabi_step can follow them; `reads` is still filled in),
 * EHABI_UNSUPPORTED, EHABI_BAD_TABLE, as ehabi_step would answer. */
enum ehabi_result ehabi_shape(const struct ehabi_table *t, const uint32_t *entry, struct ehabi_shape *out);

/* The address a prel31 word at `at` points to. */
static inline uintptr_t ehabi_prel31(const uint32_t *at)
{
  uint32_t v = *at;
  int32_t off = (int32_t)(v << 1) >> 1; /* sign-extend 31 bits */
  return (uintptr_t)at + (uintptr_t)(intptr_t)off;
}

#endif
