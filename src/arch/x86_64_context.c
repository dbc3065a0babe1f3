/* x86_64 register contexts (context.h). */
#define _GNU_SOURCE
#include "context.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

uintptr_t context_pc(const ucontext_t *uc) { return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]; }

int context_at_syscall(const ucontext_t *uc)
{
  const unsigned char *pc = (const unsigned char *)context_pc(uc);
  if (pc[0] == 0x0f && pc[1] == 0x05) /* syscall, to be restarted */
    return 1;
  if (((uintptr_t)pc & 4095) < 2) /* never read across a page start */
    return 0;
  return pc[-2] == 0x0f && pc[-1] == 0x05; /* just returned from syscall */
}

#define NAME_OF(sym) NAME_OF_(sym)
#define NAME_OF_(sym) #sym
__asm__(".text\n"
        ".globl " NAME_OF(unw_tdep_getcontext) "\n"
        ".hidden " NAME_OF(unw_tdep_getcontext) "\n"
        ".type " NAME_OF(unw_tdep_getcontext) ", @function\n"
        NAME_OF(unw_tdep_getcontext) ":\n"
        "  jmp *igprof_unwind_real_getcontext(%rip)\n"
        ".size " NAME_OF(unw_tdep_getcontext) ", .-" NAME_OF(unw_tdep_getcontext) "\n");
