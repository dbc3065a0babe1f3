/* hook.aarch64_relocate: the AArch64 backend (src/arch/aarch64.c) checked on
 * the build host, whatever it is: the file is plain C and is compiled into
 * this program; nothing it writes is executed here. Capstone, which shares
 * no code with it, decodes the inputs and the outputs (aarch64_verify.h).
 *
 *   aarch64_relocate patterns      hand-assembled windows with every
 *                                  PC-relative class, relocated to five
 *                                  destinations (near and far, both ways);
 *                                  real prologues of Debian's arm64 libc;
 *                                  refusals with their exact reasons; the
 *                                  writers, readers and the branch-scan bound
 *   aarch64_relocate sweep ELF...  every exported function of arm64 ELF
 *                                  files relocated near and far and verified;
 *                                  the decoder's classification and the scan
 *                                  bound against Capstone on every word
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aarch64_verify.h"
#include "arch.h"
#include "check.h"

static csh cs;

#define SRC_PC 0x10000000u /* where the hand-written windows run */
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* Destinations: in reach of every short form, of b only (both ways),
 * beyond b but within adrp, beyond adrp. */
static const int64_t destinations[] = {0x800, 64 * MiB, -64 * (int64_t)MiB, GiB, 1024 * GiB};
#define NDEST (sizeof destinations / sizeof destinations[0])

/* Capstone's text for n words at pc, "mnemonic operands; ..." */
static const char *disasm(const uint32_t *words, size_t n, uint64_t pc)
{
  static char text[1024];
  size_t len = 0;
  text[0] = 0;
  for (size_t i = 0; i < n; i++) {
    cs_insn *in;
    size_t k = cs_disasm(cs, (const uint8_t *)&words[i], 4, pc + 4 * i, 1, &in);
    len += (size_t)snprintf(text + len, sizeof text - len, "%s%s%s%s", i ? "; " : "",
                            k ? in->mnemonic : "(invalid)", k && in->op_str[0] ? " " : "",
                            k ? in->op_str : "");
    if (k)
      cs_free(in, k);
  }
  return text;
}

static int relocate_and_verify(const uint32_t *window, size_t nwords, uint64_t src, size_t min,
                               size_t limit, uint64_t dst, uint32_t *out, size_t *written,
                               const char *what)
{
  struct arch_relocation rel;
  size_t cap = 4 * 64;
  enum arch_reloc_status st = arch_relocate(window, src, min, limit, out, dst, cap, &rel);
  if (st != ARCH_RELOC_OK) {
    fprintf(stderr, "%s: relocation to 0x%" PRIx64 " refused: %s\n", what, dst, rel.reason);
    check_failures++;
    return 0;
  }
  char why[256];
  if (rel.consumed > 4 * nwords ||
      !verify_relocation(cs, (const uint8_t *)window, rel.consumed, src, (const uint8_t *)out,
                         rel.written, dst, why, sizeof why)) {
    fprintf(stderr, "%s: relocated to 0x%" PRIx64 ": %s\n  original:  %s\n", what, dst, why,
            disasm(window, rel.consumed / 4, src));
    fprintf(stderr, "  relocated: %s\n", disasm(out, rel.written / 4, dst));
    check_failures++;
    return 0;
  }
  *written = rel.written;
  return 1;
}

/* ---- hand-written windows ---------------------------------------------------- */

struct pattern {
  const char *text;      /* Capstone's disassembly of the input at SRC_PC */
  unsigned nwords;
  uint32_t words[6];
  unsigned min;          /* patch bytes to cover */
};

static const struct pattern patterns[] = {
    {"b #0x10000040", 1, {0x14000010}, 4},
    {"b #0xffff000", 1, {0x17fffc00}, 4},
    {"bl #0x10000200", 1, {0x94000080}, 4},
    {"b.ne #0x10000080", 1, {0x54000401}, 4},
    {"b.al #0x10000080", 1, {0x5400040e}, 4},
    {"cbz x0, #0x10000080", 1, {0xb4000400}, 4},
    {"cbnz w1, #0xfffffc0", 1, {0x35fffe01}, 4},
    {"tbz w0, #3, #0x10000080", 1, {0x36180400}, 4},
    {"tbnz x5, #0x3f, #0x10000080", 1, {0xb7f80405}, 4},
    {"adr x0, #0x10001235", 1, {0x300091a0}, 4},
    {"adr x0, #0xfff0000", 1, {0x10f80000}, 4},
    {"adrp x1, #0x10005000", 1, {0xb0000021}, 4},
    {"adrp x30, #0xf000000", 1, {0x90ff801e}, 4},
    {"ldr w0, #0x10000100", 1, {0x18000800}, 4},
    {"ldr x1, #0x10000104", 1, {0x58000821}, 4},
    {"ldrsw x2, #0x10000108", 1, {0x98000842}, 4},
    {"ldr s3, #0x1000010c", 1, {0x1c000863}, 4},
    {"ldr d4, #0x10000110", 1, {0x5c000884}, 4},
    {"ldr q5, #0x10000118", 1, {0x9c0008c5}, 4},
    {"ldr q6, #0x10000120", 1, {0x9c000906}, 4},
    {"ldr x30, #0x10000100", 1, {0x5800081e}, 4},
    {"ldr xzr, #0x10000100", 1, {0x5800081f}, 4},
    {"prfm pldl1keep, #0x10000100", 1, {0xd8000800}, 4},
    {"stp x29, x30, [sp, #-0x10]!", 1, {0xa9bf7bfd}, 4},
    /* windows of several instructions: a PAC prologue with a far patch, a
     * bti with a conditional, a call not at the end, loads and calls mixed */
    {"hint #0x19; stp x29, x30, [sp, #-0x10]!; mov x29, sp; adrp x0, #0x10002000; ldr x0, [x0, #8]",
     5, {0xd503233f, 0xa9bf7bfd, 0x910003fd, 0xd0000000, 0xf9400400}, 20},
    {"hint #0x22; cbz x0, #0x10000044", 2, {0xd503245f, 0xb4000200}, 8},
    {"bl #0x10000100; nop", 2, {0x94000040, 0xd503201f}, 8},
    {"hint #0x22; cbz x0, #0x10000044; bl #0x10000100; nop; ldr q0, #0x10000300", 5,
     {0xd503245f, 0xb4000200, 0x9400003e, 0xd503201f, 0x9c001780}, 20},
    {"mov x1, x0; tbz w1, #0, #0x10000040; ldr x0, #0x10000800; bl #0x10000100", 4,
     {0xaa0003e1, 0x360001e1, 0x58003fc0, 0x9400003d}, 16},
};

/* Exact outputs (Capstone's text of the first `n` words) for a few forms. */
struct exact {
  unsigned pattern;     /* index in patterns[] */
  unsigned dest;        /* index in destinations[] */
  unsigned n;
  const char *text;
};

static const struct exact exacts[] = {
    /* in reach of everything: the same instruction, new displacement */
    {3, 0, 1, "b.ne #0x10000080"},
    {5, 0, 1, "cbz x0, #0x10000080"},
    {13, 0, 1, "ldr w0, #0x10000100"},
    /* 64 MiB: inverted short branch over b; literal through adrp */
    {3, 1, 2, "b.eq #0x14000808; b #0x10000080"},
    {7, 1, 2, "tbnz w0, #3, #0x14000808; b #0x10000080"},
    {8, 1, 2, "tbz x5, #0x3f, #0x14000808; b #0x10000080"},
    {13, 1, 2, "adrp x0, #0x10000000; ldr w0, [x0, #0x100]"},
    {14, 1, 3, "adrp x1, #0x10000000; add x1, x1, #0x104; ldr x1, [x1]"},
    {18, 1, 3, "adrp x17, #0x10000000; add x17, x17, #0x118; ldr q5, [x17]"},
    {19, 1, 2, "adrp x17, #0x10000000; ldr q6, [x17, #0x120]"},
    {22, 1, 1, "nop"},
    /* 1 GiB: beyond b; the absolute jump through x16 */
    {0, 3, 2, "ldr x16, #0x50000808; br x16"},
    {3, 3, 3, "b.eq #0x50000814; ldr x16, #0x5000080c; br x16"},
    /* the last bl returns into the original function */
    {2, 3, 4, "movz x30, #0x4; movk x30, #0x1000, lsl #16; ldr x16, #0x50000810; br x16"},
    {2, 1, 3, "movz x30, #0x4; movk x30, #0x1000, lsl #16; b #0x10000200"},
    /* a bl that is not the last returns into the trampoline */
    {26, 1, 2, "bl #0x10000100; nop"},
    {26, 3, 3, "adr x30, #0x50000814; ldr x16, #0x5000080c; br x16"},
    /* 1 TiB: beyond adrp, the constant is built */
    {11, 4, 2, "movz x1, #0x5000; movk x1, #0x1000, lsl #16"},
    {9, 4, 2, "movz x0, #0x1235; movk x0, #0x1000, lsl #16"},
};

static void test_patterns(void)
{
  for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
    const struct pattern *pt = &patterns[p];
    /* the hand encodings are what they claim to be */
    CHECK_STR(disasm(pt->words, pt->nwords, SRC_PC), pt->text);
    for (size_t d = 0; d < NDEST; d++) {
      uint32_t out[64];
      size_t written = 0;
      uint64_t dst = SRC_PC + 0x800 + (d ? (uint64_t)destinations[d] : 0);
      char what[160];
      snprintf(what, sizeof what, "pattern %zu (%s)", p, pt->text);
      if (!relocate_and_verify(pt->words, pt->nwords, SRC_PC, pt->min, 4 * pt->nwords, dst, out,
                               &written, what))
        continue;
      for (size_t e = 0; e < sizeof exacts / sizeof exacts[0]; e++)
        if (exacts[e].pattern == p && exacts[e].dest == d) {
          if (written / 4 < exacts[e].n) {
            fprintf(stderr, "pattern %zu to %zu: only %zu words\n", p, d, written / 4);
            check_failures++;
            continue;
          }
          CHECK_STR(disasm(out, exacts[e].n, dst), exacts[e].text);
        }
    }
  }
}

/* ---- real prologues (Debian 12's arm64 libc.so.6, glibc 2.36) ---------------- */

struct prologue {
  const char *name;
  uint64_t address;    /* in the file: PC-relative targets depend on it */
  size_t size;
  uint32_t words[8];
};

static const struct prologue prologues[] = {
    {"getenv", 0x3d950, 256, {0xd0000b02, 0xf947d042, 0xa9bc7bfd, 0x910003fd, 0xa90153f3, 0xf9400054, 0xb40006b4, 0x39400002}},
    {"qsort", 0x3e820, 8, {0xd2800004, 0x17ffff3f, 0xd503201f, 0xd503201f, 0xb0000b03, 0xf9473463, 0xa9be7bfd, 0x90000b21}},
    {"strtod", 0x41a24, 24, {0xd0000ae3, 0xf9479463, 0xd53bd044, 0x52800002, 0xf8636883, 0x1400017a, 0xd503201f, 0xa9bb7bfd}},
    {"_IO_puts", 0x6c730, 480, {0xa9bc7bfd, 0x910003fd, 0xa9025bf5, 0xaa0003f5, 0xf0000996, 0xf946fed6, 0xa90153f3, 0xa90363f7}},
    {"setjmp", 0x3a440, 12, {0xd503201f, 0xd2800021, 0x1400001f, 0xd503201f, 0xd503201f, 0xd503201f, 0xd503201f, 0xd503201f}},
    {"strchr", 0x94400, 160, {0xd503201f, 0x927cec02, 0x4e010c20, 0x4c407041, 0x52860063, 0x4e020c64, 0x4e209822, 0x6e208c23}},
    {"fileno", 0x72ac0, 48, {0xb9400001, 0x36680081, 0xb9407000, 0x37f80040, 0xd65f03c0, 0xb0000961, 0xf946e021, 0xd53bd042}},
    {"killpg", 0x3a7a0, 40, {0x37f80060, 0x4b0003e0, 0x14000086, 0xb0000b20, 0xf946e000, 0xd53bd041, 0x528002c2, 0xb8206822}},
    {"sigemptyset", 0x3b140, 48, {0xaa0003e1, 0xb4000080, 0x52800000, 0xf900003f, 0xd65f03c0, 0x90000b21, 0xf946e021, 0xd53bd042}},
    {"iconv_close", 0x27eb0, 60, {0xb100041f, 0x54000100, 0xa9bf7bfd, 0x910003fd, 0x9400015c, 0x7100001f, 0x5a9f03e0, 0xa8c17bfd}},
    {"__assert", 0x342c0, 16, {0xa9bf7bfd, 0xd2800003, 0x910003fd, 0x97ffffcd, 0xf0000b41, 0xf946d821, 0xd53bd042, 0xf8616841}},
    {"swapcontext", 0x49680, 200, {0xd503201f, 0xa90bf81f, 0x1000059e, 0xa914cc12, 0xa915d414, 0xa916dc16, 0xa917e418, 0xa918ec1a}},
    {"_IO_file_read", 0x76f14, 16, {0x294e0c00, 0x37080043, 0x14018bb9, 0x1401a008, 0xa9be7bfd, 0x52848182, 0x910003fd, 0xb9400001}},
    {"sigprocmask", 0x3a960, 48, {0xa9bf7bfd, 0x910003fd, 0x94012e16, 0x35000060, 0xa8c17bfd, 0xd65f03c0, 0xb0000b21, 0xf946e021}},
    {"tolower", 0x34430, 44, {0x11020001, 0x7105fc3f, 0x54000108, 0xf0000b40, 0xf9479400, 0xd53bd042, 0xf8606840, 0xf9400000}},
    {"__libc_secure_getenv", 0x3f800, 28, {0x90000b01, 0xf9471c21, 0xb9400021, 0x35000041, 0x17fff850, 0xd2800000, 0xd65f03c0, 0xd503201f}},
    {"abort", 0x273cc, 472, {0xa9b37bfd, 0x910003fd, 0xa90153f3, 0xd0000bd3, 0xd53bd054, 0xf90013f5, 0x9131c275, 0x90000bc0}},
    {"raise", 0x3a750, 68, {0xa9be7bfd, 0x910003fd, 0xf9000bf3, 0x2a0003f3, 0x94012c88, 0x2a1303e1, 0x9401189a, 0x35000080}},
};

/* Near (4-byte patch) and far (16-byte) windows of each, to 64 MiB and to
 * 1 TiB. Two far windows hold a branch to their own inside: refused. */
static void test_prologues(void)
{
  static const struct {
    const char *name, *reason;
  } refused_far[] = {
      {"killpg", "tbnz at +0x0 branches to +0xc, inside the patch window"},
      {"_IO_file_read", "tbnz at +0x4 branches to +0xc, inside the patch window"},
  };
  int relocated = 0;
  for (size_t i = 0; i < sizeof prologues / sizeof prologues[0]; i++) {
    const struct prologue *p = &prologues[i];
    for (int far = 0; far < 2; far++) {
      size_t min = far ? 16 : 4;
      if (p->size < min)
        continue; /* qsort (8 bytes) and setjmp (12) take only the near patch */
      uint32_t out[64];
      size_t written;
      uint64_t dst = p->address + (far ? 1024 * GiB : 64 * MiB);
      const char *reason = NULL;
      for (size_t k = 0; far && k < sizeof refused_far / sizeof refused_far[0]; k++)
        if (!strcmp(p->name, refused_far[k].name))
          reason = refused_far[k].reason;
      if (reason) {
        struct arch_relocation rel;
        CHECK_EQ_LONG(arch_relocate(p->words, p->address, min, p->size, out, dst, sizeof out, &rel),
                      ARCH_RELOC_UNRELOCATABLE);
        CHECK_STR(rel.reason, reason);
        continue;
      }
      relocated += relocate_and_verify(p->words, 8, p->address, min, p->size, dst, out, &written,
                                       p->name);
    }
  }
  CHECK_EQ_LONG(relocated, 18 + 18 - 2 - 2);
}

/* ---- refusals ------------------------------------------------------------------ */

static void expect_refusal(const uint32_t *words, size_t min, size_t limit, uint64_t dst,
                           size_t cap, enum arch_reloc_status want, const char *reason, int line)
{
  uint32_t out[64];
  struct arch_relocation rel;
  enum arch_reloc_status st = arch_relocate(words, SRC_PC, min, limit, out, dst, cap, &rel);
  if (st != want || strcmp(rel.reason, reason) != 0) {
    fprintf(stderr, "line %d: status %d \"%s\", expected %d \"%s\"\n", line, st, rel.reason, want,
            reason);
    check_failures++;
  }
}
#define REFUSED(w, min, limit, dst, cap, st, reason) \
  expect_refusal(w, min, limit, dst, cap, st, reason, __LINE__)

static void test_refusals(void)
{
  const uint64_t near = SRC_PC + 64 * MiB, far = SRC_PC + 1024 * GiB;
  /* cbz x0, +8 with a 12-byte window */
  static const uint32_t into[] = {0xb4000040, 0xd503201f, 0xd503201f, 0xd65f03c0};
  REFUSED(into, 12, 16, near, 256, ARCH_RELOC_UNRELOCATABLE,
          "cbz at +0x0 branches to +0x8, inside the patch window");
  /* ldr x0, #8: a literal pool inside the window */
  static const uint32_t lit[] = {0x58000040, 0xd65f03c0, 0x12345678, 0x9abcdef0};
  REFUSED(lit, 16, 16, near, 256, ARCH_RELOC_UNRELOCATABLE,
          "ldr at +0x0 refers to +0x8, inside the patch window");
  /* adr x1, #4 */
  static const uint32_t adr_in[] = {0x10000021, 0xd503201f, 0xd503201f, 0xd65f03c0};
  REFUSED(adr_in, 16, 16, near, 256, ARCH_RELOC_UNRELOCATABLE,
          "adr at +0x0 refers to +0x4, inside the patch window");
  /* mov x17, x0; ldr q0, #0x1000 far: the rewrite needs x17 */
  static const uint32_t x17[] = {0xaa0003f1, 0x9c008000, 0xd503201f, 0xd65f03c0};
  REFUSED(x17, 16, 16, far, 256, ARCH_RELOC_UNRELOCATABLE,
          "ldr at +0x4: an earlier instruction may set x17, which the far literal load needs");
  /* mov x16, x0; b +0x1000, beyond b reach */
  static const uint32_t x16[] = {0xaa0003f0, 0x14000400, 0xd503201f, 0xd65f03c0};
  REFUSED(x16, 16, 16, far, 256, ARCH_RELOC_UNRELOCATABLE,
          "b at +0x4: an earlier instruction may set x16, which the absolute jump needs");
  /* ldp x0, x1, [x16], #16 writes x16 back */
  static const uint32_t writeback[] = {0xa8c10600, 0x14000400, 0xd503201f, 0xd65f03c0};
  CHECK_STR(disasm(writeback, 1, SRC_PC), "ldp x0, x1, [x16], #0x10");
  REFUSED(writeback, 16, 16, far, 256, ARCH_RELOC_UNRELOCATABLE,
          "b at +0x4: an earlier instruction may set x16, which the absolute jump needs");
  /* a PLT-like window (adrp x16; ldr x17, [x16, #0x10]; add x16; br x17)... */
  static const uint32_t plt[] = {0x90000090, 0xf9400a11, 0x91004210, 0xd61f0220, 0xd503201f};
  CHECK_STR(disasm(plt, 4, SRC_PC),
            "adrp x16, #0x10010000; ldr x17, [x16, #0x10]; add x16, x16, #0x10; br x17");
  /* ...relocates near and far: its last instruction never reaches the
   * jump back, so x16 stays free for it */
  uint32_t out[64];
  size_t written;
  CHECK(relocate_and_verify(plt, 5, SRC_PC, 16, 20, near, out, &written, "plt near"));
  CHECK(relocate_and_verify(plt, 5, SRC_PC, 16, 20, far, out, &written, "plt far"));
  /* mov x16, x0; nop; nop; nop; (br x16): the far jump back would clobber x16 */
  static const uint32_t keeps_x16[] = {0xaa0003f0, 0xd503201f, 0xd503201f, 0xd503201f, 0xd61f0200};
  REFUSED(keeps_x16, 16, 20, far, 256, ARCH_RELOC_UNRELOCATABLE,
          "an instruction of the window may set x16, which the absolute jump back needs");
  CHECK(relocate_and_verify(keeps_x16, 5, SRC_PC, 16, 20, near, out, &written, "x16 near"));
  /* a function shorter than the window */
  static const uint32_t two[] = {0xd2800000, 0xd65f03c0, 0, 0};
  REFUSED(two, 16, 8, near, 256, ARCH_RELOC_TOO_SHORT,
          "function is 8 bytes, the patch needs 16 bytes of whole instructions");
  /* the flow ends, the size is unknown */
  REFUSED(two, 16, 0, near, 256, ARCH_RELOC_TOO_SHORT,
          "code flow ends after 8 bytes and the function size is unknown");
  /* b as the first instruction, size unknown: a tail call, then nothing */
  static const uint32_t tail[] = {0x14000100, 0xd503201f, 0xd503201f, 0xd503201f};
  REFUSED(tail, 16, 0, near, 256, ARCH_RELOC_TOO_SHORT,
          "code flow ends after 4 bytes and the function size is unknown");
  /* an unallocated encoding (op0 = 0001) and a reserved one */
  static const uint32_t bad[] = {0xd503201f, 0x02000000, 0, 0};
  REFUSED(bad, 8, 16, near, 256, ARCH_RELOC_UNDECODABLE, "invalid instruction at +0x4");
  static const uint32_t reserved[] = {0x00010000};
  REFUSED(reserved, 4, 4, near, 256, ARCH_RELOC_UNDECODABLE, "invalid instruction at +0x0");
  /* retaasppc (PC-relative modifier): not rewritten */
  static const uint32_t pauth_lr[] = {0x5500001f};
  REFUSED(pauth_lr, 4, 4, near, 256, ARCH_RELOC_UNRELOCATABLE,
          "retaasppc at +0x0: this PC-relative form is not relocated");
  /* the destination cannot hold a far b.cond */
  static const uint32_t bcond[] = {0x54000401};
  REFUSED(bcond, 4, 4, far, 8, ARCH_RELOC_NO_SPACE, "trampoline buffer too small");
  /* a misaligned entry */
  struct arch_relocation rel;
  CHECK_EQ_LONG(arch_relocate(two, SRC_PC + 2, 4, 8, out, near, sizeof out, &rel),
                ARCH_RELOC_UNDECODABLE);
  CHECK_STR(rel.reason, "entry is not 4-byte aligned");
}

/* ---- writers, readers, decoder, landing pads ------------------------------------ */

static void test_writers(void)
{
  uint32_t buf[8];
  uintptr_t target = 0;
  CHECK_EQ_LONG(arch_patch_size_near(), 4);
  CHECK_EQ_LONG(arch_patch_size_far(), 16);
  /* b: the last reachable word each way, and one beyond */
  CHECK_EQ_LONG(arch_write_near_jump(buf, 0x10000000, 0x10000000 + (128 * MiB - 4)), 4);
  CHECK_EQ_LONG(buf[0], 0x15ffffff);
  CHECK_EQ_LONG(arch_write_near_jump(buf, 0x10000000, 0x10000000 - 128 * MiB), 4);
  CHECK_EQ_LONG(buf[0], 0x16000000);
  CHECK_EQ_LONG(arch_write_near_jump(buf, 0x10000000, 0x10000000 + 128 * MiB), 0);
  CHECK_EQ_LONG(arch_inline_jump(buf, 0x10000000, &target), 4);
  CHECK(target == 0x10000000 - 128 * MiB);
  /* the far jump: ldr x16, #8; br x16; .quad target */
  CHECK_EQ_LONG(arch_write_far_jump(buf, 0x1000, 0x123456789abcull), 16);
  CHECK(buf[0] == 0x58000050 && buf[1] == 0xd61f0200 && buf[2] == 0x56789abc && buf[3] == 0x1234);
  CHECK_STR(disasm(buf, 2, 0x1000), "ldr x16, #0x1008; br x16");
  CHECK_EQ_LONG(arch_inline_jump(buf, 0x1000, &target), 16);
  CHECK(target == 0x123456789abcull);
  CHECK_EQ_LONG(arch_read_jump(buf, 0x1000, &target), 16);
  CHECK_EQ_LONG(arch_write_jump(buf, 0x1000, 0x2000), 4);
  CHECK_EQ_LONG(arch_write_jump(buf, 0x1000, 0x123456789abcull), 16);
  /* the pointer jump reads the slot when asked (host memory: a real slot) */
  static uintptr_t slot = 0x1122334455667788ull;
  uintptr_t pc = ((uintptr_t)&slot & ~(uintptr_t)0xfff) + 0x40000;
  CHECK_EQ_LONG(arch_write_pointer_jump(buf, pc, (uintptr_t)&slot), 12);
  CHECK_EQ_LONG(arch_read_jump(buf, pc, &target), 12);
  CHECK(target == slot);
  CHECK_EQ_LONG(arch_inline_jump(buf, pc, &target), 0);
  CHECK_EQ_LONG(arch_write_pointer_jump(buf, pc, (uintptr_t)&slot + 1), 0); /* misaligned */
  CHECK_EQ_LONG(arch_write_pointer_jump(buf, (uintptr_t)&slot + 8 * GiB, (uintptr_t)&slot), 0);
  /* traps: brk #0, and a partial word zeroed */
  memset(buf, 0xaa, sizeof buf);
  arch_write_traps(buf, 10);
  CHECK(buf[0] == 0xd4200000 && buf[1] == 0xd4200000 && (buf[2] & 0xffff) == 0 &&
        (buf[2] >> 16) == 0xaaaa);
  CHECK_STR(disasm(buf, 1, 0), "brk #0");
  /* live patches land whole */
  uint32_t live[4] = {0xa9bf7bfd, 0x910003fd, 0xd503201f, 0xd65f03c0};
  uint32_t far_patch[4];
  arch_write_far_jump(far_patch, 0, 0xfedcba9876ull);
  arch_write_live_patch(live, far_patch, 16);
  CHECK(memcmp(live, far_patch, 16) == 0);
  arch_write_live_patch(live, "\x10\x00\x00\x14", 4);
  CHECK(live[0] == 0x14000010 && live[1] == far_patch[1]);
  /* reach for the trampoline pool */
  CHECK(arch_near_reachable(0x10000000, 0x10000000 + 100 * MiB, 0x10000));
  CHECK(!arch_near_reachable(0x10000000, 0x10000000 + 128 * MiB, 0x10000));
  CHECK(!arch_near_reachable(0x10000000 + 128 * MiB - 0x100, 0x10000000, 0x10000));
  CHECK(arch_near_search_radius() < 128 * MiB);
}

static void test_landing_pads(void)
{
  static const uint32_t bti_c = 0xd503245f, bti_jc = 0xd50324df, bti_j = 0xd503249f,
                        paciasp = 0xd503233f, pacibsp = 0xd503237f, nop = 0xd503201f;
  CHECK_EQ_LONG(arch_entry_landing_pad(&bti_c), 4);
  CHECK_EQ_LONG(arch_entry_landing_pad(&bti_jc), 4);
  CHECK_EQ_LONG(arch_entry_landing_pad(&paciasp), 4);
  CHECK_EQ_LONG(arch_entry_landing_pad(&pacibsp), 4);
  CHECK_EQ_LONG(arch_entry_landing_pad(&bti_j), 0); /* not a call target */
  CHECK_EQ_LONG(arch_entry_landing_pad(&nop), 0);
  uint32_t undo = 0;
  CHECK_EQ_LONG(arch_write_pad_undo(&undo, &paciasp), 4);
  CHECK_EQ_LONG(undo, 0xd50323bf); /* autiasp */
  CHECK_EQ_LONG(arch_write_pad_undo(&undo, &pacibsp), 4);
  CHECK_EQ_LONG(undo, 0xd50323ff); /* autibsp */
  CHECK_EQ_LONG(arch_write_pad_undo(&undo, &bti_c), 0);
}

static void test_decode(void)
{
  struct {
    uint32_t word;
    enum arch_insn_kind kind;
    uint64_t target;
    const char *mnemonic;
  } cases[] = {
      {0x14000010, ARCH_INSN_JUMP, SRC_PC + 0x40, "b"},
      {0x97ffffff, ARCH_INSN_CALL, SRC_PC - 4, "bl"},
      {0x54000401, ARCH_INSN_BRANCH, SRC_PC + 0x80, "b.ne"},
      {0xb7f80405, ARCH_INSN_BRANCH, SRC_PC + 0x80, "tbnz"},
      {0xb0000021, ARCH_INSN_PCREL_DATA, SRC_PC + 0x5000, "adrp"},
      {0x98000842, ARCH_INSN_PCREL_DATA, SRC_PC + 0x108, "ldrsw"},
      {0xd65f03c0, ARCH_INSN_END, 0, "ret"},
      {0xd61f0200, ARCH_INSN_END, 0, "br"},
      {0xd63f0200, ARCH_INSN_PLAIN, 0, "blr"},
      {0xd4200000, ARCH_INSN_END, 0, "brk"},
      {0x00000000, ARCH_INSN_END, 0, "udf"},
      {0xa9bf7bfd, ARCH_INSN_PLAIN, 0, "insn"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct arch_insn in;
    CHECK_EQ_LONG(arch_decode(&cases[i].word, 4, SRC_PC, &in), 0);
    CHECK_EQ_LONG(in.kind, cases[i].kind);
    CHECK_EQ_LONG(in.length, 4);
    if (cases[i].target)
      CHECK(in.target == cases[i].target);
    CHECK_STR(in.mnemonic, cases[i].mnemonic);
  }
  struct arch_insn in;
  static const uint32_t bad = 0x02000000;
  CHECK_EQ_LONG(arch_decode(&bad, 4, SRC_PC, &in), -1);
  CHECK_EQ_LONG(arch_decode(&cases[0].word, 3, SRC_PC, &in), -1);
}

static void test_scan_limit(void)
{
  /* window [SRC_PC + 4, SRC_PC + 20) */
  uint32_t code[64];
  for (int i = 0; i < 64; i++)
    code[i] = 0xd503201f;
  uint64_t lo = SRC_PC + 4, hi = SRC_PC + 20;
  CHECK_EQ_LONG(arch_branch_scan_limit(code, sizeof code, SRC_PC, lo, hi), 0);
  code[40] = 0x17ffffd9; /* b back to +0x04 */
  code[50] = 0x17ffffd1; /* b back to +0x0c */
  code[60] = 0x17ffffc8; /* b back to +0x10... */
  CHECK_EQ_LONG(arch_branch_scan_limit(code, sizeof code, SRC_PC, lo, hi), 244);
  code[60] = 0x17ffffc4; /* ...now to +0x00, outside */
  CHECK_STR(disasm(&code[60], 1, SRC_PC + 240), "b #0x10000000");
  CHECK_EQ_LONG(arch_branch_scan_limit(code, sizeof code, SRC_PC, lo, hi), 204);
  code[55] = 0xb4fffd60; /* cbz x0 to +0x88: outside */
  code[56] = 0x36fff940; /* tbz w0, #31... to +0x08 */
  CHECK_STR(disasm(&code[56], 1, SRC_PC + 224), "tbz w0, #0x1f, #0x10000008");
  CHECK_EQ_LONG(arch_branch_scan_limit(code, sizeof code, SRC_PC, lo, hi), 228);
  /* a partial last word is never read */
  CHECK_EQ_LONG(arch_branch_scan_limit(code, 227, SRC_PC, lo, hi), 204);
}

/* ---- the sweep over ELF files --------------------------------------------------- */

struct elf_file {
  const uint8_t *data;
  size_t size;
  const Elf64_Ehdr *eh;
};

static const uint8_t *elf_at(const struct elf_file *f, uint64_t vaddr, size_t len)
{
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(f->data + f->eh->e_phoff);
  for (int i = 0; i < f->eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr &&
        vaddr + len <= ph[i].p_vaddr + ph[i].p_filesz && ph[i].p_offset + ph[i].p_filesz <= f->size)
      return f->data + ph[i].p_offset + (vaddr - ph[i].p_vaddr);
  return NULL;
}

struct sweep_counts {
  long functions, near_ok, far_long, far_ok, mismatches, decode_checked, decode_wrong, scan_branches,
      scan_missed;
  char reasons[16][80];
  long reason_count[16];
  int nreasons;
};

static void count_reason(struct sweep_counts *c, const char *reason)
{
  /* the reason without its offsets: "tbnz at +0x0 branches to +0xc" -> "tbnz branches" */
  char key[80];
  size_t k = 0;
  for (const char *p = reason; *p && k + 1 < sizeof key; p++) {
    if (*p == '+' || (p[0] == '0' && p[1] == 'x')) {
      while (*p && *p != ' ' && *p != ',')
        p++;
      if (!*p)
        break;
    }
    key[k++] = *p;
  }
  key[k] = 0;
  for (int i = 0; i < c->nreasons; i++)
    if (!strcmp(c->reasons[i], key)) {
      c->reason_count[i]++;
      return;
    }
  if (c->nreasons < 16) {
    snprintf(c->reasons[c->nreasons], sizeof c->reasons[0], "%s", key);
    c->reason_count[c->nreasons++] = 1;
  }
}

/* Capstone's PC-relative target of an instruction, or 0. */
static uint64_t capstone_target(const cs_insn *in, int *is_branch)
{
  const cs_arm64 *a = &in->detail->arm64;
  *is_branch = 0;
  switch (in->id) {
  case ARM64_INS_B:
  case ARM64_INS_BL:
  case ARM64_INS_CBZ:
  case ARM64_INS_CBNZ:
  case ARM64_INS_TBZ:
  case ARM64_INS_TBNZ:
    *is_branch = 1;
    return (uint64_t)a->operands[a->op_count - 1].imm;
  case ARM64_INS_ADR:
  case ARM64_INS_ADRP:
    return (uint64_t)a->operands[1].imm;
  case ARM64_INS_LDR:
  case ARM64_INS_LDRSW:
  case ARM64_INS_PRFM:
    return a->op_count == 2 && a->operands[1].type == ARM64_OP_IMM ? (uint64_t)a->operands[1].imm
                                                                    : 0;
  }
  return 0;
}

/* Every word of the function: arch_decode and Capstone agree on which words
 * are PC-relative and where they point, and the scan bound covers every
 * branch into [start + 1, start + 20). */
static void check_body(struct sweep_counts *c, const uint8_t *code, size_t size, uint64_t start)
{
  size_t limit = arch_branch_scan_limit(code, size, start, start + 1, start + 20);
  for (size_t off = 0; off + 4 <= size; off += 4) {
    cs_insn *in;
    size_t n = cs_disasm(cs, code + off, 4, start + off, 1, &in);
    if (n != 1)
      continue;
    int branch;
    uint64_t want = capstone_target(in, &branch);
    struct arch_insn ai;
    int ok = arch_decode(code + off, 4, start + off, &ai) == 0;
    int pcrel = ok && ai.kind != ARCH_INSN_PLAIN && ai.kind != ARCH_INSN_END;
    c->decode_checked++;
    if (want ? !(pcrel && ai.target == want) : pcrel) {
      if (c->decode_wrong++ < 10)
        fprintf(stderr, "decode 0x%" PRIx64 ": %s %s -> kind %d target 0x%" PRIx64 "\n",
                start + off, in->mnemonic, in->op_str, ok ? (int)ai.kind : -1,
                (uint64_t)ai.target);
    }
    if (branch && want > start && want < start + 20) {
      c->scan_branches++;
      if (off + 4 > limit && c->scan_missed++ < 10)
        fprintf(stderr, "scan bound %zu misses %s at 0x%" PRIx64 "\n", limit, in->mnemonic,
                start + off);
    }
    cs_free(in, n);
  }
}

static void sweep_function(struct sweep_counts *c, const char *name, const uint8_t *code,
                           uint64_t start, size_t size)
{
  c->functions++;
  check_body(c, code, size, start);
  size_t keep = size >= 8 ? arch_entry_landing_pad(code) : 0;
  for (int far = 0; far < 2; far++) {
    uint32_t out[64];
    struct arch_relocation rel;
    size_t min = keep + (far ? 16 : 4);
    if (size < min)
      continue; /* the engine would not try: too short for this patch */
    c->far_long += far;
    uint64_t dst = start + (far ? 1024 * GiB : 64 * MiB);
    enum arch_reloc_status st = arch_relocate(code, start, min, size, out, dst, sizeof out, &rel);
    if (st != ARCH_RELOC_OK) {
      if (!rel.reason[0]) {
        fprintf(stderr, "%s: refused without a reason\n", name);
        c->mismatches++;
      }
      count_reason(c, rel.reason);
      continue;
    }
    char why[256];
    if (!verify_relocation(cs, code, rel.consumed, start, (const uint8_t *)out, rel.written, dst,
                           why, sizeof why)) {
      if (c->mismatches++ < 10)
        fprintf(stderr, "%s (%s): %s\n  %s\n", name, far ? "far" : "near", why,
                disasm((const uint32_t *)code, rel.consumed / 4, start));
      continue;
    }
    if (far)
      c->far_ok++;
    else
      c->near_ok++;
  }
}

static int sweep_file(const char *path)
{
  int fd = open(path, O_RDONLY);
  struct stat stbuf;
  if (fd < 0 || fstat(fd, &stbuf) != 0) {
    fprintf(stderr, "%s: cannot open\n", path);
    return 1;
  }
  struct elf_file f = {mmap(NULL, (size_t)stbuf.st_size, PROT_READ, MAP_PRIVATE, fd, 0),
                       (size_t)stbuf.st_size, NULL};
  close(fd);
  f.eh = (const Elf64_Ehdr *)f.data;
  if (f.data == MAP_FAILED || f.size < sizeof *f.eh || memcmp(f.eh->e_ident, ELFMAG, SELFMAG) ||
      f.eh->e_ident[EI_CLASS] != ELFCLASS64 || f.eh->e_machine != EM_AARCH64) {
    fprintf(stderr, "%s: not a 64-bit arm64 ELF file\n", path);
    return 1;
  }
  static struct sweep_counts c;
  memset(&c, 0, sizeof c);
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(f.data + f.eh->e_shoff);
  for (int i = 0; i < f.eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM)
      continue;
    const Elf64_Sym *sym = (const Elf64_Sym *)(f.data + sh[i].sh_offset);
    const char *str = (const char *)(f.data + sh[sh[i].sh_link].sh_offset);
    size_t n = sh[i].sh_size / sizeof *sym;
    uint64_t seen_prev = 0;
    for (size_t k = 0; k < n; k++) {
      int type = ELF64_ST_TYPE(sym[k].st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym[k].st_shndx == SHN_UNDEF ||
          sym[k].st_size < 4 || sym[k].st_value == seen_prev)
        continue;
      const uint8_t *code = elf_at(&f, sym[k].st_value, sym[k].st_size);
      if (!code)
        continue;
      seen_prev = sym[k].st_value;
      sweep_function(&c, str + sym[k].st_name, code, sym[k].st_value, sym[k].st_size);
    }
  }
  printf("%s: %ld functions; relocated near %ld (%.2f%%), far %ld of the %ld long enough "
         "(%.2f%%); %ld verification mismatches\n",
         path, c.functions, c.near_ok, 100.0 * (double)c.near_ok / (double)c.functions, c.far_ok,
         c.far_long, 100.0 * (double)c.far_ok / (double)c.far_long, c.mismatches);
  printf("  decoder vs Capstone: %ld words, %ld disagree; scan bound: %ld branches into entry "
         "windows, %ld missed\n",
         c.decode_checked, c.decode_wrong, c.scan_branches, c.scan_missed);
  for (int i = 0; i < c.nreasons; i++)
    printf("  refused %ld: %s\n", c.reason_count[i], c.reasons[i]);
  CHECK(c.functions > 50);
  CHECK_EQ_LONG(c.mismatches, 0);
  CHECK_EQ_LONG(c.decode_wrong, 0);
  CHECK_EQ_LONG(c.scan_missed, 0);
  /* refusals are rare (a branch into the window, x16 set before a jump
   * that needs it), in any Debian release */
  CHECK(c.near_ok >= c.functions * 99 / 100);
  CHECK(c.far_ok >= c.far_long * 97 / 100);
  munmap((void *)f.data, f.size);
  return 0;
}

int main(int argc, char **argv)
{
  cs = verify_open();
  if (!cs) {
    fprintf(stderr, "aarch64_relocate: Capstone has no arm64 support\n");
    return 2;
  }
  if (argc == 2 && !strcmp(argv[1], "patterns")) {
    test_patterns();
    test_prologues();
    test_refusals();
    test_writers();
    test_landing_pads();
    test_decode();
    test_scan_limit();
  } else if (argc >= 3 && !strcmp(argv[1], "sweep")) {
    for (int i = 2; i < argc; i++)
      if (sweep_file(argv[i]) != 0)
        check_failures++;
  } else {
    fprintf(stderr, "usage: aarch64_relocate patterns | sweep ELF...\n");
    return 2;
  }
  cs_close(&cs);
  return check_report("hook.aarch64_relocate");
}
