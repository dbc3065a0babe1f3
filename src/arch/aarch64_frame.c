/* AArch64 parts of frame stepping: DWARF numbering, ucontext conversions and
 * the kernel-side memory probe. The step itself is generic (frame.h). */
#define _GNU_SOURCE
#include "frame.h"

#include <errno.h>
#include <signal.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <sys/syscall.h>
#include <unistd.h>

const struct frame_arch frame_arch = {
    .name = "aarch64",
    .dwarf_sp = 31, /* sp */
    .dwarf_fp = 29, /* x29 */
    .dwarf_ra = 30, /* x30, the link register */
    .min_insn = 4,
    .red_zone = 0, /* AAPCS64 has none: a signal may write just below SP */
    /* stp x29, x30, [sp, #-16]!; mov x29, sp: the record at FP, the
     * caller's stack pointer at least 16 bytes above it (frame.h). */
    .fp_chain = {.cfa_offset = 16, .fp_offset = -16, .ra_offset = -8, .kind = FRAME_CFA_FP,
                 .flags = FRAME_FP_SAVED},
};

void frame_regs_from_ucontext(struct frame_regs *r, const ucontext_t *uc)
{
  r->pc = (uintptr_t)uc->uc_mcontext.pc;
  r->sp = (uintptr_t)uc->uc_mcontext.sp;
  r->fp = (uintptr_t)uc->uc_mcontext.regs[29];
  r->lr = (uintptr_t)uc->uc_mcontext.regs[30];
}

int frame_regs_from_signal_frame(struct frame_regs *r, uintptr_t lo, uintptr_t hi)
{
  /* Linux's (and qemu's) struct rt_sigframe { siginfo_t info; ucontext_t
   * uc; } at the stack pointer the handler was entered with, which is the
   * trampoline frame's; the context's layout is glibc's ucontext_t. */
  const ucontext_t *uc = (const ucontext_t *)(r->sp + sizeof(siginfo_t));
  uintptr_t first = (uintptr_t)&uc->uc_mcontext.regs[29];
  uintptr_t last = (uintptr_t)&uc->uc_mcontext.pc;
  if (first < r->sp || first < lo || last > hi - sizeof(uintptr_t))
    return 0;
  frame_regs_from_ucontext(r, uc);
  return 1;
}

void frame_regs_to_ucontext(ucontext_t *uc, const struct frame_regs *r)
{
  uc->uc_mcontext.pc = r->pc;
  uc->uc_mcontext.sp = r->sp;
  uc->uc_mcontext.regs[29] = r->fp;
  uc->uc_mcontext.regs[30] = r->lr;
}

int frame_regs_from_unwinder(struct frame_regs *r, void *unw_cursor)
{
  unw_cursor_t *c = unw_cursor;
  unw_word_t pc, sp, fp, lr;
  if (unw_get_reg(c, UNW_REG_IP, &pc) < 0 || unw_get_reg(c, UNW_REG_SP, &sp) < 0 ||
      unw_get_reg(c, UNW_AARCH64_X29, &fp) < 0)
    return 0;
  /* x30 is the frame's own after a signal frame (restored from its
   * context); after an ordinary step it is whatever libunwind last had, and
   * the walker keeps it only in the first case (struct frame_regs). */
  if (unw_get_reg(c, UNW_AARCH64_X30, &lr) < 0)
    lr = 0;
  r->pc = frame_code_address(pc);
  r->sp = sp;
  r->fp = fp;
  r->lr = frame_code_address(lr);
  return 1;
}

int frame_code_is_sigreturn(uintptr_t pc)
{
  /* The kernel's (vDSO) and glibc's __default_rt_sa_restorer:
   * mov x8, #139 (rt_sigreturn); svc #0 */
  static const uint32_t seq[2] = {0xd2801168u, 0xd4000001u};
  const uint32_t *code = (const uint32_t *)pc;
  return (pc & 3) == 0 && code[0] == seq[0] && code[1] == seq[1];
}

int frame_is_sigreturn(uintptr_t pc)
{
  return (pc & 3) == 0 && frame_memory_mapped(pc, FRAME_SIGRETURN_LEN) &&
         frame_code_is_sigreturn(pc);
}
