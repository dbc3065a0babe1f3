/* i386 register contexts (context.h). */
#define _GNU_SOURCE
#include "context.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

uintptr_t context_pc(const ucontext_t *uc) { return (uintptr_t)uc->uc_mcontext.gregs[REG_EIP]; }

/* glibc enters the kernel through the vDSO's __kernel_vsyscall (sysenter,
 * with int $0x80 after it as the return and restart point) or with int $0x80
 * itself; a thread stopped in a system call is at, or just after, one. */
static int is_syscall_insn(const unsigned char *p)
{
  return (p[0] == 0xcd && p[1] == 0x80) || (p[0] == 0x0f && p[1] == 0x34);
}

int context_at_syscall(const ucontext_t *uc)
{
  const unsigned char *pc = (const unsigned char *)context_pc(uc);
  if (((uintptr_t)pc & 4095) <= 4094 && is_syscall_insn(pc)) /* to be restarted */
    return 1;
  if (((uintptr_t)pc & 4095) < 2) /* never read across a page start */
    return 0;
  return is_syscall_insn(pc - 2); /* just returned */
}

/* unw_getcontext records its caller's registers: a bare jump, no frame. */
#define NAME_OF(sym) NAME_OF_(sym)
#define NAME_OF_(sym) #sym
__asm__(".text\n"
        ".globl " NAME_OF(unw_tdep_getcontext) "\n"
        ".hidden " NAME_OF(unw_tdep_getcontext) "\n"
        ".type " NAME_OF(unw_tdep_getcontext) ", @function\n"
        NAME_OF(unw_tdep_getcontext) ":\n"
        "  call 1f\n"
        "1:\n"
        "  popl %eax\n"
        "  addl $_GLOBAL_OFFSET_TABLE_+(.-1b), %eax\n"
        "  jmp *igprof_unwind_real_getcontext@GOTOFF(%eax)\n"
        ".size " NAME_OF(unw_tdep_getcontext) ", .-" NAME_OF(unw_tdep_getcontext) "\n");
