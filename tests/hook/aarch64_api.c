/* hook.aarch64_api: the AArch64 patch kinds on hand-written functions with
 * exactly known bytes and sizes, hooked and called through under
 * qemu-aarch64 (or on an arm64 machine).
 *
 * Each function comes twice: NAME_n is hooked with the near patch (b to a
 * trampoline within +-128 MiB: a 4-byte window), NAME_f with the far patch
 * (ldr x16, #8; br x16; .quad: a 16-byte window), the near memory being
 * refused by the pool's test switch so that its trampolines lie 64 GiB away,
 * beyond the reach of b, adr, adrp and every literal. Under qemu a library
 * may sit next to the executable, so the far path is only ever taken when
 * forced like this.
 *
 * Cases: a 1-instruction function (ret), one shorter than the far patch, a
 * loop that branches back into the first 16 bytes (from after them, and
 * from inside them), bti c and paciasp/autiasp entries (the landing pad
 * kept, a signed return address authenticated before the replacement
 * runs), literal loads (ldr x =const, ldrsw, ldr d), adr and adrp+add,
 * cbz/tbz/tbnz/cbnz/b.cond in the window, bl in the window (the callee
 * returns into the original function when bl ends the window, into the
 * trampoline otherwise), and a window that writes x16 before a branch whose
 * absolute form needs it. Every call's result is exact, every refusal has
 * its reason, refused functions keep their bytes. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "arch.h"
#include "check.h"
#include "hook.h"
#include "trampoline_pool.h"

/* bti c, paciasp, autiasp are hints: written as such they assemble for any
 * architecture level (and run as nops where the CPU lacks the feature). */
#define BTI_C "  hint #34\n"
#define PACIASP "  hint #25\n"
#define AUTIASP "  hint #29\n"

#define FN(name, body)                                                                       \
  ".globl " #name "\n.type " #name ",%function\n.balign 16\n" #name ":\n" body ".size " #name \
  ", .-" #name "\n"

/* x -> x */
#define RET_FN(s) FN(a64_ret_##s, "  ret\n")
/* x -> x + 1, 12 bytes */
#define SHORT_FN(s) FN(a64_short_##s, "  add x0, x0, #1\n  nop\n  ret\n")
/* n -> n (n >= 1); the b.ne at +0x14 goes back to +0x4 */
#define LOOP_FN(s)                                                                           \
  FN(a64_loop_##s, "  mov x1, #0\n1:\n  add x1, x1, #1\n  nop\n  nop\n  cmp x1, x0\n"         \
                   "  b.ne 1b\n  mov x0, x1\n  ret\n")
/* the same with the b.ne at +0xc, inside a 16-byte window */
#define TIGHT_FN(s)                                                                          \
  FN(a64_tight_##s, "  mov x1, #0\n1:\n  add x1, x1, #1\n  cmp x1, x0\n  b.ne 1b\n"           \
                    "  mov x0, x1\n  ret\n")
/* x -> x + 7 behind a landing pad, 24 bytes */
#define BTI_FN(s) FN(a64_bti_##s, BTI_C "  add x0, x0, #7\n  nop\n  nop\n  nop\n  ret\n")
/* x -> x + 5 in a frame whose return address is signed */
#define PAC_FN(s)                                                                            \
  FN(a64_pac_##s, PACIASP "  stp x29, x30, [sp, #-16]!\n  mov x29, sp\n  add x0, x0, #5\n"   \
                  "  nop\n  ldp x29, x30, [sp], #16\n" AUTIASP "  ret\n")
/* x -> x + 0x1234567890abcdef - 1000: a 64-bit and a sign-extended 32-bit
 * literal (the pool after the function's code) */
#define LIT_FN(s)                                                                            \
  ".globl a64_lit_" #s "\n.type a64_lit_" #s ",%function\n.balign 16\na64_lit_" #s ":\n"    \
  "  ldr x1, =0x1234567890abcdef\n  ldrsw x2, 1f\n  add x0, x0, x1\n  add x0, x0, x2\n"     \
  "  ret\n.size a64_lit_" #s ", .-a64_lit_" #s "\n.ltorg\n.balign 4\n1:\n  .word -1000\n"
/* x -> x + 1.5 (ldr d literal) */
#define LITD_FN(s)                                                                           \
  ".globl a64_litd_" #s "\n.type a64_litd_" #s ",%function\n.balign 16\na64_litd_" #s ":\n"  \
  "  ldr d1, 1f\n  fadd d0, d0, d1\n  nop\n  nop\n  ret\n.size a64_litd_" #s ", .-a64_litd_" \
  #s "\n.balign 8\n1:\n  .double 1.5\n"
/* x -> x + 4242 (adrp + add of a data word) */
#define ADRP_FN(s)                                                                           \
  FN(a64_adrp_##s, "  adrp x1, a64_data\n  add x1, x1, :lo12:a64_data\n  ldr x1, [x1]\n"     \
                   "  add x0, x0, x1\n  ret\n")
/* x -> x + 777 (adr of a word after the code) */
#define ADR_FN(s)                                                                            \
  ".globl a64_adr_" #s "\n.type a64_adr_" #s ",%function\n.balign 16\na64_adr_" #s ":\n"    \
  "  adr x1, 1f\n  ldr x1, [x1]\n  add x0, x0, x1\n  nop\n  ret\n.size a64_adr_" #s          \
  ", .-a64_adr_" #s "\n.balign 8\n1:\n  .quad 777\n"
/* 0 -> 200, bit 1 clear -> 300, 7 -> 400, else 100 */
#define CBZ_FN(s)                                                                            \
  FN(a64_cbz_##s, "  cbz x0, 1f\n  tbz x0, #1, 2f\n  cmp x0, #7\n  b.eq 3f\n"                \
                  "  mov x0, #100\n  ret\n1:\n  mov x0, #200\n  ret\n2:\n  mov x0, #300\n"     \
                  "  ret\n3:\n  mov x0, #400\n  ret\n")
/* the sign of x: -1, 0, 1 */
#define SIGN_FN(s)                                                                           \
  FN(a64_sign_##s, "  tbnz x0, #63, 1f\n  cbnz x0, 2f\n  mov x0, #0\n  ret\n"                \
                   "1:\n  mov x0, #-1\n  ret\n2:\n  mov x0, #1\n  ret\n")

/* clang-format off */
__asm__(".text\n"
        RET_FN(n) RET_FN(f) SHORT_FN(n) SHORT_FN(f) LOOP_FN(n) LOOP_FN(f)
        TIGHT_FN(n) TIGHT_FN(f) BTI_FN(n) BTI_FN(f) PAC_FN(n) PAC_FN(f)
        LIT_FN(n) LIT_FN(f) LITD_FN(n) LITD_FN(f) ADRP_FN(n) ADRP_FN(f)
        ADR_FN(n) ADR_FN(f) CBZ_FN(n) CBZ_FN(f) SIGN_FN(n) SIGN_FN(f)
        /* the callee of the bl cases: x -> 2x, and says where it returns to */
        FN(a64_callee, "  adrp x10, a64_seen_lr\n  str x30, [x10, :lo12:a64_seen_lr]\n"
                       "  add x0, x0, x0\n  ret\n")
        /* A function can only start with bl once its return address no
         * longer matters: this one continues in k (x1) with 2x + 1. */
        FN(a64_bl_n, "  bl a64_callee\n  add x0, x0, #1\n  br x1\n  nop\n")
        /* x -> 2x + 1 with bl ending the far window (+0xc) */
        FN(a64_bl_f, "  stp x29, x30, [sp, #-16]!\n  mov x29, sp\n  nop\n  bl a64_callee\n"
                     "  add x0, x0, #1\n  ldp x29, x30, [sp], #16\n  ret\n")
        /* the same with bl inside it (+0x4) */
        FN(a64_blmid_f, "  stp x29, x30, [sp, #-16]!\n  bl a64_callee\n  mov x29, sp\n  nop\n"
                        "  add x0, x0, #1\n  ldp x29, x30, [sp], #16\n  ret\n")
        /* x16 written, then a cbz whose far form jumps through x16 */
        FN(a64_x16_f, "  mov x16, x0\n  cbz x0, 1f\n  nop\n  nop\n  mov x0, x16\n  ret\n"
                      "1:\n  mov x0, #9\n  ret\n")
        ".pushsection .data\n.balign 8\na64_data:\n  .quad 4242\n"
        ".globl a64_seen_lr\na64_seen_lr:\n  .quad 0\n.popsection\n");
/* clang-format on */

#define BOTH(d) d(n) d(f)
#define DECLARE_LONG(s)                                                                      \
  long a64_ret_##s(long);                                                                    \
  long a64_short_##s(long);                                                                  \
  long a64_loop_##s(long);                                                                   \
  long a64_tight_##s(long);                                                                  \
  long a64_bti_##s(long);                                                                    \
  long a64_pac_##s(long);                                                                    \
  long a64_lit_##s(long);                                                                    \
  double a64_litd_##s(double);                                                               \
  long a64_adrp_##s(long);                                                                   \
  long a64_adr_##s(long);                                                                    \
  long a64_cbz_##s(long);                                                                    \
  long a64_sign_##s(long);
BOTH(DECLARE_LONG)
void a64_bl_n(long, void (*)(long));
long a64_bl_f(long);
long a64_blmid_f(long);
long a64_x16_f(long);
extern uintptr_t a64_seen_lr;

#define LIT_SUM ((long)0x1234567890abcdefLL - 1000)
#define BONUS 1000

/* One replacement per hooked function: counts, calls the chain, adds BONUS. */
#define REPL(name)                                                                           \
  static struct hook_result name##_hook;                                                     \
  static atomic_long name##_calls;                                                           \
  static long name##_repl(long x)                                                            \
  {                                                                                          \
    name##_calls++;                                                                          \
    return ((long (*)(long))name##_hook.chain)(x) + BONUS;                                   \
  }
#define REPLS(s)                                                                             \
  REPL(a64_ret_##s) REPL(a64_short_##s) REPL(a64_loop_##s) REPL(a64_tight_##s)               \
  REPL(a64_bti_##s) REPL(a64_pac_##s) REPL(a64_lit_##s) REPL(a64_adrp_##s) REPL(a64_adr_##s) \
  REPL(a64_cbz_##s) REPL(a64_sign_##s)
BOTH(REPLS)
REPL(a64_bl_f)
REPL(a64_blmid_f)
REPL(a64_x16_f)

#define REPL_D(name)                                                                         \
  static struct hook_result name##_hook;                                                     \
  static atomic_long name##_calls;                                                           \
  static double name##_repl(double x)                                                        \
  {                                                                                          \
    name##_calls++;                                                                          \
    return ((double (*)(double))name##_hook.chain)(x) * 2;                                   \
  }
REPL_D(a64_litd_n)
REPL_D(a64_litd_f)

static struct hook_result a64_bl_n_hook;
static atomic_long a64_bl_n_calls;
static void a64_bl_n_repl(long x, void (*k)(long))
{
  a64_bl_n_calls++;
  ((void (*)(long, void (*)(long)))a64_bl_n_hook.chain)(x * 10, k);
}
static jmp_buf bl_env;
static volatile long bl_result;
static __attribute__((noreturn)) void bl_continue(long v)
{
  bl_result = v;
  longjmp(bl_env, 1);
}
static long call_bl_n(long x)
{
  bl_result = -1;
  if (!setjmp(bl_env))
    a64_bl_n(x, bl_continue);
  return bl_result;
}

static enum hook_status install(const char *name, void *repl, struct hook_result *r)
{
  struct hook_spec spec = {name, NULL, NULL, repl};
  memset(r, 0, sizeof *r);
  enum hook_status st = hook_install(&spec, r);
  if (st != HOOK_OK)
    fprintf(stderr, "%s: %s: %s\n", name, hook_status_str(st), r->detail);
  return st;
}

static uintptr_t distance(uintptr_t a, uintptr_t b) { return a > b ? a - b : b - a; }

/* A live hook of `fn` with the patch of `patch` bytes after `keep` bytes of
 * landing pad: the entry jumps to the trampoline, at the expected distance,
 * and a second install says it is ours. */
static void check_patched(const char *name, void *fn, const struct hook_result *h, size_t keep,
                          size_t patch, int line)
{
  uintptr_t site = (uintptr_t)fn + keep, target = 0;
  int far = patch == arch_patch_size_far();
  size_t n = arch_read_jump((const void *)site, site, &target);
  struct hook_spec spec = {name, NULL, NULL, (void *)check_patched};
  struct hook_result again;
  enum hook_status st = hook_install(&spec, &again);
  if (h->original != fn || h->entry_kept != keep || h->patched_bytes != patch || n != patch ||
      target != (uintptr_t)h->trampoline ||
      (uintptr_t)h->chain != (uintptr_t)h->trampoline + ARCH_TRAMPOLINE_HEAD ||
      far != (distance(target, site) > ((uintptr_t)1 << 27)) || st != HOOK_ERR_ALREADY_HOOKED ||
      again.chain != h->chain) {
    fprintf(stderr,
            "line %d: %s: kept %zu patched %zu, jump of %zu bytes to %#lx (trampoline %p, "
            "chain %p), distance %#lx, second install %s; expected kept %zu, patch %zu\n",
            line, name, h->entry_kept, h->patched_bytes, n, (unsigned long)target, h->trampoline,
            h->chain, (unsigned long)distance(target, site), hook_status_str(st), keep, patch);
    check_failures++;
  }
}

#define HOOK_OK_AS(name, keep, patch)                                                        \
  do {                                                                                       \
    CHECK_EQ_LONG(install(#name, (void *)name##_repl, &name##_hook), HOOK_OK);               \
    check_patched(#name, (void *)name, &name##_hook, keep, patch, __LINE__);                 \
  } while (0)

static void expect_refused(const char *name, void *fn, void *repl, enum hook_status want,
                           const char *why)
{
  uint8_t before[16];
  memcpy(before, fn, sizeof before);
  struct hook_result r;
  enum hook_status st = install(name, repl, &r);
  if (st != want || !strstr(r.detail, why) || r.chain || r.trampoline) {
    fprintf(stderr, "%s: %s (%s), expected %s with \"%s\"\n", name, hook_status_str(st),
            r.detail, hook_status_str(want), why);
    check_failures++;
  }
  CHECK(memcmp(before, fn, sizeof before) == 0);
}

static const uint32_t bti_c = 0xd503245f, paciasp = 0xd503233f;

static void check_pad_kept(void *fn, const struct hook_result *h, uint32_t pad)
{
  uint32_t at_entry, in_chain;
  memcpy(&at_entry, fn, 4);
  memcpy(&in_chain, h->chain, 4);
  CHECK_EQ_LONG(at_entry, pad);
  CHECK_EQ_LONG(in_chain, pad);
}

/* The functions both patches take, called through: exact results, each
 * with the replacement's BONUS (doubled for the double). */
#define CALL_THROUGH(s)                                                                      \
  do {                                                                                       \
    long (*volatile indirect)(long) = a64_bti_##s; /* blr: lands on the kept bti c */       \
    CHECK_EQ_LONG(indirect(1), 8 + BONUS);                                                   \
    CHECK_EQ_LONG(a64_pac_##s(1), 6 + BONUS);                                                \
    CHECK_EQ_LONG(a64_lit_##s(3), 3 + LIT_SUM + BONUS);                                      \
    CHECK(a64_litd_##s(2.0) == 7.0);                                                         \
    CHECK_EQ_LONG(a64_adrp_##s(1), 4243 + BONUS);                                            \
    CHECK_EQ_LONG(a64_adr_##s(1), 778 + BONUS);                                              \
    static const long cbz_in[4] = {0, 5, 7, 3}, cbz_out[4] = {200, 300, 400, 100};           \
    for (int i = 0; i < 4; i++)                                                              \
      CHECK_EQ_LONG(a64_cbz_##s(cbz_in[i]), cbz_out[i] + BONUS);                             \
    for (long x = -1; x <= 1; x++)                                                           \
      CHECK_EQ_LONG(a64_sign_##s(x * 9), x + BONUS);                                         \
    CHECK_EQ_LONG(a64_cbz_##s##_calls, 4);                                                   \
    CHECK_EQ_LONG(a64_sign_##s##_calls, 3);                                                  \
  } while (0)

static void test_near(void)
{
  const size_t near = arch_patch_size_near();
  CHECK_EQ_LONG(near, 4);
  HOOK_OK_AS(a64_ret_n, 0, near);
  HOOK_OK_AS(a64_short_n, 0, near);
  HOOK_OK_AS(a64_loop_n, 0, near); /* the loop goes back to +4: right after the patch */
  HOOK_OK_AS(a64_tight_n, 0, near);
  HOOK_OK_AS(a64_bti_n, 4, near);
  HOOK_OK_AS(a64_pac_n, 4, near);
  HOOK_OK_AS(a64_lit_n, 0, near);
  HOOK_OK_AS(a64_litd_n, 0, near);
  HOOK_OK_AS(a64_adrp_n, 0, near);
  HOOK_OK_AS(a64_adr_n, 0, near);
  HOOK_OK_AS(a64_cbz_n, 0, near);
  HOOK_OK_AS(a64_sign_n, 0, near);
  HOOK_OK_AS(a64_bl_n, 0, near);
  check_pad_kept((void *)a64_bti_n, &a64_bti_n_hook, bti_c);
  check_pad_kept((void *)a64_pac_n, &a64_pac_n_hook, paciasp);

  CHECK_EQ_LONG(a64_ret_n(5), 5 + BONUS);
  CHECK_EQ_LONG(a64_short_n(5), 6 + BONUS);
  CHECK_EQ_LONG(a64_loop_n(10), 10 + BONUS);
  CHECK_EQ_LONG(a64_tight_n(12), 12 + BONUS);
  CALL_THROUGH(n);
  a64_seen_lr = 0;
  CHECK_EQ_LONG(call_bl_n(3), 61); /* the replacement passes 30: 2 * 30 + 1 */
  CHECK(a64_seen_lr == (uintptr_t)a64_bl_n + 4); /* the callee returned into a64_bl_n */

  CHECK_EQ_LONG(a64_ret_n_calls + a64_short_n_calls + a64_loop_n_calls + a64_tight_n_calls, 4);
  CHECK_EQ_LONG(a64_bti_n_calls + a64_pac_n_calls + a64_lit_n_calls + a64_litd_n_calls, 4);
  CHECK_EQ_LONG(a64_adrp_n_calls + a64_adr_n_calls + a64_bl_n_calls, 3);
}

static void test_far(void)
{
  const size_t far = arch_patch_size_far();
  CHECK_EQ_LONG(far, 16);
  tramp_pool_refuse_near(1);
  expect_refused("a64_ret_f", (void *)a64_ret_f, (void *)a64_ret_f_repl, HOOK_ERR_TOO_SHORT,
                 "function too short for the absolute-jump patch");
  expect_refused("a64_short_f", (void *)a64_short_f, (void *)a64_short_f_repl, HOOK_ERR_TOO_SHORT,
                 "function too short for the absolute-jump patch");
  expect_refused("a64_loop_f", (void *)a64_loop_f, (void *)a64_loop_f_repl, HOOK_ERR_BRANCH_INTO_PATCH,
                 "b.ne at +0x14 branches to +0x4, inside the patched bytes");
  expect_refused("a64_tight_f", (void *)a64_tight_f, (void *)a64_tight_f_repl, HOOK_ERR_UNRELOCATABLE,
                 "b.ne at +0xc branches to +0x4, inside the patch window");
  expect_refused("a64_x16_f", (void *)a64_x16_f, (void *)a64_x16_f_repl, HOOK_ERR_UNRELOCATABLE,
                 "cbz at +0x4: an earlier instruction may set x16, which the absolute jump needs");
  HOOK_OK_AS(a64_bti_f, 4, far);
  HOOK_OK_AS(a64_pac_f, 4, far);
  HOOK_OK_AS(a64_lit_f, 0, far);
  HOOK_OK_AS(a64_litd_f, 0, far);
  HOOK_OK_AS(a64_adrp_f, 0, far);
  HOOK_OK_AS(a64_adr_f, 0, far);
  HOOK_OK_AS(a64_cbz_f, 0, far);
  HOOK_OK_AS(a64_sign_f, 0, far);
  HOOK_OK_AS(a64_bl_f, 0, far);
  HOOK_OK_AS(a64_blmid_f, 0, far);
  tramp_pool_refuse_near(0);
  check_pad_kept((void *)a64_bti_f, &a64_bti_f_hook, bti_c);
  check_pad_kept((void *)a64_pac_f, &a64_pac_f_hook, paciasp);

  /* the refused functions run as before */
  CHECK_EQ_LONG(a64_ret_f(5), 5);
  CHECK_EQ_LONG(a64_short_f(5), 6);
  CHECK_EQ_LONG(a64_loop_f(10), 10);
  CHECK_EQ_LONG(a64_tight_f(12), 12);
  CHECK_EQ_LONG(a64_x16_f(0), 9);
  CHECK_EQ_LONG(a64_x16_f(4), 4);

  CALL_THROUGH(f);
  a64_seen_lr = 0;
  CHECK_EQ_LONG(a64_bl_f(20), 41 + BONUS);
  CHECK(a64_seen_lr == (uintptr_t)a64_bl_f + 16); /* past the window, in a64_bl_f */
  a64_seen_lr = 0;
  CHECK_EQ_LONG(a64_blmid_f(20), 41 + BONUS);
  /* bl inside the window returns into the chain, which goes on with the
   * rest of the window */
  CHECK(tramp_pool_contains(a64_seen_lr) && a64_seen_lr > (uintptr_t)a64_blmid_f_hook.chain);

  CHECK_EQ_LONG(a64_bti_f_calls + a64_pac_f_calls + a64_lit_f_calls + a64_litd_f_calls, 4);
  CHECK_EQ_LONG(a64_adrp_f_calls + a64_adr_f_calls + a64_bl_f_calls + a64_blmid_f_calls, 4);
  CHECK_EQ_LONG(a64_ret_f_calls + a64_short_f_calls + a64_loop_f_calls + a64_tight_f_calls, 0);
  CHECK_EQ_LONG(a64_x16_f_calls, 0);
}

int main(void)
{
  /* unhooked, every function gives the documented result */
  CHECK_EQ_LONG(a64_pac_f(1), 6);
  CHECK_EQ_LONG(a64_lit_f(3), 3 + LIT_SUM);
  CHECK(a64_litd_f(2.0) == 3.5);
  CHECK_EQ_LONG(a64_adrp_f(1) + a64_adr_f(1), 4243 + 778);
  CHECK_EQ_LONG(a64_blmid_f(20), 41);
  /* paciasp signs for real where the CPU has pointer authentication (qemu's
   * default CPU does): a wrongly authenticated return address then faults */
  unsigned long hwcap = getauxval(AT_HWCAP);
  printf("pointer authentication: %s\n", (hwcap & (1UL << 30)) ? "on" : "off"); /* HWCAP_PACA */
  test_near();
  test_far();
  return check_report("hook.aarch64_api");
}
