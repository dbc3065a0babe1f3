/* ARM32 (A32 and Thumb-2) parts of frame stepping: register numbering,
 * ucontext conversions, the kernel's signal frames, and recipes read from
 * EHABI tables (arm_ehabi.c) instead of .eh_frame. The recipe step itself
 * is generic (frame.h).
 *
 * Recipes track sp, r7 (frame_regs.fp: Thumb code's frame pointer) and lr;
 * r11 rides along in frame_regs.r11 while it is known. A frame whose CFA
 * is r11's (A32 code with a frame pointer), or that pops sp (the signal
 * trampolines), gets a FRAME_COMPLEX | FRAME_EHABI recipe: the walker steps
 * it with the interpreter (frame_ehabi_step). Recipes restore r11 where it
 * was pushed with the return address (FRAME_R11_SAVED: push {..., r11, lr},
 * GCC's prologues, one push), so r11 stays known along the walk; an entry
 * that saves it elsewhere is the interpreter's too. */
#define _GNU_SOURCE
#include "frame.h"

#include <signal.h>
#include <stddef.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "arm_ehabi.h"
#include "arm_prologue.h"

/* FRAME_REGS_HERE stores at these offsets. */
_Static_assert(offsetof(struct frame_regs, pc) == 0 && offsetof(struct frame_regs, sp) == 4 &&
                   offsetof(struct frame_regs, fp) == 8 && offsetof(struct frame_regs, lr) == 12 &&
                   offsetof(struct frame_regs, r11) == 16,
               "FRAME_REGS_HERE's offsets");

const struct frame_arch frame_arch = {
    .name = "arm",
    .dwarf_sp = 13,
    .dwarf_fp = 7,
    .dwarf_ra = 14,
    .min_insn = 2,
    .red_zone = 0, /* the AAPCS has none */
    /* No frame chain is guessed for code without table entries: EABI code
     * keeps no frame records a walk could follow (GCC's Thumb code points
     * r7 below its locals, and r7 and r11 are ordinary registers in code
     * built without a frame pointer, Debian's). libunwind, told to use the
     * tables only (unwind_private.c), ends its walk at such a frame too,
     * so the walk ends there without asking it (docs/stack-walking.md,
     * "ARM32"). */
    .fp_chain = {.kind = FRAME_OUTERMOST},
};

void frame_regs_from_ucontext(struct frame_regs *r, const ucontext_t *uc)
{
  r->pc = (uintptr_t)uc->uc_mcontext.arm_pc;
  r->sp = (uintptr_t)uc->uc_mcontext.arm_sp;
  r->fp = (uintptr_t)uc->uc_mcontext.arm_r7;
  r->lr = frame_code_address((uintptr_t)uc->uc_mcontext.arm_lr);
  r->r11 = (uintptr_t)uc->uc_mcontext.arm_fp;
}

/* The trampolines' codes (glibc's restorers are Thumb-2, the kernel's and
 * qemu's A32 or Thumb): r7 = the system call's number, then svc 0. */
#define NR_SIGRETURN 119
#define NR_RT_SIGRETURN 173

/* 1: sigreturn, 2: rt_sigreturn, 0: neither, for the code at pc (2-aligned,
 * FRAME_SIGRETURN_LEN bytes readable). */
static int sigreturn_kind(uintptr_t pc)
{
  const uint16_t *h = (const uint16_t *)pc;
  if (pc & 1)
    return 0;
  if ((pc & 3) == 0) {
    const uint32_t *w = (const uint32_t *)pc;
    if (w[1] == 0xef000000u && (w[0] == (0xe3a07000u | NR_SIGRETURN) || w[0] == (0xe3a07000u | NR_RT_SIGRETURN)))
      return (w[0] & 0xff) == NR_SIGRETURN ? 1 : 2; /* mov r7, #n; svc 0 */
  }
  if (h[0] == 0xf04f && (h[1] == (0x0700 | NR_SIGRETURN) || h[1] == (0x0700 | NR_RT_SIGRETURN)) && h[2] == 0xdf00)
    return (h[1] & 0xff) == NR_SIGRETURN ? 1 : 2; /* mov.w r7, #n; svc 0 */
  if ((h[0] == (0x2700 | NR_SIGRETURN) || h[0] == (0x2700 | NR_RT_SIGRETURN)) && h[1] == 0xdf00)
    return (h[0] & 0xff) == NR_SIGRETURN ? 1 : 2; /* movs r7, #n; svc 0 */
  return 0;
}

int frame_regs_from_signal_frame(struct frame_regs *r, uintptr_t lo, uintptr_t hi)
{
  /* Linux's (and qemu's) ARM signal frames at the stack pointer the
   * handler was entered with, the trampoline frame's: struct sigframe
   * { ucontext_t uc; ... } and struct rt_sigframe { siginfo_t info;
   * struct sigframe sig; }. */
  int kind = sigreturn_kind(r->pc);
  if (!kind)
    return 0;
  const ucontext_t *uc = (const ucontext_t *)(r->sp + (kind == 2 ? sizeof(siginfo_t) : 0));
  uintptr_t first = (uintptr_t)&uc->uc_mcontext.arm_r0;
  uintptr_t last = (uintptr_t)&uc->uc_mcontext.arm_pc;
  if (first < r->sp || first < lo || last > hi - sizeof(uintptr_t))
    return 0;
  frame_regs_from_ucontext(r, uc);
  return 1;
}

void frame_regs_to_ucontext(ucontext_t *uc, const struct frame_regs *r)
{
  uc->uc_mcontext.arm_pc = r->pc;
  uc->uc_mcontext.arm_sp = r->sp;
  uc->uc_mcontext.arm_r7 = r->fp;
  uc->uc_mcontext.arm_lr = r->lr;
  uc->uc_mcontext.arm_fp = r->r11;
}

int frame_regs_from_unwinder(struct frame_regs *r, void *unw_cursor)
{
  unw_cursor_t *c = unw_cursor;
  unw_word_t pc, sp, r7, r11, lr;
  if (unw_get_reg(c, UNW_REG_IP, &pc) < 0 || unw_get_reg(c, UNW_REG_SP, &sp) < 0 ||
      unw_get_reg(c, UNW_ARM_R7, &r7) < 0 || unw_get_reg(c, UNW_ARM_R11, &r11) < 0)
    return 0;
  if (unw_get_reg(c, UNW_ARM_R14, &lr) < 0)
    lr = 0;
  r->pc = frame_code_address(pc);
  r->sp = sp;
  r->fp = r7;
  r->r11 = r11;
  r->lr = frame_code_address(lr);
  return 1;
}

int frame_code_is_sigreturn(uintptr_t pc) { return sigreturn_kind(pc) != 0; }

int frame_unwinder_signal_step(void *unw_cursor, ucontext_t *uc, uintptr_t pc)
{
  unw_cursor_t *c = unw_cursor;
  unw_word_t sp;
  int kind = sigreturn_kind(pc);
  if (!kind || unw_get_reg(c, UNW_REG_SP, &sp) < 0)
    return 0;
  const ucontext_t *from = (const ucontext_t *)(sp + (kind == 2 ? sizeof(siginfo_t) : 0));
  if (!frame_memory_mapped((uintptr_t)from, sizeof *from))
    return 0;
  memcpy(&uc->uc_mcontext.arm_r0, &from->uc_mcontext.arm_r0, 16 * sizeof(uc->uc_mcontext.arm_r0));
  return unw_init_local2(c, UNW_CONTEXT(uc), UNW_INIT_SIGNAL_FRAME) == 0;
}

int frame_is_sigreturn(uintptr_t pc)
{
  return (pc & 1) == 0 && frame_memory_mapped(pc, FRAME_SIGRETURN_LEN) && frame_code_is_sigreturn(pc);
}

struct frame_recipe frame_ehabi_recipe(const struct ehabi_table *t, uintptr_t pc)
{
  struct frame_recipe rc = {0, 0, 0, FRAME_NO_INFO, 0};
  const uint32_t *entry = ehabi_find(t, pc);
  if (!entry)
    return rc;
  uintptr_t start = ehabi_prel31(entry);
  struct ehabi_shape sh;
  enum ehabi_result res = ehabi_shape(t, entry, &sh);
  int described = res == EHABI_OK; /* its saved registers all known */
  if (entry[1] != 1 &&
      (pc == start || (pc % 2 == 0 && pc > start &&
                       (arm_function_entry(start, pc) || (described && sh.saved && arm_push_at(pc) == sh.saved))))) {
    /* An interrupted PC on a function's first instruction (a return
     * address less 1 is odd, a function's start even): nothing is pushed
     * yet, the return address is in lr. qemu-user delivers signals at the
     * start of a translated block, often a function's entry. The entry's
     * start, or a function after it that the linker's merged entry covers
     * (glibc's pthread_join helpers share one): its code says so, by a
     * push of lr after the end of the code before it, or (a leaf's, which
     * keeps lr: push {r7}, after a literal pool) by a push of exactly the
     * registers the entry pops, which has not run yet. */
    rc.kind = FRAME_CFA_SP;
    rc.flags = FRAME_RA_IN_LR;
    return rc;
  }
  /* What the interpreter steps: sp, r7, r11 and lr are all it may read. */
  const uint32_t tracked = 1u << 7 | 1u << 11 | 1u << 13 | 1u << 14;
  const struct frame_recipe interpret = {0, 0, 0, FRAME_COMPLEX, FRAME_EHABI};
  switch (res) {
  case EHABI_END: rc.kind = FRAME_OUTERMOST; return rc;
  case EHABI_OK:
  case EHABI_INTERPRET: break;
  default: rc.kind = FRAME_COMPLEX; return rc; /* libunwind's */
  }
  if (sh.reads & ~tracked) {
    rc.kind = FRAME_COMPLEX; /* vsp from a register the walk does not follow: libunwind's */
    return rc;
  }
  if (res == EHABI_INTERPRET || sh.base == 11)
    return interpret;
  if (sh.base != 13 && sh.base != 7) {
    rc.kind = FRAME_COMPLEX;
    return rc;
  }
  rc.kind = sh.base == 13 ? FRAME_CFA_SP : FRAME_CFA_FP;
  rc.cfa_offset = sh.cfa;
  if (sh.saved & (1u << 15))
    rc.ra_offset = sh.save_at[15];
  else if (sh.saved & (1u << 14))
    rc.ra_offset = sh.save_at[14];
  else
    rc.flags |= FRAME_RA_IN_LR;
  if (sh.saved & (1u << 7)) {
    rc.flags |= FRAME_FP_SAVED;
    rc.fp_offset = sh.save_at[7];
  }
  if (sh.saved & (1u << 11)) {
    if ((rc.flags & FRAME_RA_IN_LR) || sh.save_at[11] != rc.ra_offset - 4)
      return interpret;
    rc.flags |= FRAME_R11_SAVED;
  }
  return rc;
}

enum frame_step_result frame_ehabi_step(const struct ehabi_table *t, uintptr_t pc, struct frame_regs *r,
                                        uintptr_t lo, uintptr_t hi)
{
  const uint32_t *entry = ehabi_find(t, pc);
  if (!entry)
    return FRAME_STEP_UNWINDER;
  struct ehabi_shape sh;
  enum ehabi_result res = ehabi_shape(t, entry, &sh);
  if ((res == EHABI_OK || res == EHABI_INTERPRET) && (sh.reads & (1u << 11)) && !r->r11)
    return FRAME_STEP_UNWINDER; /* r11 not known here */
  struct ehabi_regs er;
  memset(&er, 0, sizeof er);
  er.r[7] = r->fp;
  er.r[11] = r->r11;
  er.r[13] = r->sp;
  er.r[14] = r->lr;
  er.r[15] = r->pc;
  switch (ehabi_step(t, entry, &er, lo, hi)) {
  case EHABI_OK: break;
  case EHABI_END: return FRAME_STEP_END;
  case EHABI_BAD_STACK: return FRAME_STEP_BAD_STACK;
  default: return FRAME_STEP_UNWINDER;
  }
  r->pc = frame_code_address(er.r[15]);
  r->sp = er.r[13];
  r->fp = er.r[7];
  r->r11 = er.r[11];
  r->lr = 0;
  return FRAME_STEP_OK;
}
