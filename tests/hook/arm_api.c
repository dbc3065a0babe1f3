/* hook.arm_api: the ARM32 patches on hand-written A32 and Thumb-2 functions
 * (arm_api_code.c) with exactly known bytes, hooked and called through
 * under qemu-arm (or on an ARMv7 machine).
 *
 * Each function comes twice: NAME_n is hooked with the near patch (A32 b or
 * Thumb b.w to a trampoline within 16 MiB: a 4-byte window), NAME_f with the
 * far one (a load into pc: 8 bytes, 10 at a Thumb entry at 2 mod 4), the
 * near memory being refused by the pool's test switch so that its
 * trampolines lie 256 MiB away, beyond the reach of b.w, bl and b<cond>.
 *
 * Cases: literal loads (T16 ldr, ldr.w, ldrd, vldr; A32 ldr, conditional
 * ldr, vldr), a literal inside the window, adr/adr.w, the PIC idioms (add
 * rX, pc; add rX, pc, rX), mov rX, pc, cbz/cbnz, b<cond> T16/T32/A32, IT
 * blocks (inside the window, ending in it, with a literal load and a branch
 * under their condition), bl inside the window and ending it, blx both ways,
 * a 4-byte function, an entry at 2 mod 4; refused: a loop back into the
 * window, bx pc, tbb [pc, r0], and (far) mov r1, pc, whose value lies in
 * the window. Every call's result is exact, every refusal
 * has its reason, refused functions keep their bytes and results. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "check.h"
#include "hook.h"
#include "trampoline_pool.h"

#define BONUS 1000

#define LONG_FNS(X)                                                                          \
  X(t_lit) X(t_ldrd) X(t_adr) X(t_adrw) X(t_pic) X(t_movpc) X(t_cbz) X(t_cbnz) X(t_bcondw)     \
  X(t_it) X(t_itlong) X(t_itlit) X(t_itb) X(t_bl) X(t_bllast) X(t_blx) X(t_tiny) X(t_litin)    \
  X(t_loop) X(t_bxpc) X(t_tbb) X(t_unal) X(a_lit) X(a_pic) X(a_bcond) X(a_bl) X(a_blx)        \
  X(a_adr) X(a_movpc) X(a_condlit)
#define DOUBLE_FNS(X) X(t_vldr) X(a_vldr)

/* Per function and suffix: the declaration, and a replacement that counts,
 * calls the chain and adds BONUS (doubles the double). */
#define DECLARE_L(name, s)                                                                   \
  long name##_##s(long);                                                                     \
  static struct hook_result name##_##s##_hook;                                               \
  static atomic_long name##_##s##_calls;                                                     \
  static long name##_##s##_repl(long x)                                                      \
  {                                                                                          \
    name##_##s##_calls++;                                                                    \
    return ((long (*)(long))name##_##s##_hook.chain)(x) + BONUS;                             \
  }
#define DECLARE_D(name, s)                                                                   \
  double name##_##s(double);                                                                 \
  static struct hook_result name##_##s##_hook;                                               \
  static atomic_long name##_##s##_calls;                                                     \
  static double name##_##s##_repl(double x)                                                  \
  {                                                                                          \
    name##_##s##_calls++;                                                                    \
    return ((double (*)(double))name##_##s##_hook.chain)(x) * 2;                             \
  }
#define DECL_BOTH_L(name) DECLARE_L(name, n) DECLARE_L(name, f)
#define DECL_BOTH_D(name) DECLARE_D(name, n) DECLARE_D(name, f)
LONG_FNS(DECL_BOTH_L)
DOUBLE_FNS(DECL_BOTH_D)

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

/* A live hook of fn whose patch replaced `patched` bytes: the entry jumps
 * to the trampoline (near: within b.w's reach; far: beyond it), and a second
 * install says it is ours. */
static void check_patched(const char *name, void *fn, const struct hook_result *h, int far,
                          size_t patched, int line)
{
  uintptr_t site = (uintptr_t)fn, target = 0;
  size_t n = arch_read_jump((const void *)site, site, &target);
  size_t want_jump = far ? patched >= 10 && (site & 1) && (site & 2) ? 10 : 8 : 4;
  struct hook_spec spec = {name, NULL, NULL, (void *)check_patched};
  struct hook_result again;
  enum hook_status st = hook_install(&spec, &again);
  if (h->original != fn || h->patched_bytes != patched || n != want_jump ||
      target != (uintptr_t)h->trampoline ||
      (uintptr_t)h->chain != (uintptr_t)h->trampoline + ARCH_TRAMPOLINE_HEAD ||
      far != (distance(target, site) > ((uintptr_t)16 << 20)) || st != HOOK_ERR_ALREADY_HOOKED ||
      again.chain != h->chain) {
    fprintf(stderr,
            "line %d: %s: patched %zu, jump of %zu bytes to %#lx (trampoline %p, chain %p), "
            "distance %#lx, second install %s; expected patched %zu, a %zu-byte jump\n",
            line, name, h->patched_bytes, n, (unsigned long)target, h->trampoline, h->chain,
            (unsigned long)distance(target, site), hook_status_str(st), patched, want_jump);
    check_failures++;
  }
}

#define HOOK_OK_AS(name, s, far, patched)                                                    \
  do {                                                                                       \
    CHECK_EQ_LONG(install(#name "_" #s, (void *)name##_##s##_repl, &name##_##s##_hook), HOOK_OK); \
    check_patched(#name "_" #s, (void *)name##_##s, &name##_##s##_hook, far, patched, __LINE__); \
  } while (0)

static void expect_refused(const char *name, void *fn, void *repl, enum hook_status want,
                           const char *why)
{
  uint8_t before[16];
  const uint8_t *code = (const uint8_t *)((uintptr_t)fn & ~(uintptr_t)1);
  memcpy(before, code, sizeof before);
  struct hook_result r;
  enum hook_status st = install(name, repl, &r);
  if (st != want || !strstr(r.detail, why) || r.chain || r.trampoline) {
    fprintf(stderr, "%s: %s (%s), expected %s with \"%s\"\n", name, hook_status_str(st),
            r.detail, hook_status_str(want), why);
    check_failures++;
  }
  CHECK(memcmp(before, code, sizeof before) == 0);
}
#define REFUSED(name, s, want, why)                                                          \
  expect_refused(#name "_" #s, (void *)name##_##s, (void *)name##_##s##_repl, want, why)

/* The exact results of the functions both patches take; `b` is the bonus a
 * hooked call adds. */
#define RESULTS(s, b)                                                                        \
  do {                                                                                       \
    CHECK_EQ_LONG(t_lit_##s(5), 21005 + (b));                                                \
    CHECK_EQ_LONG(t_ldrd_##s(5), 4305 + (b));                                                \
    CHECK(t_vldr_##s(2.0) == ((b) ? 7.0 : 3.5));                                             \
    CHECK(a_vldr_##s(1.0) == ((b) ? 6.5 : 3.25));                                            \
    CHECK_EQ_LONG(t_adr_##s(1), 778 + (b));                                                  \
    CHECK_EQ_LONG(t_adrw_##s(1), 889 + (b));                                                 \
    CHECK_EQ_LONG(t_pic_##s(1), 4243 + (b));                                                 \
    CHECK_EQ_LONG(t_cbz_##s(0) + t_cbz_##s(7) + t_cbz_##s(3), 344 + 3 * (b));                 \
    CHECK_EQ_LONG(t_cbnz_##s(0) * 100 + t_cbnz_##s(9), 50 * 100 + 60 + 101 * (b));            \
    CHECK_EQ_LONG(t_bcondw_##s(5) * 100 + t_bcondw_##s(1), 2010 + 101 * (b));                 \
    CHECK_EQ_LONG(t_it_##s(3) * 100 + t_it_##s(30), 400 + 29 + 101 * (b));                    \
    CHECK_EQ_LONG(t_itlong_##s(3) * 100 + t_itlong_##s(30), 1300 + 30 + 101 * (b));           \
    CHECK_EQ_LONG(t_itlit_##s(0) * 100 + t_itlit_##s(8), 55500 + 8 + 101 * (b));              \
    CHECK_EQ_LONG(t_itb_##s(5) * 100 + t_itb_##s(6), 9900 + 7 + 101 * (b));                   \
    CHECK_EQ_LONG(t_bl_##s(20), 41 + (b));                                                   \
    CHECK_EQ_LONG(t_bllast_##s(20), 41 + (b));                                               \
    CHECK_EQ_LONG(t_blx_##s(20), 41 + (b));                                                  \
    CHECK_EQ_LONG(t_litin_##s(0), 31337 + (b));                                              \
    CHECK_EQ_LONG(t_unal_##s(1), 22 + (b));                                                  \
    CHECK_EQ_LONG(a_lit_##s(1), 3001 + (b));                                                 \
    CHECK_EQ_LONG(a_pic_##s(1), 4243 + (b));                                                 \
    CHECK_EQ_LONG(a_bcond_##s(0) * 1000 + a_bcond_##s(1), 200100 + 1001 * (b));              \
    CHECK_EQ_LONG(a_bl_##s(20), 41 + (b));                                                   \
    CHECK_EQ_LONG(a_blx_##s(20), 41 + (b));                                                  \
    CHECK_EQ_LONG(a_adr_##s(1), 56 + (b));                                                   \
    CHECK_EQ_LONG(a_movpc_##s(0), (long)(uintptr_t)a_movpc_##s + 8 + (b));                  \
    CHECK_EQ_LONG(a_condlit_##s(0) * 1000 + a_condlit_##s(4), 606004 + 1001 * (b));          \
  } while (0)
/* ...and of those the far patch refuses or leaves out */
#define OTHER_RESULTS(s, b_tiny, b_loop)                                                     \
  do {                                                                                       \
    CHECK_EQ_LONG(t_tiny_##s(1), 4 + (b_tiny));                                              \
    CHECK_EQ_LONG(t_loop_##s(10), 10 + (b_loop));                                            \
    CHECK_EQ_LONG(t_bxpc_##s(1), 6);                                                         \
    CHECK_EQ_LONG(t_tbb_##s(0) * 100 + t_tbb_##s(1), 1020);                                   \
  } while (0)

/* The functions both patches hook, with the bytes each near (n) and far
 * (f) window covers. */
#define HOOK_ALL(s, far, W)                                                                  \
  do {                                                                                       \
    HOOK_OK_AS(t_lit, s, far, W(6, 8));       /* ldr.n, ldr.w | adds */                      \
    HOOK_OK_AS(t_ldrd, s, far, W(4, 8));                                                     \
    HOOK_OK_AS(t_vldr, s, far, W(4, 8));                                                     \
    HOOK_OK_AS(t_adr, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(t_adrw, s, far, W(4, 8));                                                     \
    HOOK_OK_AS(t_pic, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(t_cbz, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(t_cbnz, s, far, W(4, 8));                                                     \
    HOOK_OK_AS(t_bcondw, s, far, W(6, 8));                                                   \
    HOOK_OK_AS(t_it, s, far, W(8, 8));        /* the IT block taken whole */                 \
    HOOK_OK_AS(t_itlong, s, far, W(12, 12));                                                 \
    HOOK_OK_AS(t_itlit, s, far, W(6, 8));                                                    \
    HOOK_OK_AS(t_itb, s, far, W(6, 8));                                                      \
    HOOK_OK_AS(t_bl, s, far, W(6, 8));                                                       \
    HOOK_OK_AS(t_bllast, s, far, W(4, 8));                                                   \
    HOOK_OK_AS(t_blx, s, far, W(6, 8));                                                      \
    HOOK_OK_AS(t_litin, s, far, W(4, 8));                                                    \
    HOOK_OK_AS(t_unal, s, far, W(4, 10));                                                    \
    HOOK_OK_AS(a_lit, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(a_pic, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(a_bcond, s, far, W(4, 8));                                                    \
    HOOK_OK_AS(a_bl, s, far, W(4, 8));                                                       \
    HOOK_OK_AS(a_blx, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(a_adr, s, far, W(4, 8));                                                      \
    HOOK_OK_AS(a_vldr, s, far, W(4, 8));                                                     \
    HOOK_OK_AS(a_movpc, s, far, W(4, 8));                                                    \
    HOOK_OK_AS(a_condlit, s, far, W(4, 8));                                                  \
  } while (0)
#define NEAR_W(n, f) (n)
#define FAR_W(n, f) (f)

static long calls_n(void)
{
#define SUM_N(name) +name##_n_calls
  return 0 LONG_FNS(SUM_N) DOUBLE_FNS(SUM_N);
}
static long calls_f(void)
{
#define SUM_F(name) +name##_f_calls
  return 0 LONG_FNS(SUM_F) DOUBLE_FNS(SUM_F);
}

static void test_near(void)
{
  CHECK_EQ_LONG(arch_patch_size_near(), 4);
  HOOK_ALL(n, 0, NEAR_W);
  HOOK_OK_AS(t_tiny, n, 0, 4);
  /* mov r1, pc: the value (+4) is the end of the near window */
  HOOK_OK_AS(t_movpc, n, 0, 4);
  REFUSED(t_loop, n, HOOK_ERR_BRANCH_INTO_PATCH, "bne at +0x6 branches to +0x2, inside the patched bytes");
  REFUSED(t_bxpc, n, HOOK_ERR_UNRELOCATABLE, "bx at +0x0: branches to pc");
  REFUSED(t_tbb, n, HOOK_ERR_UNRELOCATABLE, "tbb at +0x0: a table branch relative to pc");
  RESULTS(n, BONUS);
  OTHER_RESULTS(n, BONUS, 0);
  CHECK_EQ_LONG(t_movpc_n(0), (long)(((uintptr_t)t_movpc_n & ~(uintptr_t)1) + 4) + BONUS);
  /* every hooked call ran its replacement once: 37 in RESULTS, t_tiny, t_movpc */
  CHECK_EQ_LONG(calls_n(), 39);
}

static void test_far(void)
{
  CHECK_EQ_LONG(arch_patch_size_far(), 8);
  tramp_pool_refuse_near(1);
  HOOK_ALL(f, 1, FAR_W);
  REFUSED(t_tiny, f, HOOK_ERR_TOO_SHORT, "function too short for the absolute-jump patch");
  /* inside the far window, pc's value could be a return address into bytes
   * the patch replaces */
  REFUSED(t_movpc, f, HOOK_ERR_UNRELOCATABLE, "mov at +0x0 refers to +0x4, inside the patch window");
  /* the bne is inside the far window itself: the relocator refuses first */
  REFUSED(t_loop, f, HOOK_ERR_UNRELOCATABLE, "bne at +0x6 branches to +0x2, inside the patch window");
  REFUSED(t_bxpc, f, HOOK_ERR_UNRELOCATABLE, "bx at +0x0: branches to pc");
  REFUSED(t_tbb, f, HOOK_ERR_UNRELOCATABLE, "tbb at +0x0: a table branch relative to pc");
  tramp_pool_refuse_near(0);
  RESULTS(f, BONUS);
  OTHER_RESULTS(f, 0, 0);
  CHECK_EQ_LONG(t_movpc_f(0), (long)(((uintptr_t)t_movpc_f & ~(uintptr_t)1) + 4));
  CHECK_EQ_LONG(calls_f(), 37);
}

int main(void)
{
  /* unhooked, every function gives the documented result */
  RESULTS(f, 0);
  OTHER_RESULTS(f, 0, 0);
  CHECK_EQ_LONG(t_movpc_f(0), (long)(((uintptr_t)t_movpc_f & ~(uintptr_t)1) + 4));
  test_near();
  test_far();
  return check_report("hook.arm_api");
}
