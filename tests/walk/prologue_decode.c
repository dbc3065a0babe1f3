/* ARM32 prologue reading (src/arch/arm_prologue.c) on hand-assembled
 * Thumb-2 and A32 code: the frame's shape at a PC for each construct the
 * reader follows, and its refusals. Runs on every architecture (the reader
 * is plain C reading the code it is given). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "arm_prologue.h"

static int failures;

/* Read `code` (halfwords for Thumb, words for A32) up to byte offset `end`
 * and compare with the expected result and shape (cfa, ra_at, r7_at,
 * r11_at; leaf_cfa where `leaf` is set). */
static void check_patched(const char *name, const void *code, uintptr_t end, int thumb,
                          const struct arm_code_patch *patch, size_t npatch, enum arm_prologue_result res,
                          int32_t cfa, int32_t ra_at, int32_t r7_at, int32_t r11_at)
{
  struct arm_prologue pr;
  uintptr_t lo = (uintptr_t)code;
  enum arm_prologue_result got = arm_prologue_read(lo, lo + end, thumb, patch, npatch, &pr);
  if (got != res || (res == ARM_PROLOGUE_OK && (pr.cfa != cfa || pr.ra_at != ra_at || pr.r7_at != r7_at ||
                                                 pr.r11_at != r11_at))) {
    printf("FAIL %s: result %d cfa %d ra_at %d r7_at %d r11_at %d; expected %d, %d, %d, %d, %d\n", name, got,
           pr.cfa, pr.ra_at, pr.r7_at, pr.r11_at, res, cfa, ra_at, r7_at, r11_at);
    failures++;
  } else {
    printf("ok %s\n", name);
  }
}

static void check(const char *name, const void *code, uintptr_t end, int thumb, enum arm_prologue_result res,
                  int32_t cfa, int32_t ra_at, int32_t r7_at, int32_t r11_at)
{
  check_patched(name, code, end, thumb, NULL, 0, res, cfa, ra_at, r7_at, r11_at);
}

static void check_leaf(const char *name, const void *code, uintptr_t end, int thumb, int crossed, int32_t leaf_cfa)
{
  struct arm_prologue pr;
  uintptr_t lo = (uintptr_t)code;
  (void)arm_prologue_read(lo, lo + end, thumb, NULL, 0, &pr);
  if (!pr.leaf_ok || pr.leaf_cfa != leaf_cfa || pr.crossed_return != crossed) {
    printf("FAIL %s: leaf_ok %d leaf_cfa %d crossed_return %d; expected 1, %d, %d\n", name, pr.leaf_ok,
           pr.leaf_cfa, pr.crossed_return, leaf_cfa, crossed);
    failures++;
  } else {
    printf("ok %s\n", name);
  }
}

int main(void)
{
  const int32_t none = 0;
  /* Thumb: push {r4, lr}; sub sp, #8 */
  static const uint16_t t1[] = {0xb510, 0xb082, 0x2001};
  check("thumb push + sub sp", t1, 4, 1, ARM_PROLOGUE_OK, 16, -4, none, none);
  check("thumb at the sub", t1, 2, 1, ARM_PROLOGUE_OK, 8, -4, none, none);
  /* varargs: push {r0-r3}; push {r4, lr}; sub sp, #8 */
  static const uint16_t t2[] = {0xb40f, 0xb510, 0xb082, 0x2001};
  check("thumb varargs spill", t2, 6, 1, ARM_PROLOGUE_OK, 32, -20, none, none);
  /* push.w {r4-r11, lr}; vpush {d8-d9}; sub.w sp, sp, #5984 */
  static const uint16_t t3[] = {0xe92d, 0x4ff0, 0xed2d, 0x8b04, 0xf5ad, 0x5dbb, 0x2001};
  check("thumb push.w + vpush + sub.w", t3, 12, 1, ARM_PROLOGUE_OK, 36 + 16 + 5984, -4, -24, -8);
  /* push {r4, lr}; sub sp, #8; cbz r0, .+6; add sp, #8; pop {r4, pc}; movs r0, #1 */
  static const uint16_t t4[] = {0xb510, 0xb082, 0xb118, 0xb002, 0xbd10, 0x2001, 0x2001};
  check("thumb after an epilogue: the body's frame", t4, 12, 1, ARM_PROLOGUE_OK, 16, -4, none, none);
  check("thumb inside the epilogue", t4, 8, 1, ARM_PROLOGUE_OK, 8, -4, none, none);
  /* a tail call through a register: push {r4, lr}; sub sp, #8; cbz r0, .+8;
   * add sp, #8; pop.w {r4, lr}; bx r3; movs r0, #1 */
  static const uint16_t t4b[] = {0xb510, 0xb082, 0xb120, 0xb002, 0xe8bd, 0x4010, 0x4718, 0x2001, 0x2001};
  check("thumb after a tail call through a register", t4b, 16, 1, ARM_PROLOGUE_OK, 16, -4, none, none);
  /* push {r4, lr}; cmp r0, #0; it eq; popeq {r4, pc}; movs r0, #1 */
  static const uint16_t t5[] = {0xb510, 0x2800, 0xbf08, 0xbd10, 0x2001};
  check("thumb conditional return", t5, 8, 1, ARM_PROLOGUE_OK, 8, -4, none, none);
  /* it eq; subeq sp, #8 */
  static const uint16_t t6[] = {0xb510, 0x2800, 0xbf08, 0xb082, 0x2001};
  check("thumb conditional sub sp refused", t6, 8, 1, ARM_PROLOGUE_REFUSED, 0, 0, 0, 0);
  /* mov sp, r3 */
  static const uint16_t t7[] = {0xb510, 0x469d, 0x2001};
  check("thumb sp from a register refused", t7, 4, 1, ARM_PROLOGUE_REFUSED, 0, 0, 0, 0);
  /* a leaf: no push */
  static const uint16_t t8[] = {0x2001, 0x3001, 0x2001};
  check("thumb leaf", t8, 4, 1, ARM_PROLOGUE_LEAF, 0, 0, 0, 0);
  check_leaf("thumb leaf's frame", t8, 4, 1, 0, 0);
  /* an earlier function (push {r4, lr}; pop {r4, pc}), then a leaf that
   * pushes r7 (-O0): push {r7}; sub sp, #12; add r7, sp, #0 */
  static const uint16_t t9[] = {0xb510, 0xbd10, 0xb480, 0xb083, 0xaf00, 0x2001};
  /* read from the earlier push, the leaf's pushes follow that function's
   * body (the walker takes the leaf's reading where lr's call fits) */
  check("thumb leaf after a function: that function's push", t9, 10, 1, ARM_PROLOGUE_OK, 24, -4, -12, none);
  check_leaf("thumb leaf after a function: its own frame", t9, 10, 1, 1, 16);
  /* a literal pool: push {r4, lr}; ldr r3, [pc, #4]; b.n .+8; nop; .word
   * 0xb082b082 (sub sp twice, if decoded); movs r0, #1 */
  static const uint16_t t10[] __attribute__((aligned(4))) = {0xb510, 0x4b01, 0xe002, 0xbf00, 0xb082, 0xb082, 0x2001, 0x2001};
  check("thumb literal pool skipped", t10, 14, 1, ARM_PROLOGUE_OK, 8, -4, none, none);
  /* tbb [pc, r0] with the table {2, 3, 0x82, 0xb0} (0xb082: sub sp) */
  static const uint16_t t11[] = {0xb510, 0xe8df, 0xf000, 0x0302, 0xb082, 0x2001, 0x2001};
  check("thumb tbb table skipped", t11, 12, 1, ARM_PROLOGUE_OK, 8, -4, none, none);
  /* r7 frame pointer: push {r7, lr}; sub sp, #16; add r7, sp, #0; adds r7,
   * #16; mov sp, r7 */
  static const uint16_t t12[] = {0xb580, 0xb084, 0xaf00, 0x3710, 0x46bd, 0xbd80};
  check("thumb mov sp, r7", t12, 10, 1, ARM_PROLOGUE_OK, 8, -4, -8, none);
  check("thumb r7 frame body", t12, 6, 1, ARM_PROLOGUE_OK, 24, -4, -8, none);

  /* A32: push {r4, r11, lr}; add r11, sp, #8; sub sp, sp, #20 */
  static const uint32_t a1[] = {0xe92d4810, 0xe28db008, 0xe24dd014, 0xe3a00001};
  check("a32 push + fp + sub", a1, 12, 0, ARM_PROLOGUE_OK, 32, -4, none, -8);
  /* push {r4, lr}; cmp r0, #0; popeq {r4, pc}; sub sp, sp, #8 */
  static const uint32_t a2[] = {0xe92d4010, 0xe3500000, 0x08bd8010, 0xe24dd008, 0xe3a00001};
  check("a32 conditional return", a2, 16, 0, ARM_PROLOGUE_OK, 16, -4, none, none);
  /* sub sp, fp, #8 (an epilogue from the frame pointer), then pop {r4, fp, pc} */
  static const uint32_t a3[] = {0xe92d4810, 0xe28db008, 0xe24dd014, 0xe24bd008, 0xe8bd8810, 0xe3a00001};
  check("a32 sp from fp refused", a3, 16, 0, ARM_PROLOGUE_REFUSED, 0, 0, 0, 0);
  check("a32 after the return: the body's frame", a3, 20, 0, ARM_PROLOGUE_OK, 32, -4, none, -8);
  /* push {r4, lr}; sub sp, sp, #8; add sp, sp, #8; pop {r4, lr}; bx r3; mov r0, #1 */
  static const uint32_t a3b[] = {0xe92d4010, 0xe24dd008, 0xe28dd008, 0xe8bd4010, 0xe12fff13, 0xe3a00001, 0xe3a00001};
  check("a32 after a tail call through a register", a3b, 24, 0, ARM_PROLOGUE_OK, 16, -4, none, none);
  /* push {r4, lr}; ldr r3, [pc, #0]; b .+8; .word 0xe24dd008 (sub sp); mov r0, #1 */
  static const uint32_t a4[] = {0xe92d4010, 0xe59f3000, 0xea000000, 0xe24dd008, 0xe3a00001, 0xe3a00001};
  check("a32 literal skipped", a4, 20, 0, ARM_PROLOGUE_OK, 8, -4, none, none);
  /* str lr, [sp, #-4]!; vpush {d8}; sub sp, sp, #0x400 */
  static const uint32_t a5[] = {0xe52de004, 0xed2d8b02, 0xe24ddb01, 0xe3a00001};
  check("a32 str lr + vpush + rotated sub", a5, 12, 0, ARM_PROLOGUE_OK, 4 + 8 + 1024, -4, none, none);

  /* A hook's jump over the push (-mp patches malloc's first instructions):
   * read as the bytes the hook engine kept say. Thumb: push {r3-r7, lr};
   * sub sp, #8; movs..., patched with ldr.w pc, [pc, #0] and its literal. */
  static const uint16_t p1_orig[] = {0xb5f8, 0xb082, 0x2001, 0x2001};
  static const uint16_t p1[] __attribute__((aligned(4))) = {0xf8df, 0xf000, 0x1235, 0x0040, 0x2001, 0x2001};
  struct arm_code_patch pw = {(uintptr_t)p1, sizeof p1_orig, (const uint8_t *)p1_orig};
  check_patched("thumb push under a hook's jump", p1, 10, 1, &pw, 1, ARM_PROLOGUE_OK, 32, -4, -8, none);
  check("thumb push under a hook's jump, unread", p1, 10, 1, ARM_PROLOGUE_LEAF, 0, 0, 0, 0);
  /* a patch elsewhere changes nothing */
  struct arm_code_patch far = {(uintptr_t)t1, sizeof p1_orig, (const uint8_t *)p1_orig};
  check_patched("thumb patch elsewhere", p1, 10, 1, &far, 1, ARM_PROLOGUE_LEAF, 0, 0, 0, 0);
  /* A32: push {r3-r7, lr}; sub sp, sp, #8; mov..., patched with
   * ldr pc, [pc, #-4] and its literal */
  static const uint32_t p2_orig[] = {0xe92d40f8, 0xe24dd008};
  static const uint32_t p2[] = {0xe51ff004, 0x00401234, 0xe3a00001, 0xe3a00001};
  struct arm_code_patch pw2 = {(uintptr_t)p2, sizeof p2_orig, (const uint8_t *)p2_orig};
  check_patched("a32 push under a hook's jump", p2, 12, 0, &pw2, 1, ARM_PROLOGUE_OK, 32, -4, -8, none);
  check("a32 push under a hook's jump, unread", p2, 12, 0, ARM_PROLOGUE_LEAF, 0, 0, 0, 0);

  /* A function's first instruction as the code shows it (an EHABI entry
   * merged over two functions describes the second's first as a body). */
  static const uint16_t e1[] = {0xbd10, 0xb510, 0xb082};               /* pop {r4, pc}; push {r4, lr} */
  static const uint16_t e2[] = {0x4770, 0xbf00, 0xb580, 0xaf00};       /* bx lr; nop; push {r7, lr} */
  static const uint16_t e3[] = {0xe8bd, 0x8010, 0xe92d, 0x4ff0, 0};    /* pop.w {r4, pc}; push.w {r4-r11, lr} */
  static const uint16_t e4[] = {0xf7ff, 0xbffe, 0xb510, 0};            /* b.w; push {r4, lr} */
  static const uint16_t e5[] = {0x2001, 0xb510, 0};                    /* movs; push {r4, lr}: not after an end */
  static const uint16_t e6[] = {0xbd10, 0xb082, 0};                    /* pop {r4, pc}; sub sp: lr not saved */
  static const uint32_t e7[] = {0xe12fff1e, 0xe92d4010, 0};            /* bx lr; push {r4, lr} */
  static const uint32_t e8[] = {0xe8bd8010, 0xe320f000, 0xe52de004, 0}; /* pop {r4, pc}; nop; str lr, [sp, #-4]! */
  static const uint32_t e9[] = {0xe3a00001, 0xe92d4010, 0};            /* mov; push {r4, lr} */
#define ENTRY(code, at) arm_function_entry((uintptr_t)(code), (uintptr_t)(code) + (at))
  int entries = ENTRY(e1, 2) && !ENTRY(e1, 4) && ENTRY(e2, 4) && ENTRY(e3, 4) && ENTRY(e4, 4) && !ENTRY(e5, 2) &&
                !ENTRY(e6, 2) && ENTRY(e7, 4) && ENTRY(e8, 8) && !ENTRY(e9, 4) && !ENTRY(e1 + 1, 0);
#undef ENTRY
  printf("%s function entries: after pop/bx lr/pop.w/b.w (nop padding), not after other code or without lr saved\n",
         entries ? "ok" : "FAIL");
  failures += !entries;

  /* The registers a push at a PC saves (a leaf's first instruction inside a
   * merged entry is known by a push of exactly the registers the entry pops). */
  static const uint16_t q1[] = {0xb480, 0};         /* push {r7} */
  static const uint16_t q2[] = {0xb5f0, 0};         /* push {r4-r7, lr} */
  static const uint16_t q3[] = {0xe92d, 0x4ff0};    /* push.w {r4-r11, lr} */
  static const uint16_t q4[] = {0xf84d, 0x7d04};    /* str.w r7, [sp, #-4]! */
  static const uint16_t q5[] = {0xaf00, 0};         /* add r7, sp, #0: no push */
  static const uint16_t q6[] = {0xe92d, 0x8010};    /* stmdb sp!, {r4, pc}: not a prologue's */
  static const uint32_t q7[] = {0xe92d4830};        /* A32 push {r4, r5, r11, lr} */
  static const uint32_t q8[] = {0xe52db004};        /* A32 str r11, [sp, #-4]! */
  static const uint32_t q9[] = {0xe1a0b00d};        /* A32 mov r11, sp: no push */
#define PUSH(code) arm_push_at((uintptr_t)(code))
  int pushes = PUSH(q1) == 0x80 && PUSH(q2) == 0x40f0 && PUSH(q3) == 0x4ff0 && PUSH(q4) == 0x80 && PUSH(q5) == 0 &&
               PUSH(q6) == 0 && PUSH(q7) == 0x4830 && PUSH(q8) == 0x800 && PUSH(q9) == 0;
#undef PUSH
  printf("%s pushes: Thumb push, push.w, str.w rt, [sp, #-4]!; A32 push, str; none elsewhere\n", pushes ? "ok" : "FAIL");
  failures += !pushes;

  /* Calls before a return address. */
  static const uint16_t c1[] = {0xf000, 0xf802, 0x2001, 0x4798, 0x2001};
  uintptr_t base = (uintptr_t)c1, target = 0;
  int ok = arm_follows_call((base + 4) | 1) && arm_call_target((base + 4) | 1, &target) &&
           target == ((base + 8) | 1) && !arm_follows_call((base + 6) | 1) && arm_follows_call((base + 8) | 1) &&
           !arm_call_target((base + 8) | 1, &target);
  static const uint32_t c2[] = {0xeb000001, 0xe3a00001, 0xe12fff33, 0xe3a00001};
  base = (uintptr_t)c2;
  ok &= arm_follows_call(base + 4) && arm_call_target(base + 4, &target) && target == base + 12 &&
        !arm_follows_call(base + 8) && arm_follows_call(base + 12) && !arm_call_target(base + 12, &target);
  printf("%s calls: Thumb bl, blx rN; A32 bl, blx rN\n", ok ? "ok" : "FAIL");
  failures += !ok;
  return failures != 0;
}
