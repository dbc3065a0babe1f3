/* Relocator unit tests (x86_64).
 *
 *   relocate patterns   hand-written windows covering each PC-relative form,
 *                       each compared with the exact bytes expected and
 *                       checked by the independent verifier;
 *   relocate sweep      the entry window of every exported function of this
 *                       machine's libc, libm, libstdc++ and libz, relocated to
 *                       a near destination (rel32 forms) and to one 12 GiB
 *                       away (absolute forms), every result checked by the
 *                       verifier.
 * Nothing is executed and nothing is patched: arch_relocate() only reads the
 * source bytes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>

#include "arch.h"
#include "check.h"
#include "elf_symbols.h"
#include "hook_internal.h"
#include "reloc_verify.h"

#define SRC_PC ((uint64_t)0x7f1234500000)
#define NEAR_PC (SRC_PC + 0x1000)
#define FAR_PC (SRC_PC - 0x300000000)

struct pattern {
  const char *name;
  uint8_t code[24];
  size_t code_len;
  size_t size;              /* function size given to the relocator (0 = unknown) */
  size_t min_bytes;         /* 5 (near patch) or 14 (far patch) */
  uint64_t dst_pc;
  enum arch_reloc_status status;
  size_t consumed;          /* expected window on success */
  uint8_t expect[48];       /* expected relocated bytes (before the jump back); filled in by fixup */
  size_t expect_len;
  const char *reason_has;   /* expected substring of the reason on failure */
};

static void put32(uint8_t *p, int64_t v) { int32_t x = (int32_t)v; memcpy(p, &x, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static struct verify_forms forms;

static void run_pattern(struct pattern *t)
{
  uint8_t src[64];
  memset(src, 0x90, sizeof src); /* nops after the pattern */
  memcpy(src, t->code, t->code_len);
  uint8_t out[256];
  struct arch_relocation rel;
  enum arch_reloc_status st =
      arch_relocate(src, SRC_PC, t->min_bytes, t->size, out, t->dst_pc, sizeof out - 16, &rel);
  if (st != t->status) {
    fprintf(stderr, "pattern %s: status %d, expected %d (%s)\n", t->name, st, t->status, rel.reason);
    check_failures++;
    return;
  }
  if (st != ARCH_RELOC_OK) {
    if (t->reason_has && !strstr(rel.reason, t->reason_has)) {
      fprintf(stderr, "pattern %s: reason \"%s\" lacks \"%s\"\n", t->name, rel.reason, t->reason_has);
      check_failures++;
    }
    return;
  }
  CHECK_EQ_LONG(rel.consumed, t->consumed);
  if (rel.written != t->expect_len || memcmp(out, t->expect, t->expect_len) != 0) {
    fprintf(stderr, "pattern %s: relocated bytes differ:\n  got     ", t->name);
    for (size_t i = 0; i < rel.written; i++) fprintf(stderr, " %02x", out[i]);
    fprintf(stderr, "\n  expected");
    for (size_t i = 0; i < t->expect_len; i++) fprintf(stderr, " %02x", t->expect[i]);
    fprintf(stderr, "\n");
    check_failures++;
  }
  size_t n = rel.written + arch_write_jump(out + rel.written, t->dst_pc + rel.written,
                                           SRC_PC + rel.consumed);
  char why[200];
  if (verify_relocation(src, SRC_PC, rel.consumed, out, t->dst_pc, n, &forms, why, sizeof why)) {
    fprintf(stderr, "pattern %s: verifier: %s\n", t->name, why);
    check_failures++;
  }
}

#define BYTES(...) {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__})

static int test_patterns(void)
{
  struct pattern p[] = {
    {"endbr64 push mov", BYTES(0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5), 64, 5, NEAR_PC,
     ARCH_RELOC_OK, 5, {0xf3, 0x0f, 0x1e, 0xfa, 0x55}, 5, NULL},
    {"stack protector fs:0x28", BYTES(0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0),
     64, 5, NEAR_PC, ARCH_RELOC_OK, 13,
     {0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}, 13, NULL},
    {"multi-byte nop + 66 prefix", BYTES(0x66, 0x0f, 0x1f, 0x44, 0, 0), 64, 5, NEAR_PC, ARCH_RELOC_OK, 6,
     {0x66, 0x0f, 0x1f, 0x44, 0, 0}, 6, NULL},
    {"mov rax,[rip+0x10] near", BYTES(0x48, 0x8b, 0x05, 0x10, 0, 0, 0), 64, 5, NEAR_PC, ARCH_RELOC_OK, 7,
     {0x48, 0x8b, 0x05}, 7, NULL},
    {"mov r13,[rip+0x10] far", BYTES(0x4c, 0x8b, 0x2d, 0x10, 0, 0, 0, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90),
     64, 14, FAR_PC, ARCH_RELOC_OK, 14, {0x49, 0xbd}, 14 + 7, NULL},
    {"lea rdi,[rip+0x100] far", BYTES(0x48, 0x8d, 0x3d, 0, 1, 0, 0), 64, 5, FAR_PC, ARCH_RELOC_OK, 7,
     {0x48, 0xbf}, 10, NULL},
    {"lea r12,[rip+0x100] far", BYTES(0x4c, 0x8d, 0x25, 0, 1, 0, 0), 64, 5, FAR_PC, ARCH_RELOC_OK, 7,
     {0x49, 0xbc}, 10, NULL},
    {"mov dword [rip+0x10],1 near", BYTES(0xc7, 0x05, 0x10, 0, 0, 0, 1, 0, 0, 0), 64, 5, NEAR_PC,
     ARCH_RELOC_OK, 10, {0xc7, 0x05}, 10, NULL},
    {"cmp qword [rip+0x20],0 far", BYTES(0x48, 0x83, 0x3d, 0x20, 0, 0, 0, 0), 64, 5, FAR_PC,
     ARCH_RELOC_OK, 8, {0x48, 0x8d, 0x64, 0x24, 0x80, 0x50, 0x48, 0xb8}, 29, NULL},
    {"add rax,[rip+0x40] far", BYTES(0x48, 0x03, 0x05, 0x40, 0, 0, 0), 64, 5, FAR_PC, ARCH_RELOC_OK, 7,
     {0x48, 0x8d, 0x64, 0x24, 0x80, 0x51, 0x48, 0xb9}, 28, NULL},
    {"add rax,[rip+0x40] far, REX.B", BYTES(0x49, 0x03, 0x05, 0x40, 0, 0, 0), 64, 5, FAR_PC,
     ARCH_RELOC_OK, 7, {0x48, 0x8d, 0x64, 0x24, 0x80, 0x51, 0x48, 0xb9}, 28, NULL},
    /* VEX3 with B set (ignored by rip addressing, but it would make [rax] [r8]) */
    {"vaddsd xmm9,xmm2,[rip+0x40] far", BYTES(0xc4, 0x41, 0x6b, 0x58, 0x0d, 0x40, 0, 0, 0), 64, 5, FAR_PC,
     ARCH_RELOC_OK, 9, {0x48, 0x8d, 0x64, 0x24, 0x80, 0x50, 0x48, 0xb8}, 30, NULL},
    {"push qword [rip+0x10] far", BYTES(0xff, 0x35, 0x10, 0, 0, 0), 64, 5, FAR_PC,
     ARCH_RELOC_UNRELOCATABLE, 0, {0}, 0, "push at +0x0: rip-relative operand out of"},
    {"jmp qword [rip+0x10] far", BYTES(0xff, 0x25, 0x10, 0, 0, 0), 64, 5, FAR_PC,
     ARCH_RELOC_UNRELOCATABLE, 0, {0}, 0, "jmp at +0x0: rip-relative operand out of"},
    {"vmovdqa ymm0,[rip+0x40] near", BYTES(0xc5, 0xfd, 0x6f, 0x05, 0x40, 0, 0, 0), 64, 5, NEAR_PC,
     ARCH_RELOC_OK, 8, {0xc5, 0xfd, 0x6f, 0x05}, 8, NULL},
    {"je +0x20 near", BYTES(0x74, 0x20), 64, 5, NEAR_PC, ARCH_RELOC_OK, 5, {0x0f, 0x84}, 6 + 3, NULL},
    {"je +0x20 far", BYTES(0x74, 0x20), 64, 5, FAR_PC, ARCH_RELOC_OK, 5,
     {0x75, 0x0e, 0xff, 0x25, 0, 0, 0, 0}, 16 + 3, NULL},
    {"jne rel32 near", BYTES(0x0f, 0x85, 0x00, 0x10, 0, 0), 64, 5, NEAR_PC, ARCH_RELOC_OK, 6,
     {0x0f, 0x85}, 6, NULL},
    {"jmp short", BYTES(0xeb, 0x10), 64, 5, NEAR_PC, ARCH_RELOC_OK, 5, {0xe9}, 5 + 3, NULL},
    {"call rel32 (-mfentry)", BYTES(0xe8, 0, 1, 0, 0), 64, 5, NEAR_PC, ARCH_RELOC_OK, 5, {0xe8}, 5, NULL},
    {"call rel32 far", BYTES(0xe8, 0, 1, 0, 0), 64, 5, FAR_PC, ARCH_RELOC_OK, 5,
     {0xff, 0x15, 2, 0, 0, 0, 0xeb, 8}, 16, NULL},
    {"jrcxz", BYTES(0xe3, 0x10), 64, 5, NEAR_PC, ARCH_RELOC_OK, 5, {0xe3, 0x02, 0xeb, 0x05, 0xe9}, 9 + 3,
     NULL},
    {"loop backwards far", BYTES(0xe2, 0xf0), 64, 5, FAR_PC, ARCH_RELOC_OK, 5,
     {0xe2, 0x02, 0xeb, 0x0e, 0xff, 0x25, 0, 0, 0, 0}, 18 + 3, NULL},
    {"xbegin", BYTES(0xc7, 0xf8, 0, 1, 0, 0), 64, 5, NEAR_PC, ARCH_RELOC_UNRELOCATABLE, 0, {0}, 0,
     "xbegin"},
    {"branch into the window", BYTES(0x74, 0x01, 0x90, 0x90, 0x90), 64, 5, NEAR_PC,
     ARCH_RELOC_UNRELOCATABLE, 0, {0}, 0, "branch inside the patch window to +0x3"},
    {"ret, size unknown", BYTES(0xc3), 0, 5, NEAR_PC, ARCH_RELOC_TOO_SHORT, 0, {0}, 0, "code flow ends"},
    {"window past the symbol", BYTES(0x31, 0xc0, 0x48, 0x89, 0xe5, 0xc3), 4, 5, NEAR_PC,
     ARCH_RELOC_TOO_SHORT, 0, {0}, 0, "function is 4 bytes"},
    {"invalid opcode", BYTES(0x06), 64, 5, NEAR_PC, ARCH_RELOC_UNDECODABLE, 0, {0}, 0, "invalid instruction"},
  };
  size_t n = sizeof p / sizeof p[0];
  /* Complete the expected bytes whose displacements depend on the addresses. */
  for (size_t i = 0; i < n; i++) {
    struct pattern *t = &p[i];
    uint8_t *e = t->expect;
    const char *nm = t->name;
    if (!strcmp(nm, "mov rax,[rip+0x10] near"))
      put32(e + 3, (int64_t)(SRC_PC + 7 + 0x10) - (int64_t)(NEAR_PC + 7));
    else if (!strcmp(nm, "mov r13,[rip+0x10] far")) {
      put64(e + 2, SRC_PC + 7 + 0x10);
      memcpy(e + 10, (uint8_t[]){0x4d, 0x8b, 0x6d, 0x00}, 4); /* mov r13,[r13+0] */
      memset(e + 14, 0x90, 7);
      t->expect_len = 14 + 7;
    } else if (!strcmp(nm, "cmp qword [rip+0x20],0 far")) {
      /* lea rsp,[rsp-128]; push rax; mov rax, data; cmp qword [rax], 0; pop rax; lea rsp,[rsp+128] */
      put64(e + 8, SRC_PC + 8 + 0x20);
      memcpy(e + 16, (uint8_t[]){0x48, 0x83, 0x38, 0x00, 0x58, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}, 13);
    } else if (!strcmp(nm, "add rax,[rip+0x40] far") || !strcmp(nm, "add rax,[rip+0x40] far, REX.B")) {
      /* rax is the instruction's own: the scratch is rcx */
      put64(e + 8, SRC_PC + 7 + 0x40);
      memcpy(e + 16, (uint8_t[]){0x48, 0x03, 0x01, 0x59, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}, 12);
    } else if (!strcmp(nm, "vaddsd xmm9,xmm2,[rip+0x40] far")) {
      /* three-byte VEX: its inverted B bit must say "no extension" for [rax] */
      put64(e + 8, SRC_PC + 9 + 0x40);
      memcpy(e + 16, (uint8_t[]){0xc4, 0x61, 0x6b, 0x58, 0x08, 0x58, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}, 14);
    } else if (!strcmp(nm, "lea rdi,[rip+0x100] far") || !strcmp(nm, "lea r12,[rip+0x100] far"))
      put64(e + 2, SRC_PC + 7 + 0x100);
    else if (!strcmp(nm, "mov dword [rip+0x10],1 near")) {
      put32(e + 2, (int64_t)(SRC_PC + 10 + 0x10) - (int64_t)(NEAR_PC + 10));
      memcpy(e + 6, (uint8_t[]){1, 0, 0, 0}, 4);
    } else if (!strcmp(nm, "vmovdqa ymm0,[rip+0x40] near"))
      put32(e + 4, (int64_t)(SRC_PC + 8 + 0x40) - (int64_t)(NEAR_PC + 8));
    else if (!strcmp(nm, "je +0x20 near")) {
      put32(e + 2, (int64_t)(SRC_PC + 2 + 0x20) - (int64_t)(NEAR_PC + 6));
      memset(e + 6, 0x90, 3);
    } else if (!strcmp(nm, "je +0x20 far")) {
      put64(e + 8, SRC_PC + 2 + 0x20);
      memset(e + 16, 0x90, 3);
    } else if (!strcmp(nm, "jne rel32 near"))
      put32(e + 2, (int64_t)(SRC_PC + 6 + 0x1000) - (int64_t)(NEAR_PC + 6));
    else if (!strcmp(nm, "jmp short")) {
      put32(e + 1, (int64_t)(SRC_PC + 2 + 0x10) - (int64_t)(NEAR_PC + 5));
      memset(e + 5, 0x90, 3);
    } else if (!strcmp(nm, "call rel32 (-mfentry)"))
      put32(e + 1, (int64_t)(SRC_PC + 5 + 0x100) - (int64_t)(NEAR_PC + 5));
    else if (!strcmp(nm, "call rel32 far"))
      put64(e + 8, SRC_PC + 5 + 0x100);
    else if (!strcmp(nm, "jrcxz")) {
      put32(e + 5, (int64_t)(SRC_PC + 2 + 0x10) - (int64_t)(NEAR_PC + 9));
      memset(e + 9, 0x90, 3);
    } else if (!strcmp(nm, "loop backwards far")) {
      put64(e + 10, SRC_PC + 2 - 0x10);
      memset(e + 18, 0x90, 3);
    }
  }
  for (size_t i = 0; i < n; i++)
    run_pattern(&p[i]);
  return check_report("hook.relocate_patterns");
}

/* ---- sweep over real libraries ------------------------------------------- */

struct sweep {
  const char *lib;
  void *handle;
  unsigned long attempted[2], relocated[2], mismatches;
  unsigned long refused[2][5];
};

static void sweep_one(struct sweep *s, const char *name, uintptr_t fn, size_t size)
{
  for (int far = 0; far <= 1; far++) {
    size_t min = far ? arch_patch_size_far() : arch_patch_size_near();
    if (size && size < min)
      continue;
    uint64_t dst = far ? (fn > 0x400000000 ? fn - 0x300000000 : fn + 0x300000000) : fn + 0x10000000;
    uint8_t out[512];
    struct arch_relocation rel;
    s->attempted[far]++;
    enum arch_reloc_status st =
        arch_relocate((const void *)fn, fn, min, size, out, dst, sizeof out - 16, &rel);
    if (st != ARCH_RELOC_OK) {
      s->refused[far][st]++;
      continue;
    }
    s->relocated[far]++;
    size_t n = rel.written + arch_write_jump(out + rel.written, dst + rel.written, fn + rel.consumed);
    char why[200];
    if (verify_relocation((const uint8_t *)fn, fn, rel.consumed, out, dst, n, &forms, why,
                          sizeof why)) {
      fprintf(stderr, "%s: %s (%s): %s\n", s->lib, name, far ? "far" : "near", why);
      s->mismatches++;
    }
  }
}

static int sweep_symbol(const struct elf_symbol *sym, void *arg)
{
  struct sweep *s = arg;
  uintptr_t fn = sym->address;
  size_t size = sym->size;
  if (sym->type == STT_GNU_IFUNC) {
    void *impl = sym->version ? dlvsym(s->handle, sym->name, sym->version) : dlsym(s->handle, sym->name);
    if (!impl)
      return 0;
    fn = (uintptr_t)impl;
    size = hook_function_size(fn);
  } else if (sym->type != STT_FUNC) {
    return 0;
  }
  sweep_one(s, sym->name, fn, size);
  return 0;
}

static int test_sweep(void)
{
  const char *libs[] = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libz.so.1"};
  /* Floors at the figures this machine's libraries reach (Debian 12). Far
   * refusals are RIP-relative operands the scratch-register form cannot take
   * (push/call/jmp through memory, EVEX) whose data a trampoline 12 GiB away
   * cannot address. */
  const double near_floor[] = {100.0, 100.0, 100.0, 100.0};
  const double far_floor[] = {98.9, 99.0, 99.9, 100.0};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
    struct sweep s = {libs[i], dlopen(libs[i], RTLD_NOW), {0}, {0}, 0, {{0}}};
    CHECK(s.handle != NULL);
    struct link_map *lm = NULL;
    CHECK(dlinfo(s.handle, RTLD_DI_LINKMAP, &lm) == 0);
    struct elf_symbols es;
    CHECK(elf_symbols_open(&es, lm->l_name, lm->l_addr) == 0);
    elf_symbols_each(&es, ELF_SYMBOLS_DYNAMIC, sweep_symbol, &s);
    elf_symbols_close(&es);
    for (int far = 0; far <= 1; far++) {
      double pct = 100.0 * (double)s.relocated[far] / (double)s.attempted[far];
      printf("%s %s: relocated %lu of %lu (%.2f%%); refused: undecodable %lu, unrelocatable %lu, "
             "too-short %lu\n",
             s.lib, far ? "far " : "near", s.relocated[far], s.attempted[far], pct,
             s.refused[far][ARCH_RELOC_UNDECODABLE], s.refused[far][ARCH_RELOC_UNRELOCATABLE],
             s.refused[far][ARCH_RELOC_TOO_SHORT]);
      CHECK(s.attempted[far] >= 50);
      /* floors: what this machine's libraries reach (see docs/hook-engine.md) */
      CHECK(pct >= (far ? far_floor[i] : near_floor[i]));
    }
    CHECK_EQ_LONG(s.mismatches, 0);
  }
  printf("forms: copied %lu, rip operand %lu, rip rewritten %lu, rip via scratch %lu, jmp %lu, "
         "jmp abs %lu, call %lu, call abs %lu, jcc %lu, jcc abs %lu, loop/jrcxz %lu\n",
         forms.copied, forms.rip_operand, forms.rip_rewritten, forms.rip_scratch, forms.jmp, forms.jmp_abs,
         forms.call, forms.call_abs, forms.jcc, forms.jcc_abs, forms.loop_like);
  /* the real prologues exercise every form but loop/jrcxz (covered by patterns) */
  CHECK(forms.copied && forms.rip_operand && forms.rip_rewritten && forms.rip_scratch && forms.jmp &&
        forms.jmp_abs &&
        forms.call && forms.call_abs && forms.jcc && forms.jcc_abs);
  return check_report("hook.relocate_sweep");
}

int main(int argc, char **argv)
{
  if (argc == 2 && !strcmp(argv[1], "patterns"))
    return test_patterns();
  if (argc == 2 && !strcmp(argv[1], "sweep"))
    return test_sweep();
  fprintf(stderr, "usage: %s patterns|sweep\n", argv[0]);
  return 2;
}
