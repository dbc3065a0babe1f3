/* x86_64 view of an interrupted context (context.h). */
#define _GNU_SOURCE
#include "context.h"

uintptr_t context_pc(const ucontext_t *uc) { return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]; }

int context_at_syscall(const ucontext_t *uc) {
  const unsigned char *pc = (const unsigned char *)context_pc(uc);
  if (pc[0] == 0x0f && pc[1] == 0x05) /* syscall, to be restarted */
    return 1;
  if (((uintptr_t)pc & 4095) < 2) /* never read across a page start */
    return 0;
  return pc[-2] == 0x0f && pc[-1] == 0x05; /* just returned from syscall */
}
