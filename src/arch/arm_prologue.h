/* ARM32 prologue reading: the frame of code that no EHABI entry describes
 * (EXIDX_CANTUNWIND, most of Debian's armhf code, or code outside every
 * entry), found from the function's instructions (docs/stack-walking.md,
 * "ARM32", "Where the table does not describe the frame").
 *
 * Plain C without system calls, allocation or global state, reading only
 * the code in the bounds the caller gives: built for the host too (its
 * test runs in the native suite on hand-assembled code). What it returns
 * is a shape the caller applies to a frame's registers and must validate
 * (the return address after a call, in a module's code; the caller's stack
 * pointer above the frame's, on its stack).
 */
#ifndef IGPROF_ARCH_ARM_PROLOGUE_H
#define IGPROF_ARCH_ARM_PROLOGUE_H

#include <stddef.h>
#include <stdint.h>

/* How far back from the PC the saving push is looked for. */
#define ARM_PROLOGUE_SCAN 32768u

enum arm_prologue_result {
  ARM_PROLOGUE_OK,      /* the shape of the frame at `end` */
  ARM_PROLOGUE_LEAF,    /* no saving push before `end`: the return address is in lr */
  ARM_PROLOGUE_REFUSED, /* sp changes in a way the reader does not follow */
};

/* The frame at `end`: the caller's stack pointer is sp + cfa; the return
 * address is at sp + cfa + ra_at (ra_at < 0), or still in lr where
 * ra_in_lr (a push not yet run, an epilogue that popped it); r7 and r11,
 * where the frame saved them (r7_at, r11_at < 0, relative to the caller's
 * sp as ra_at), at sp + cfa + r7_at, r11_at (0: not saved). crossed_return:
 * scanning back from `end` met a return before the push (the push may be
 * another function's: for an interrupted frame, lr is the better guess). */
struct arm_prologue {
  int32_t cfa;
  int32_t ra_at, r7_at, r11_at;
  int ra_in_lr;
  int crossed_return;
  uintptr_t push;      /* where the saving push is */
  uintptr_t return_at; /* the return crossed nearest the PC (crossed_return) */
  /* The frame as a leaf's (its return address in lr): the caller's sp is
   * sp + leaf_cfa, from the pushes and sp adjustments between the nearest
   * return (or the scan's start) and the PC (a leaf built at -O0 pushes
   * r7). leaf_ok: they could be followed. */
  int32_t leaf_cfa;
  int leaf_ok;
};

/* Code that differs in memory from what the compiler wrote: a window a
 * hook patched (its jump over the function's first instructions), with
 * the bytes it held. */
struct arm_code_patch {
  uintptr_t at;
  size_t len;
  const uint8_t *bytes;
};

/* Read the code before `end` (an interrupted PC, or a return address
 * without its Thumb bit) as Thumb-2 (`thumb` 1) or A32 code, reading only
 * [lo, end) (lo: the start of the code the function can begin at, its
 * module's text or its index entry; the scan also stops ARM_PROLOGUE_SCAN
 * bytes back). The npatch windows of `patch` are read as their bytes say,
 * not as memory does (the walker gives the hook engine's patches there). */
enum arm_prologue_result arm_prologue_read(uintptr_t lo, uintptr_t end, int thumb,
                                           const struct arm_code_patch *patch, size_t npatch,
                                           struct arm_prologue *out);

/* Whether the code at `pc` (no Thumb bit) is a function's first
 * instruction as its code shows it: an instruction that saves lr right
 * after the end of the code before it (a return, an unconditional branch;
 * nop padding between), Thumb or A32. An EHABI entry describes its
 * function after the prologue; the linker merges adjacent entries that
 * unwind alike, so one entry may also cover the next function, whose first
 * instruction it then describes as a body. [lo, pc + 2) must be readable
 * (and pc + 4 when the halfword at pc begins a 32-bit instruction). */
int arm_function_entry(uintptr_t lo, uintptr_t pc);

/* The registers (bit n: rn, lr bit 14) the instruction at `pc` (no Thumb
 * bit) pushes if it is a push (Thumb push, push.w, a single str.w rt,
 * [sp, #-4]!, read first; then, at a word boundary, A32's), else 0.
 * [pc, pc + 4) must be readable. */
uint32_t arm_push_at(uintptr_t pc);

/* Whether the code before the return address `ra` (with its Thumb bit, as
 * the call left it in lr) is a call: Thumb bl/blx imm ending at ra or blx
 * rN; A32 bl, blx imm or blx rN at ra - 4. [ra - 4, ra) must be readable. */
int arm_follows_call(uintptr_t ra);

/* The target of the call before `ra` (arm_follows_call: true) when it is
 * direct (bl, blx imm), with the Thumb bit of its mode; 0 for blx rN. */
int arm_call_target(uintptr_t ra, uintptr_t *target);

#endif
