/* i386 parts of frame stepping: DWARF numbering, ucontext conversions, the
 * kernel's signal frames and the memory probe. The step itself is generic
 * (frame.h). */
#define _GNU_SOURCE
#include "frame.h"

#include <errno.h>
#include <signal.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <sys/syscall.h>
#include <unistd.h>

const struct frame_arch frame_arch = {
    .name = "i386",
    .dwarf_sp = 4, /* %esp */
    .dwarf_fp = 5, /* %ebp */
    .dwarf_ra = 8, /* %eip: the return-address column */
    .min_insn = 1,
    .red_zone = 0, /* the i386 System V ABI has none */
    /* push %ebp; mov %esp, %ebp: the saved %ebp at FP, the return address
     * above it, the caller's stack pointer above that. */
    .fp_chain = {.cfa_offset = 8, .fp_offset = -8, .ra_offset = -4, .kind = FRAME_CFA_FP,
                 .flags = FRAME_FP_SAVED},
};

void frame_regs_from_ucontext(struct frame_regs *r, const ucontext_t *uc)
{
  r->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
  r->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_ESP];
  r->fp = (uintptr_t)uc->uc_mcontext.gregs[REG_EBP];
}

/* The trampolines, by their code (the kernel's vDSO, qemu's vDSO and glibc
 * have the same): sigreturn's pops the signal number, then both load the
 * system call's number and enter the kernel with int $0x80. */
static const unsigned char sigreturn_code[8] = {0x58, 0xb8, 0x77, 0x00, 0x00, 0x00, 0xcd, 0x80};
static const unsigned char rt_sigreturn_code[7] = {0xb8, 0xad, 0x00, 0x00, 0x00, 0xcd, 0x80};

static int code_is(const unsigned char *code, const unsigned char *seq, int len)
{
  for (int i = 0; i < len; i++)
    if (code[i] != seq[i])
      return 0;
  return 1;
}

/* The interrupted context of the signal frame whose trampoline is at pc,
 * with sp the trampoline frame's stack pointer, or NULL where pc is no
 * trampoline. The handler's return popped the frame's first word
 * (pretcode), so sp is at the frame's second:
 *   struct sigframe    { pretcode; int sig; struct sigcontext sc; ... }
 *   struct rt_sigframe { pretcode; int sig; siginfo_t *pinfo; void *puc;
 *                        siginfo_t info; ucontext_t uc; ... }
 * (Linux's arch/x86/include/asm/sigframe.h; qemu-i386 keeps the fields up
 * to puc but puts the ucontext elsewhere: puc, the frame's own pointer to
 * its context, is followed). An interrupted PC past sigreturn's pop has the
 * context at the stack pointer. glibc's mcontext_t starts with the kernel's
 * sigcontext's registers, in its order. The caller has checked that the
 * code at pc and the three words at sp are readable. */
static const mcontext_t *signal_context(uintptr_t pc, uintptr_t sp)
{
  const unsigned char *code = (const unsigned char *)pc;
  if (code_is(code, rt_sigreturn_code, sizeof rt_sigreturn_code))
    return &((const ucontext_t *)(uintptr_t) * (const uint32_t *)(sp + 2 * sizeof(uint32_t)))
                ->uc_mcontext;
  if (code_is(code, sigreturn_code, sizeof sigreturn_code))
    return (const mcontext_t *)(sp + sizeof(uint32_t));
  if (code_is(code, sigreturn_code + 1, sizeof sigreturn_code - 1))
    return (const mcontext_t *)sp;
  return NULL;
}

int frame_regs_from_signal_frame(struct frame_regs *r, uintptr_t lo, uintptr_t hi)
{
  /* The trampoline's code is mapped: the walker derived its recipe from
   * the unwind data that covers it. */
  if (r->sp < lo || r->sp > hi - 3 * sizeof(uint32_t))
    return 0;
  const mcontext_t *mc = signal_context(r->pc, r->sp);
  if (!mc)
    return 0;
  uintptr_t first = (uintptr_t)&mc->gregs[0];
  uintptr_t last = (uintptr_t)&mc->gregs[NGREG - 1];
  if (first < r->sp || first < lo || last > hi - sizeof(uintptr_t))
    return 0;
  r->pc = (uintptr_t)mc->gregs[REG_EIP];
  r->sp = (uintptr_t)mc->gregs[REG_ESP];
  r->fp = (uintptr_t)mc->gregs[REG_EBP];
  return 1;
}

int frame_unwinder_signal_step(void *unw_cursor, ucontext_t *uc, uintptr_t pc)
{
  unw_cursor_t *c = unw_cursor;
  unw_word_t sp;
  if (unw_get_reg(c, UNW_REG_SP, &sp) < 0 || !frame_memory_mapped(pc, FRAME_SIGRETURN_LEN) ||
      !frame_memory_mapped(sp, 3 * sizeof(uint32_t)))
    return 0;
  const mcontext_t *mc = signal_context(pc, sp);
  if (!mc || !frame_memory_mapped((uintptr_t)mc->gregs, sizeof mc->gregs))
    return 0;
  memset(uc, 0, sizeof *uc);
  memcpy(uc->uc_mcontext.gregs, mc->gregs, sizeof mc->gregs);
  return unw_init_local2(c, UNW_CONTEXT(uc), UNW_INIT_SIGNAL_FRAME) == 0;
}

void frame_regs_to_ucontext(ucontext_t *uc, const struct frame_regs *r)
{
  uc->uc_mcontext.gregs[REG_EIP] = (greg_t)r->pc;
  uc->uc_mcontext.gregs[REG_ESP] = (greg_t)r->sp;
  uc->uc_mcontext.gregs[REG_EBP] = (greg_t)r->fp;
}

int frame_regs_from_unwinder(struct frame_regs *r, void *unw_cursor)
{
  unw_cursor_t *c = unw_cursor;
  unw_word_t pc, sp, fp;
  if (unw_get_reg(c, UNW_REG_IP, &pc) < 0 || unw_get_reg(c, UNW_REG_SP, &sp) < 0 ||
      unw_get_reg(c, UNW_X86_EBP, &fp) < 0)
    return 0;
  r->pc = pc;
  r->sp = sp;
  r->fp = fp;
  return 1;
}

int frame_unwinder_pc_thunk_step(void *unw_cursor, ucontext_t *uc)
{
  static const struct {
    unsigned char unw, greg;
  } regs[] = {{UNW_X86_EAX, REG_EAX}, {UNW_X86_EBX, REG_EBX}, {UNW_X86_ECX, REG_ECX},
              {UNW_X86_EDX, REG_EDX}, {UNW_X86_ESI, REG_ESI}, {UNW_X86_EDI, REG_EDI},
              {UNW_X86_EBP, REG_EBP}, {UNW_X86_ESP, REG_ESP}};
  unw_cursor_t *c = unw_cursor;
  greg_t g[NGREG] = {0};
  for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
    unw_word_t v;
    if (unw_get_reg(c, regs[i].unw, &v) < 0)
      return 0;
    g[regs[i].greg] = (greg_t)v;
  }
  uintptr_t sp = (uintptr_t)g[REG_ESP];
  if (!frame_memory_mapped(sp, sizeof(uintptr_t)))
    return 0;
  g[REG_EIP] = (greg_t) * (const uintptr_t *)sp; /* the thunk's return address */
  g[REG_ESP] = (greg_t)(sp + sizeof(uintptr_t));
  memcpy(uc->uc_mcontext.gregs, g, sizeof g);
  return unw_init_local(c, UNW_CONTEXT(uc)) == 0;
}

int frame_code_is_sigreturn(uintptr_t pc)
{
  const unsigned char *code = (const unsigned char *)pc;
  return code_is(code, sigreturn_code, sizeof sigreturn_code) ||
         code_is(code, rt_sigreturn_code, sizeof rt_sigreturn_code);
}

int frame_is_sigreturn(uintptr_t pc)
{
  return frame_memory_mapped(pc, FRAME_SIGRETURN_LEN) && frame_code_is_sigreturn(pc);
}
