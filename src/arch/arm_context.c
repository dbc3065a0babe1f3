/* ARM32 view of an interrupted context (context.h). */
#define _GNU_SOURCE
#include "context.h"

/* The interrupted instruction's address (even: the instruction set is the
 * T bit of cpsr, not a bit of the address). */
uintptr_t context_pc(const ucontext_t *uc) { return (uintptr_t)uc->uc_mcontext.arm_pc; }

#define CPSR_THUMB 0x20u
#define A32_SVC0 0xef000000u /* svc #0, always */
#define T16_SVC0 0xdf00u     /* svc #0 */

int context_at_syscall(const ucontext_t *uc)
{
  uintptr_t pc = context_pc(uc);
  if (uc->uc_mcontext.arm_cpsr & CPSR_THUMB) {
    const uint16_t *p = (const uint16_t *)(pc & ~(uintptr_t)1);
    if (p[0] == T16_SVC0) /* to be restarted */
      return 1;
    if (((uintptr_t)p & 4095) < 2) /* never read across a page start */
      return 0;
    return p[-1] == T16_SVC0; /* just returned */
  }
  const uint32_t *p = (const uint32_t *)(pc & ~(uintptr_t)3);
  if (p[0] == A32_SVC0)
    return 1;
  if (((uintptr_t)p & 4095) < 4)
    return 0;
  return p[-1] == A32_SVC0;
}

/* libunwind's ARM getcontext is inline code in its header (a store of
 * r0-r15): the private libunwind has no getcontext call to forward. */
