/* AArch64 view of an interrupted context (context.h). Not built yet: the
 * runtime is not ported to AArch64 (docs/porting.md). */
#define _GNU_SOURCE
#include "context.h"

uintptr_t context_pc(const ucontext_t *uc) { return (uintptr_t)uc->uc_mcontext.pc; }

int context_at_syscall(const ucontext_t *uc)
{
  const uint32_t *pc = (const uint32_t *)context_pc(uc);
  if (pc[0] == 0xd4000001u) /* svc #0, to be restarted */
    return 1;
  if (((uintptr_t)pc & 4095) < 4) /* never read across a page start */
    return 0;
  return pc[-1] == 0xd4000001u; /* just returned from svc #0 */
}

/* The private libunwind's getcontext forwarder (context.h) is not written
 * for AArch64 yet: a bare `br` through igprof_unwind_real_getcontext. */
