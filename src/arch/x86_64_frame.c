/* x86_64 parts of frame stepping: DWARF numbering, ucontext conversions and
 * the kernel-side memory probe. The step itself is generic (frame.h). */
#define _GNU_SOURCE
#include "frame.h"

#include <errno.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

const struct frame_arch frame_arch = {
    .name = "x86_64",
    .dwarf_sp = 7,  /* %rsp */
    .dwarf_fp = 6,  /* %rbp */
    .dwarf_ra = 16, /* return address column */
    .min_insn = 1,
    .red_zone = 128, /* System V AMD64 ABI §3.2.2 */
    /* push %rbp; mov %rsp, %rbp: the saved %rbp at FP, the return address
     * above it, the caller's stack pointer above that. */
    .fp_chain = {.cfa_offset = 16, .fp_offset = -16, .ra_offset = -8, .kind = FRAME_CFA_FP,
                 .flags = FRAME_FP_SAVED},
};

void frame_regs_from_ucontext(struct frame_regs *r, const ucontext_t *uc)
{
  r->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  r->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  r->fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
}

int frame_regs_from_signal_frame(struct frame_regs *r, uintptr_t lo, uintptr_t hi)
{
  (void)r, (void)lo, (void)hi;
  return 0; /* libunwind steps glibc's __restore_rt, described by its CFI */
}

void frame_regs_to_ucontext(ucontext_t *uc, const struct frame_regs *r)
{
  uc->uc_mcontext.gregs[REG_RIP] = (greg_t)r->pc;
  uc->uc_mcontext.gregs[REG_RSP] = (greg_t)r->sp;
  uc->uc_mcontext.gregs[REG_RBP] = (greg_t)r->fp;
}

int frame_regs_from_unwinder(struct frame_regs *r, void *unw_cursor)
{
  unw_cursor_t *c = unw_cursor;
  unw_word_t pc, sp, fp;
  if (unw_get_reg(c, UNW_REG_IP, &pc) < 0 || unw_get_reg(c, UNW_REG_SP, &sp) < 0 ||
      unw_get_reg(c, UNW_X86_64_RBP, &fp) < 0)
    return 0;
  r->pc = pc;
  r->sp = sp;
  r->fp = fp;
  return 1;
}

int frame_code_is_sigreturn(uintptr_t pc)
{
  /* glibc's __restore_rt: mov $15 (rt_sigreturn), %rax; syscall */
  static const unsigned char seq[FRAME_SIGRETURN_LEN] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
                                                         0x00, 0x00, 0x0f, 0x05};
  const unsigned char *code = (const unsigned char *)pc;
  for (int i = 0; i < FRAME_SIGRETURN_LEN; i++)
    if (code[i] != seq[i])
      return 0;
  return 1;
}

int frame_is_sigreturn(uintptr_t pc)
{
  return frame_memory_mapped(pc, FRAME_SIGRETURN_LEN) && frame_code_is_sigreturn(pc);
}
