/* hook.i386_api: the i386 hook backend on hand-written functions with
 * exactly known bytes and sizes, hooked and called through under qemu-i386
 * (or natively on a kernel that runs 32-bit programs).
 *
 * On i386 a jmp rel32 reaches every address (the displacement wraps around
 * the 32-bit address space), so the patch is always the 5-byte jump, near
 * or "far". Cases: functions of 1, 3 and exactly 5 bytes, a loop back into
 * the first 5 bytes, endbr32 entries (room to keep the landing pad, and
 * not), the PC thunks __x86.get_pc_thunk.bx/.ax/.cx and `call 1f; 1: pop`
 * inside the window, and a thunk behind endbr32 as -fcf-protection builds
 * it (the relocated code must leave the ORIGINAL return address in the
 * register, which the function then returns or uses to load its data
 * through the GOT), call rel32 ending the window (the callee
 * sees its return address in the trampoline), jcc rel8, jcc rel32, jecxz
 * and loop in the window, and the far path (near memory refused). Every
 * call's result is exact, every refusal has its reason, refused functions
 * keep their bytes. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "check.h"
#include "hook.h"
#include "trampoline_pool.h"

/* The functions, in i386_api_code.c (which has no C code: the compiler
 * emits its own PC thunks in a file with PIC C code, and the thunks there
 * are the comdat copies of every object). */

int i386_ret(void);
int i386_three(void);
int i386_five(int);
int i386_loop(void);
int i386_jecxz(int);
int i386_loopfwd(int);
__attribute__((regparm(1))) int i386_sign(int);
__attribute__((regparm(1))) int i386_jz32(int);
int i386_cet_long(int);
int i386_cet_short(void);
uintptr_t i386_pc_bx(void);
uintptr_t i386_pc_ax(void);
uintptr_t i386_pc_cx(int);
uintptr_t i386_pc_pop(void);
uintptr_t i386_pc_cet(void);
int i386_pc_got(int);
int i386_call(int);
int i386_far(int);
extern uintptr_t i386_pc_bx_expect, i386_pc_ax_expect, i386_pc_cx_expect, i386_pc_pop_expect,
    i386_pc_cet_expect, i386_call_expect, i386_seen_ret;

static int replacement_int(void) { return 0; }

static void expect_status(const char *fn, enum hook_status want, const char *detail_has,
                          struct hook_result *r, void *repl, int line)
{
  struct hook_spec spec = {fn, NULL, NULL, repl};
  enum hook_status got = hook_install(&spec, r);
  if (got != want || (detail_has && !strstr(r->detail, detail_has))) {
    fprintf(stderr, "line %d: %s: status %s (%s), expected %s with \"%s\"\n", line, fn,
            hook_status_str(got), r->detail, hook_status_str(want), detail_has ? detail_has : "");
    check_failures++;
  }
}
#define INSTALL(fn, repl, r) expect_status(fn, HOOK_OK, NULL, r, (void *)(repl), __LINE__)
#define REFUSED(fn, want, has)                                                               \
  do {                                                                                       \
    struct hook_result refused_;                                                             \
    expect_status(fn, want, has, &refused_, (void *)replacement_int, __LINE__);              \
  } while (0)

/* ---- the arch layer: every address within a jmp rel32 ------------------- */

static void test_wraparound(void)
{
  CHECK_EQ_LONG(arch_patch_size_near(), 5);
  CHECK_EQ_LONG(arch_patch_size_far(), 5);
  CHECK_EQ_LONG(arch_near_reachable(0x10000, 0xffff0000u, 0x10000), 1);
  CHECK_EQ_LONG(arch_near_reachable(0xffff0000u, 0x10000, 0x10000), 1);
  /* 0xfffffff0 -> 0x1000: the displacement wraps to 0x100b */
  uint8_t buf[16];
  static const uint8_t wrap[] = {0xe9, 0x0b, 0x10, 0x00, 0x00};
  CHECK_EQ_LONG(arch_write_near_jump(buf, 0xfffffff0u, 0x1000), 5);
  CHECK(memcmp(buf, wrap, 5) == 0);
  uintptr_t target = 0;
  CHECK_EQ_LONG(arch_read_jump(buf, 0xfffffff0u, &target), 5);
  CHECK_EQ_LONG(target, 0x1000);
  /* 0x1000 -> 0xfffff000 backwards: rel32 0xffffdffb */
  static const uint8_t back[] = {0xe9, 0xfb, 0xdf, 0xff, 0xff};
  CHECK_EQ_LONG(arch_write_far_jump(buf, 0x1000, 0xfffff000u), 5);
  CHECK(memcmp(buf, back, 5) == 0);
  CHECK_EQ_LONG(arch_read_jump(buf, 0x1000, &target), 5);
  CHECK_EQ_LONG(target, 0xfffff000u);
  /* jmp [abs32]: the slot's absolute address, read through */
  static uintptr_t slot;
  slot = (uintptr_t)i386_five;
  CHECK_EQ_LONG(arch_write_pointer_jump(buf, 0x1234, (uintptr_t)&slot), 6);
  CHECK_EQ_LONG(buf[0], 0xff);
  CHECK_EQ_LONG(buf[1], 0x25);
  uint32_t abs32;
  memcpy(&abs32, buf + 2, 4);
  CHECK_EQ_LONG(abs32, (uintptr_t)&slot);
  CHECK_EQ_LONG(arch_read_jump(buf, 0x1234, &target), 6);
  CHECK(target == (uintptr_t)i386_five);
  CHECK_EQ_LONG(arch_inline_jump(buf, 0x1234, &target), 0); /* no address inline on i386 */
  static const uint8_t endbr32[] = {0xf3, 0x0f, 0x1e, 0xfb}, endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  CHECK_EQ_LONG(arch_entry_landing_pad(endbr32), 4);
  CHECK_EQ_LONG(arch_entry_landing_pad(endbr64), 0);
}

/* The relocated bytes of the PC-address calls: the ORIGINAL return address
 * as an immediate, nothing that calls the thunk again. */
/* Relocate the 5-byte window of fn to RUN_AT: the source instructions kept
 * (`kept` bytes, copied as they are), then one instruction `opcode imm32`
 * ending the copy, whose immediate is returned. */
#define RUN_AT ((uintptr_t)0x40000000u) /* where the copy would run: any address */
static uint32_t relocated_imm(const void *fn, size_t consumed, size_t kept, uint8_t opcode)
{
  uint8_t out[64];
  struct arch_relocation r;
  uint32_t imm = 0;
  CHECK_EQ_LONG(arch_relocate(fn, (uintptr_t)fn, 5, 0, out, RUN_AT, sizeof out, &r),
                ARCH_RELOC_OK);
  CHECK_EQ_LONG(r.consumed, consumed);
  CHECK_EQ_LONG(r.written, kept + 5);
  CHECK(memcmp(out, fn, kept) == 0);
  CHECK_EQ_LONG(out[kept], opcode);
  memcpy(&imm, out + kept + 1, 4);
  return imm;
}

static void test_relocated_bytes(void)
{
  /* pushl %ebx; call thunk.bx -> pushl %ebx; movl $expect, %ebx */
  CHECK_EQ_LONG(relocated_imm((const void *)i386_pc_bx, 6, 1, 0xbb), i386_pc_bx_expect);
  /* call thunk.ax -> movl $expect, %eax */
  CHECK_EQ_LONG(relocated_imm((const void *)i386_pc_ax, 5, 0, 0xb8), i386_pc_ax_expect);
  /* movl 4(%esp), %edx; call thunk.cx -> the mov; movl $expect, %ecx */
  CHECK_EQ_LONG(relocated_imm((const void *)i386_pc_cx, 9, 4, 0xb9), i386_pc_cx_expect);
  /* after endbr32, call of a thunk that starts with endbr32 -> movl $expect, %edx */
  CHECK_EQ_LONG(relocated_imm((const uint8_t *)i386_pc_cet + 4, 5, 0, 0xba), i386_pc_cet_expect);
  /* call 1f; 1: -> pushl $expect */
  CHECK_EQ_LONG(relocated_imm((const void *)i386_pc_pop, 5, 0, 0x68), i386_pc_pop_expect);
  /* an ordinary call stays a call, displaced for the new address */
  extern int i386_double(void);
  uint32_t rel = relocated_imm((const void *)i386_call, 9, 4, 0xe8);
  CHECK(RUN_AT + 9 + rel == (uintptr_t)i386_double);
}

/* ---- refusals -------------------------------------------------------------- */

static void test_refusals(void)
{
  REFUSED("i386_ret", HOOK_ERR_TOO_SHORT, "function is 1 bytes, shorter than the 5-byte patch");
  REFUSED("i386_three", HOOK_ERR_TOO_SHORT, "function is 3 bytes, shorter than the 5-byte patch");
  REFUSED("i386_loop", HOOK_ERR_BRANCH_INTO_PATCH,
          "jnz at +0x6 branches to +0x2, inside the patched bytes");
  /* untouched */
  static const uint8_t loop_bytes[] = {0x31, 0xc0, 0x40, 0x83, 0xf8, 0x0a, 0x75, 0xfa, 0xc3};
  CHECK(memcmp((const void *)i386_loop, loop_bytes, sizeof loop_bytes) == 0);
  CHECK_EQ_LONG(i386_loop(), 10);
  CHECK_EQ_LONG(i386_three(), 0);
}

/* ---- hooked and called through ------------------------------------------- */

static struct hook_result five_h, jecxz_h, loopfwd_h, sign_h, jz32_h, cetl_h, cets_h, bx_h, ax_h,
    cx_h, pop_h, cet_h, got_h, call_h, far_h;
static int calls;
static int five_repl(int x) { calls++; return ((int (*)(int))five_h.chain)(x) + 1000; }
static int jecxz_repl(int n) { calls++; return ((int (*)(int))jecxz_h.chain)(n) * 10; }
static int loopfwd_repl(int n) { calls++; return ((int (*)(int))loopfwd_h.chain)(n) * 10; }
typedef __attribute__((regparm(1))) int regparm_fn(int);
static __attribute__((regparm(1))) int sign_repl(int x)
{
  calls++;
  return ((regparm_fn *)sign_h.chain)(x) * 10;
}
static __attribute__((regparm(1))) int jz32_repl(int x)
{
  calls++;
  return ((regparm_fn *)jz32_h.chain)(x) * 10;
}
static int cetl_repl(int x) { calls++; return ((int (*)(int))cetl_h.chain)(x) * 100; }
static int cets_repl(void) { calls++; return ((int (*)(void))cets_h.chain)() * 100; }
static uintptr_t bx_repl(void) { calls++; return ((uintptr_t(*)(void))bx_h.chain)(); }
static uintptr_t ax_repl(void) { calls++; return ((uintptr_t(*)(void))ax_h.chain)(); }
static uintptr_t cx_repl(int x) { calls++; return ((uintptr_t(*)(int))cx_h.chain)(x); }
static uintptr_t pop_repl(void) { calls++; return ((uintptr_t(*)(void))pop_h.chain)(); }
static uintptr_t cet_repl(void) { calls++; return ((uintptr_t(*)(void))cet_h.chain)(); }
static int got_repl(int x) { calls++; return ((int (*)(int))got_h.chain)(x) + 1; }
static int call_repl(int x) { calls++; return ((int (*)(int))call_h.chain)(x) * 10; }
static int far_repl(int x) { calls++; return ((int (*)(int))far_h.chain)(x) * 10; }

static void test_callthrough(void)
{
  /* through volatile pointers: the compiler must not fold the calls */
  int (*volatile five)(int) = i386_five, (*volatile jecxz)(int) = i386_jecxz,
                 (*volatile loopfwd)(int) = i386_loopfwd, (*volatile cetl)(int) = i386_cet_long,
                 (*volatile cets)(void) = i386_cet_short, (*volatile got)(int) = i386_pc_got,
                 (*volatile call)(int) = i386_call;
  regparm_fn *volatile sign = i386_sign, *volatile jz32 = i386_jz32;
  uintptr_t (*volatile bx)(void) = i386_pc_bx, (*volatile ax)(void) = i386_pc_ax,
                      (*volatile cx)(int) = i386_pc_cx, (*volatile pop)(void) = i386_pc_pop,
                      (*volatile cet)(void) = i386_pc_cet;

  /* unhooked: the expected values are right */
  CHECK_EQ_LONG(five(9), 9);
  CHECK_EQ_LONG(jecxz(4), 12);
  CHECK_EQ_LONG(jecxz(0), -1);
  CHECK_EQ_LONG(loopfwd(5), 4);
  CHECK_EQ_LONG(loopfwd(1), 7);
  CHECK_EQ_LONG(sign(-3), -1);
  CHECK_EQ_LONG(sign(0), 100);
  CHECK_EQ_LONG(sign(8), 1);
  CHECK_EQ_LONG(jz32(0), 6);
  CHECK_EQ_LONG(jz32(3), 5);
  CHECK_EQ_LONG(cetl(1), 8);
  CHECK_EQ_LONG(cets(), 1);
  CHECK(bx() == i386_pc_bx_expect);
  CHECK(ax() == i386_pc_ax_expect);
  CHECK(cx(3) == i386_pc_cx_expect + 3);
  CHECK(pop() == i386_pc_pop_expect);
  CHECK(cet() == i386_pc_cet_expect);
  CHECK_EQ_LONG(got(8), 4250);
  CHECK_EQ_LONG(call(5), 11);
  CHECK(i386_seen_ret == i386_call_expect);

  INSTALL("i386_five", five_repl, &five_h);
  INSTALL("i386_jecxz", jecxz_repl, &jecxz_h);
  INSTALL("i386_loopfwd", loopfwd_repl, &loopfwd_h);
  INSTALL("i386_sign", sign_repl, &sign_h);
  INSTALL("i386_jz32", jz32_repl, &jz32_h);
  INSTALL("i386_cet_long", cetl_repl, &cetl_h);
  INSTALL("i386_cet_short", cets_repl, &cets_h);
  INSTALL("i386_pc_bx", bx_repl, &bx_h);
  INSTALL("i386_pc_ax", ax_repl, &ax_h);
  INSTALL("i386_pc_cx", cx_repl, &cx_h);
  INSTALL("i386_pc_pop", pop_repl, &pop_h);
  INSTALL("i386_pc_cet", cet_repl, &cet_h);
  INSTALL("i386_pc_got", got_repl, &got_h);
  INSTALL("i386_call", call_repl, &call_h);

  /* windows: whole instructions covering 5 bytes */
  CHECK_EQ_LONG(five_h.patched_bytes, 5);
  CHECK_EQ_LONG(jecxz_h.patched_bytes, 6);
  CHECK_EQ_LONG(loopfwd_h.patched_bytes, 6);
  CHECK_EQ_LONG(sign_h.patched_bytes, 6);
  CHECK_EQ_LONG(jz32_h.patched_bytes, 8);
  CHECK_EQ_LONG(bx_h.patched_bytes, 6);
  CHECK_EQ_LONG(ax_h.patched_bytes, 5);
  CHECK_EQ_LONG(cx_h.patched_bytes, 9);
  CHECK_EQ_LONG(pop_h.patched_bytes, 5);
  CHECK_EQ_LONG(cet_h.entry_kept, 4);
  CHECK_EQ_LONG(cet_h.patched_bytes, 5);
  CHECK_EQ_LONG(call_h.patched_bytes, 9);
  uintptr_t target;
  CHECK_EQ_LONG(arch_read_jump((const void *)i386_five, (uintptr_t)i386_five, &target), 5);
  CHECK(target == (uintptr_t)five_h.trampoline);

  calls = 0;
  CHECK_EQ_LONG(five(9), 1009);
  CHECK_EQ_LONG(jecxz(4), 120);
  CHECK_EQ_LONG(jecxz(0), -10);
  CHECK_EQ_LONG(loopfwd(5), 40);
  CHECK_EQ_LONG(loopfwd(1), 70);
  CHECK_EQ_LONG(sign(-3), -10);
  CHECK_EQ_LONG(sign(0), 1000);
  CHECK_EQ_LONG(sign(8), 10);
  CHECK_EQ_LONG(jz32(0), 60);
  CHECK_EQ_LONG(jz32(3), 50);
  CHECK_EQ_LONG(calls, 10);

  /* endbr32 kept where there is room: indirect calls still land on it, and
   * the chain starts with its copy; 8 bytes cannot hold it and the jump */
  static const uint8_t endbr32[] = {0xf3, 0x0f, 0x1e, 0xfb};
  CHECK_EQ_LONG(cetl_h.entry_kept, 4);
  CHECK(memcmp((const void *)i386_cet_long, endbr32, 4) == 0);
  CHECK(memcmp(cetl_h.chain, endbr32, 4) == 0);
  CHECK_EQ_LONG(arch_read_jump((const uint8_t *)i386_cet_long + 4, (uintptr_t)i386_cet_long + 4,
                               &target),
                5);
  CHECK(target == (uintptr_t)cetl_h.trampoline);
  CHECK_EQ_LONG(cets_h.entry_kept, 0);
  CHECK_EQ_LONG(arch_read_jump((const void *)i386_cet_short, (uintptr_t)i386_cet_short, &target), 5);
  CHECK_EQ_LONG(cetl(1), 800);
  CHECK_EQ_LONG(cets(), 100);

  /* the PC thunks: the register holds the original address, not the
   * trampoline's */
  CHECK(bx() == i386_pc_bx_expect);
  CHECK(ax() == i386_pc_ax_expect);
  CHECK(cx(3) == i386_pc_cx_expect + 3);
  CHECK(pop() == i386_pc_pop_expect);
  CHECK(cet() == i386_pc_cet_expect);
  CHECK_EQ_LONG(got(8), 4251);

  /* call rel32 ending the window: the callee returns into the chain, right
   * after the relocated call (the copied mov, then the call: +9) */
  CHECK_EQ_LONG(call(5), 110);
  CHECK(i386_seen_ret == (uintptr_t)call_h.chain + 9);
  CHECK_EQ_LONG(calls, 10 + 2 + 5 + 1 + 1);

  /* already hooked */
  struct hook_result again;
  expect_status("i386_pc_bx", HOOK_ERR_ALREADY_HOOKED, NULL, &again, (void *)ax_repl, __LINE__);
  CHECK(again.chain == bx_h.chain);
  expect_status("i386_cet_long", HOOK_ERR_ALREADY_HOOKED, NULL, &again, (void *)ax_repl, __LINE__);
  CHECK(again.chain == cetl_h.chain);
}

/* No trampoline memory "within reach": on i386 the absolute patch is the
 * same 5-byte jmp rel32 to a chunk anywhere. */
static void test_far(void)
{
  int (*volatile far)(int) = i386_far;
  CHECK_EQ_LONG(far(4), 14);
  tramp_pool_refuse_near(1);
  INSTALL("i386_far", far_repl, &far_h);
  tramp_pool_refuse_near(0);
  CHECK_EQ_LONG(far_h.patched_bytes, 8); /* mov 4(%esp), %eax; lea */
  uintptr_t target;
  CHECK_EQ_LONG(arch_read_jump((const void *)i386_far, (uintptr_t)i386_far, &target), 5);
  CHECK(target == (uintptr_t)far_h.trampoline);
  calls = 0;
  CHECK_EQ_LONG(far(4), 140);
  CHECK_EQ_LONG(calls, 1);
}

int main(void)
{
  test_wraparound();
  test_relocated_bytes();
  test_refusals();
  test_callthrough();
  test_far();
  return check_report("hook.i386_api");
}
