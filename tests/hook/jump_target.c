/* hook_jump_target: a function that is one unconditional PC-relative jump
 * (a tail call, e.g. a C++ operator new[] written as a jump to operator
 * new) is told from every other first instruction, with the jump's exact
 * target. The code is decoded, never run. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "hook.h"

static unsigned char code[64] __attribute__((aligned(16)));

static uintptr_t target_of(const void *bytes, size_t n, size_t size, uintptr_t bit)
{
  memset(code, 0, sizeof code);
  memcpy(code, bytes, n);
  return (uintptr_t)hook_jump_target((void *)((uintptr_t)code | bit), size);
}

int main(void)
{
  uintptr_t base = (uintptr_t)code;
#if defined(__x86_64__) || defined(__i386__)
  static const unsigned char jmp32[] = {0xe9, 0x10, 0x00, 0x00, 0x00}; /* jmp +0x10 */
  static const unsigned char jmp8[] = {0xeb, 0x07};                    /* jmp +7 */
  static const unsigned char call[] = {0xe8, 0x10, 0x00, 0x00, 0x00};  /* call +0x10 */
  static const unsigned char jne[] = {0x75, 0x07};                     /* jne +7 */
  static const unsigned char ret[] = {0xc3};
  static const unsigned char push[] = {0x55};                          /* push %rbp */
  CHECK_EQ_LONG(target_of(jmp32, sizeof jmp32, 5, 0), base + 5 + 0x10);
  CHECK_EQ_LONG(target_of(jmp32, sizeof jmp32, 0, 0), base + 5 + 0x10); /* size unknown */
  CHECK_EQ_LONG(target_of(jmp32, sizeof jmp32, 4, 0), 0); /* cut by the size */
  CHECK_EQ_LONG(target_of(jmp32, sizeof jmp32, 16, 0), base + 5 + 0x10);
  CHECK_EQ_LONG(target_of(jmp8, sizeof jmp8, 2, 0), base + 2 + 7);
  CHECK_EQ_LONG(target_of(call, sizeof call, 5, 0), 0);
  CHECK_EQ_LONG(target_of(jne, sizeof jne, 2, 0), 0);
  CHECK_EQ_LONG(target_of(ret, sizeof ret, 1, 0), 0);
  CHECK_EQ_LONG(target_of(push, sizeof push, 1, 0), 0);
#elif defined(__aarch64__)
  static const uint32_t b[] = {0x14000010};   /* b +0x40 */
  static const uint32_t bback[] = {0x17fffffc}; /* b -0x10 */
  static const uint32_t bl[] = {0x94000010};  /* bl +0x40 */
  static const uint32_t bcond[] = {0x54000080}; /* b.eq +0x10 */
  static const uint32_t ret[] = {0xd65f03c0};
  static const uint32_t paciasp[] = {0xd503233f};
  CHECK_EQ_LONG(target_of(b, sizeof b, 4, 0), base + 0x40);
  CHECK_EQ_LONG(target_of(bback, sizeof bback, 4, 0), base - 0x10);
  CHECK_EQ_LONG(target_of(b, sizeof b, 0, 0), base + 0x40);
  CHECK_EQ_LONG(target_of(bl, sizeof bl, 4, 0), 0);
  CHECK_EQ_LONG(target_of(bcond, sizeof bcond, 4, 0), 0);
  CHECK_EQ_LONG(target_of(ret, sizeof ret, 4, 0), 0);
  CHECK_EQ_LONG(target_of(paciasp, sizeof paciasp, 4, 0), 0);
#elif defined(__arm__)
  /* Thumb: b.n +8 (0xe004: pc + 4 + 2 * 4), b.w, and A32 b +8. */
  static const uint16_t bn[] = {0xe004};
  static const uint16_t bw[] = {0xf000, 0xb808}; /* b.w +0x10 */
  static const uint16_t bln[] = {0xf000, 0xf808}; /* bl +0x10 */
  static const uint16_t movs[] = {0x2300};        /* movs r3, #0 */
  static const uint32_t a32b[] = {0xea000002};    /* b: pc + 8 + 8 */
  static const uint32_t a32bl[] = {0xeb000002};
  static const uint32_t a32beq[] = {0x0a000002};
  CHECK_EQ_LONG(target_of(bn, sizeof bn, 2, 1) | 1, (base + 4 + 8) | 1);
  CHECK_EQ_LONG(target_of(bw, sizeof bw, 4, 1) | 1, (base + 4 + 0x10) | 1);
  CHECK_EQ_LONG(target_of(bln, sizeof bln, 4, 1), 0);
  CHECK_EQ_LONG(target_of(movs, sizeof movs, 2, 1), 0);
  CHECK_EQ_LONG(target_of(a32b, sizeof a32b, 4, 0), base + 8 + 8);
  CHECK_EQ_LONG(target_of(a32bl, sizeof a32bl, 4, 0), 0);
  CHECK_EQ_LONG(target_of(a32beq, sizeof a32beq, 4, 0), 0);
#endif
  CHECK(hook_jump_target(NULL, 4) == NULL);
  if (check_failures)
    return 1;
  printf("hook_jump_target: ok\n");
  return 0;
}
