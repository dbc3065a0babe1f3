/* src/arch/arm_ehabi.c on hand-made tables (every target, the host too):
 * each instruction class applied to a made-up stack with exact resulting
 * registers, the three entry forms, the refusals, reads outside the stack's
 * bounds and entries pointing outside the table. On ARM32 also the test's
 * own .ARM.exidx: three frames stepped from registers read inside the
 * innermost, each return address equal to __builtin_return_address's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "arm_ehabi.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

/* A prel31 word at `at` for `target`. */
static uint32_t prel31(const void *at, const void *target)
{
  return (uint32_t)((uintptr_t)target - (uintptr_t)at) & 0x7fffffffu;
}

static uint32_t stack[64];
static uint32_t extab[16];
static uint32_t index_table[8];
static struct ehabi_table table;

static void set_table(void)
{
  table.exidx = index_table;
  table.count = 1;
  table.extab_lo = (uintptr_t)extab;
  table.extab_hi = (uintptr_t)(extab + 16);
  index_table[0] = prel31(&index_table[0], (const void *)((uintptr_t)extab - 64)); /* any function start */
}

/* Step with inline instructions `word` (0x80 << 24 | three bytes) from sp = &stack[8]. */
static enum ehabi_result step_inline(uint32_t word, struct ehabi_regs *r)
{
  set_table();
  index_table[1] = word;
  memset(r, 0, sizeof *r);
  r->r[13] = (uintptr_t)&stack[8];
  r->r[14] = 0x1001;
  r->r[15] = 0x2000;
  return ehabi_step(&table, index_table, r, (uintptr_t)stack, (uintptr_t)(stack + 64));
}

static void test_inline(void)
{
  struct ehabi_regs r;
  for (int i = 0; i < 64; i++) stack[i] = 0x100 + i;
  /* finish alone: a leaf, the return address in lr */
  CHECK(step_inline(0x80b0b0b0u, &r) == EHABI_OK && r.r[15] == 0x1001 && r.r[13] == (uintptr_t)&stack[8],
        "finish: pc %#lx", (unsigned long)r.r[15]);
  /* vsp += 8, pop {r4, r14}: 10101000 pops r4 and r14 */
  CHECK(step_inline(0x8001a8b0u, &r) == EHABI_OK && r.r[4] == 0x10a && r.r[14] == 0x10b && r.r[15] == 0x10b &&
            r.r[13] == (uintptr_t)&stack[12],
        "vsp+8, pop r4 r14: r4 %#lx lr %#lx sp off %ld", (unsigned long)r.r[4], (unsigned long)r.r[14],
        (long)((uint32_t *)r.r[13] - stack));
  /* pop {r4-r7, r14} by mask: 0x84 0x0f */
  CHECK(step_inline(0x80840fb0u, &r) == EHABI_OK && r.r[4] == 0x108 && r.r[7] == 0x10b && r.r[15] == 0x10c &&
            r.r[13] == (uintptr_t)&stack[13],
        "pop mask: r7 %#lx pc %#lx", (unsigned long)r.r[7], (unsigned long)r.r[15]);
  /* pop {r4, pc} by mask 0x88 0x01: the return address popped, lr unchanged */
  CHECK(step_inline(0x808801b0u, &r) == EHABI_OK && r.r[4] == 0x108 && r.r[15] == 0x109 && r.r[14] == 0x1001 &&
            r.r[13] == (uintptr_t)&stack[10],
        "pop r4 pc: pc %#lx lr %#lx", (unsigned long)r.r[15], (unsigned long)r.r[14]);
  /* vsp = r7 (r7 at stack[20]), pop {r4-r7, lr} short form 10101011 */
  set_table();
  index_table[1] = 0x8097abb0u;
  memset(&r, 0, sizeof r);
  r.r[13] = (uintptr_t)&stack[2];
  r.r[7] = (uintptr_t)&stack[20];
  r.r[15] = 0x2000;
  CHECK(ehabi_step(&table, index_table, &r, (uintptr_t)stack, (uintptr_t)(stack + 64)) == EHABI_OK &&
            r.r[4] == 0x114 && r.r[7] == 0x117 && r.r[15] == 0x118 && r.r[13] == (uintptr_t)&stack[25],
        "vsp=r7, pop r4-r7 lr: pc %#lx sp off %ld", (unsigned long)r.r[15], (long)((uint32_t *)r.r[13] - stack));
  /* VFP: d8-d9 by VPUSH (0xd1: 16 bytes), then pop {lr} (mask r14: 0x84 0x00... uses 8400) */
  CHECK(step_inline(0x80d1a8b0u, &r) == EHABI_OK && r.r[13] == (uintptr_t)&stack[14] && r.r[15] == 0x10d,
        "vpush d8-d9: sp off %ld pc %#lx", (long)((uint32_t *)r.r[13] - stack), (unsigned long)r.r[15]);
  /* VFP by FSTMFDX d8 (0xb8: 8 + 4 bytes) */
  CHECK(step_inline(0x80b8b0b0u, &r) == EHABI_OK && r.r[13] == (uintptr_t)&stack[11], "fstmfdx d8: sp off %ld",
        (long)((uint32_t *)r.r[13] - stack));
  /* refuse to unwind: 0x80 0x00 */
  CHECK(step_inline(0x808000b0u, &r) == EHABI_END, "refuse to unwind");
  /* spare code 0xc7 */
  CHECK(step_inline(0x80c7b0b0u, &r) == EHABI_UNSUPPORTED, "spare code");
  /* a pop beyond the stack's top: vsp += 256 twice, then pop r4 */
  CHECK(step_inline(0x803f3fa0u, &r) == EHABI_BAD_STACK, "pop outside the stack");
  /* a frame that does not move: vsp -= 4 */
  CHECK(step_inline(0x8040b0b0u, &r) == EHABI_BAD_STACK, "stack pointer going down");
}

static void test_extab(void)
{
  struct ehabi_regs r;
  for (int i = 0; i < 64; i++) stack[i] = 0x200 + i;
  set_table();
  /* EXIDX_CANTUNWIND */
  index_table[1] = 1;
  memset(&r, 0, sizeof r);
  r.r[13] = (uintptr_t)&stack[8];
  CHECK(ehabi_step(&table, index_table, &r, (uintptr_t)stack, (uintptr_t)(stack + 64)) == EHABI_END,
        "cantunwind");
  /* compact personality 1: one more word; bytes: [b1 08] in word 0, then
   * vsp += 16 (0x03), pop {r4-r6, lr} (0xaa), finish: pop r3 by 0xb1 0x08 */
  extab[0] = 0x81010000u | 0x03aa; /* personality 1, 1 more word, bytes 03 aa */
  extab[1] = 0xb0b0b0b0u;
  index_table[1] = prel31(&index_table[1], &extab[0]);
  memset(&r, 0, sizeof r);
  r.r[13] = (uintptr_t)&stack[8];
  CHECK(ehabi_step(&table, index_table, &r, (uintptr_t)stack, (uintptr_t)(stack + 64)) == EHABI_OK &&
            r.r[4] == 0x20c && r.r[6] == 0x20e && r.r[15] == 0x20f && r.r[13] == (uintptr_t)&stack[16],
        "compact 1: pc %#lx sp off %ld", (unsigned long)r.r[15], (long)((uint32_t *)r.r[13] - stack));
  /* a personality routine of its own, then GCC's layout: 1 more word,
   * bytes 0xb1 0x01 (pop r0), 0x84 0x00 (pop r14: mask bit 10 -> r14) */
  extab[2] = prel31(&extab[2], extab); /* the routine's address: not called */
  extab[3] = 0x01b10184u;
  extab[4] = 0x00b0b0b0u;
  index_table[1] = prel31(&index_table[1], &extab[2]);
  memset(&r, 0, sizeof r);
  r.r[13] = (uintptr_t)&stack[8];
  CHECK(ehabi_step(&table, index_table, &r, (uintptr_t)stack, (uintptr_t)(stack + 64)) == EHABI_OK &&
            r.r[0] == 0x208 && r.r[14] == 0x209 && r.r[15] == 0x209 && r.r[13] == (uintptr_t)&stack[10],
        "generic: r0 %#lx pc %#lx", (unsigned long)r.r[0], (unsigned long)r.r[15]);
  /* a count of further words that runs past the table */
  extab[15] = 0x81ff0000u;
  index_table[1] = prel31(&index_table[1], &extab[15]);
  CHECK(ehabi_step(&table, index_table, &r, (uintptr_t)stack, (uintptr_t)(stack + 64)) == EHABI_BAD_TABLE,
        "words past the table");
  /* an entry pointing outside the table */
  index_table[1] = prel31(&index_table[1], stack);
  CHECK(ehabi_step(&table, index_table, &r, (uintptr_t)stack, (uintptr_t)(stack + 64)) == EHABI_BAD_TABLE,
        "entry outside the table");
}

static void test_find(void)
{
  static uint32_t idx[6];
  static char code[300];
  struct ehabi_table t = {idx, 3, 0, 0};
  for (int i = 0; i < 3; i++) {
    idx[2 * i] = prel31(&idx[2 * i], code + 100 * i);
    idx[2 * i + 1] = 1;
  }
  CHECK(ehabi_find(&t, (uintptr_t)code - 1) == NULL, "below the first");
  CHECK(ehabi_find(&t, (uintptr_t)code) == &idx[0], "first");
  CHECK(ehabi_find(&t, (uintptr_t)code + 150) == &idx[2], "second");
  CHECK(ehabi_find(&t, (uintptr_t)code + 299) == &idx[4], "last");
}

#if defined(__arm__)
#include <link.h>

#ifndef PT_ARM_EXIDX
#define PT_ARM_EXIDX 0x70000001
#endif

static int own_table(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct ehabi_table *t = arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0, me = (uintptr_t)&own_table;
  const uint32_t *exidx = NULL;
  size_t count = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      if (a < lo) lo = a;
      if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    } else if (ph->p_type == PT_ARM_EXIDX) {
      exidx = (const uint32_t *)a;
      count = ph->p_memsz / 8;
    }
  }
  if (me < lo || me >= hi || !exidx) return 0;
  *t = (struct ehabi_table){exidx, count, lo, hi};
  return 1;
}

static uintptr_t ra[3];
static struct ehabi_table self;
static uintptr_t stepped[3];
static enum ehabi_result results[3];
static int found[3];

/* Steps three frames from the registers of the innermost, while those
 * frames are live (called from it: this function's frame lies below). */
__attribute__((noinline)) static void self_walk(const struct ehabi_regs *inner)
{
  uintptr_t lo = inner->r[13], hi = inner->r[13] + 4096;
  struct ehabi_regs r = *inner;
  for (int i = 0; i < 3; i++) {
    const uint32_t *e = ehabi_find(&self, r.r[15] & ~(uintptr_t)1);
    found[i] = e != NULL;
    if (!e) return;
    results[i] = ehabi_step(&self, e, &r, lo, hi);
    if (results[i] != EHABI_OK) return;
    stepped[i] = r.r[15];
    /* from a return address, the next lookup is inside the call */
    r.r[15] = (r.r[15] & ~(uintptr_t)1) - 1;
  }
}

__attribute__((noinline)) static void frame3(void)
{
  ra[0] = (uintptr_t)__builtin_return_address(0);
  struct ehabi_regs inner;
  memset(&inner, 0, sizeof inner);
  uintptr_t sp, r7, r11, pc, lr;
  __asm__ volatile("mov %0, sp\n\tmov %1, r7\n\tmov %2, r11\n\tmov %3, pc\n\tmov %4, lr"
                   : "=r"(sp), "=r"(r7), "=r"(r11), "=r"(pc), "=r"(lr));
  inner.r[14] = lr;
  inner.r[13] = sp;
  inner.r[7] = r7;
  inner.r[11] = r11;
  inner.r[15] = pc;
  self_walk(&inner);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void frame2(void)
{
  ra[1] = (uintptr_t)__builtin_return_address(0);
  frame3();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void frame1(void)
{
  ra[2] = (uintptr_t)__builtin_return_address(0);
  frame2();
  __asm__ volatile("" ::: "memory");
}

static void test_self(void)
{
  CHECK(dl_iterate_phdr(own_table, &self) == 1, "own .ARM.exidx found");
  frame1();
  for (int i = 0; i < 3; i++) {
    CHECK(found[i], "frame %d: an entry", i);
    CHECK(results[i] == EHABI_OK && (stepped[i] & ~(uintptr_t)1) == (ra[i] & ~(uintptr_t)1),
          "frame %d: result %d, return address %#lx, expected %#lx", i, results[i], (unsigned long)stepped[i],
          (unsigned long)ra[i]);
  }
  printf("own table: %zu entries, 3 frames stepped\n", self.count);
}
#endif

int main(void)
{
  test_find();
  test_inline();
  test_extab();
#if defined(__arm__)
  test_self();
#endif
  if (failures) {
    printf("%d failures\n", failures);
    return 1;
  }
  printf("ehabi: all checks passed\n");
  return 0;
}
