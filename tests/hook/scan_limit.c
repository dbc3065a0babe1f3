/* arch_branch_scan_limit(): the raw-byte bound that lets the branch-into-patch
 * scan stop decoding early. It is sound only if every instruction that
 * arch_decode() reports with a branch target ends at or before the bound it
 * gives for that target. Three checks:
 *
 *   opcodes   every one-byte opcode and every 0f / 0f38 / 0f3a opcode, with
 *             every ModRM byte, behind each common prefix combination,
 *             decoded; each branch found must lie within the bound for its
 *             own target, and each opcode form the bound knows must occur;
 *   exact     hand-written regions with the bound they must give;
 *   libraries every function body of libc, libm, libstdc++ and libz decoded
 *             from its start: each branch in it within the bound over the
 *             whole body for its target (so a bounded scan sees every branch
 *             a full one sees).
 * Nothing is executed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>

#include "arch.h"
#include "check.h"
#include "elf_symbols.h"

#if UINTPTR_MAX > 0xffffffffu
#define PC ((uintptr_t)0x7f1234500000)
#else
#define PC ((uintptr_t)0x12345000) /* i386 */
#endif

static int is_branch(const struct arch_insn *in)
{
  return in->kind == ARCH_INSN_BRANCH || in->kind == ARCH_INSN_JUMP || in->kind == ARCH_INSN_CALL;
}

/* The instruction alone as the region, its own target as [lo, lo+1). */
static int within_bound(const uint8_t *code, const struct arch_insn *in)
{
  return arch_branch_scan_limit(code, in->length, in->pc, in->target, in->target + 1) ==
         in->length;
}

static void test_opcodes(void)
{
  static const uint8_t prefixes[][3] = {
      {0}, {1, 0x66}, {1, 0x67}, {1, 0xf2}, {1, 0xf3}, {1, 0x48}, {1, 0x41}, {1, 0x2e},
      {1, 0x3e}, {2, 0x66, 0x48}, {2, 0xf2, 0x48}, {2, 0x66, 0x41}};
  static const uint8_t maps[][3] = {{0}, {1, 0x0f}, {2, 0x0f, 0x38}, {2, 0x0f, 0x3a}};
  unsigned long decoded = 0, branches = 0, outside = 0;
  int seen_rel8[256] = {0}, seen_wide[256] = {0}, seen_xbegin = 0;
  for (size_t pi = 0; pi < sizeof prefixes / sizeof prefixes[0]; pi++)
    for (size_t mi = 0; mi < sizeof maps / sizeof maps[0]; mi++)
      for (unsigned op = 0; op < 256; op++)
        for (unsigned modrm = 0; modrm < 256; modrm++) {
          uint8_t code[32];
          size_t n = 0;
          for (int i = 0; i < prefixes[pi][0]; i++)
            code[n++] = prefixes[pi][1 + i];
          for (int i = 0; i < maps[mi][0]; i++)
            code[n++] = maps[mi][1 + i];
          size_t op_at = n;
          code[n++] = (uint8_t)op;
          code[n++] = (uint8_t)modrm;
          /* displacement / immediate bytes, then filler */
          static const uint8_t tail[] = {0x9a, 0xfe, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12,
                                         0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90};
          memcpy(code + n, tail, sizeof tail);
          n += sizeof tail;
          struct arch_insn in;
          if (arch_decode(code, n, PC, &in) != 0)
            continue;
          decoded++;
          if (!is_branch(&in))
            continue;
          branches++;
          if (!within_bound(code, &in)) {
            outside++;
            if (outside <= 10)
              fprintf(stderr, "outside the bound: %s, %zu bytes, prefix set %zu map %zu op %02x modrm %02x\n",
                      in.mnemonic, in.length, pi, mi, op, modrm);
          }
          if (mi == 0 && in.length - (op_at + 1) == 1)
            seen_rel8[op] = 1;
          if (mi <= 1 && in.length - (op_at + 1) >= 2)
            seen_wide[op] = 1; /* e8/e9 in the one-byte map, 80..8f behind 0f */
          if (mi == 0 && op == 0xc7)
            seen_xbegin = 1;
        }
  printf("opcodes: %lu decoded, %lu with a branch target, %lu outside the bound\n", decoded,
         branches, outside);
  CHECK(decoded > 1000000);
  CHECK_EQ_LONG(outside, 0);
  /* every form the bound knows exists as the decoder sees it */
  for (unsigned op = 0x70; op <= 0x7f; op++)
    CHECK(seen_rel8[op]);
  for (unsigned op = 0xe0; op <= 0xe3; op++)
    CHECK(seen_rel8[op]);
  CHECK(seen_rel8[0xeb]);
  CHECK(seen_wide[0xe8] && seen_wide[0xe9]);
  for (unsigned op = 0x80; op <= 0x8f; op++)
    CHECK(seen_wide[op]);
  CHECK(seen_xbegin);
}

struct exact_case {
  const char *name;
  uint8_t code[16];
  size_t len;
  uintptr_t lo, hi; /* offsets from PC */
  size_t limit;
};

static void test_exact(void)
{
  static const struct exact_case cases[] = {
      {"nops", {0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, 6, 1, 5, 0},
      /* jmp rel8 -2 at +4: ends at 6, lands at 4 */
      {"jmp short back", {0x90, 0x90, 0x90, 0x90, 0xeb, 0xfe}, 6, 1, 5, 6},
      {"jmp short back, window before", {0x90, 0x90, 0x90, 0x90, 0xeb, 0xfe}, 6, 1, 4, 0},
      /* jne rel8 -0xa at +8: ends at 10, lands at 0 */
      {"jne to the entry", {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x75, 0xf6}, 10, 0, 1, 10},
      {"jne to the entry, window after it", {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x75, 0xf6}, 10, 1, 5, 0},
      /* call rel32 -8 at +0: ends at 5, lands at -3 */
      {"call rel32 back", {0xe8, 0xf8, 0xff, 0xff, 0xff, 0x90}, 6, (uintptr_t)-3, (uintptr_t)-2, 5},
      /* jz rel32 +0 (0f 84) at +2: ends at 8, lands at 8 */
      {"jz rel32", {0x90, 0x90, 0x0f, 0x84, 0, 0, 0, 0, 0x90}, 9, 8, 9, 8},
      /* the same displacement bytes behind a non-branch opcode (mov eax, imm32) */
      {"imm32 of mov", {0x90, 0x90, 0x90, 0xb8, 0, 0, 0, 0, 0x90}, 9, 8, 9, 0},
      /* xbegin rel32 +0x10 at +0: ends at 6 */
      {"xbegin", {0xc7, 0xf8, 0x10, 0, 0, 0, 0x90}, 7, 0x16, 0x17, 6},
      {"empty window", {0xeb, 0xfe}, 2, 0, 0, 0},
      /* jmp rel8 -128 at +0: ends at 2, lands at -126, before the range */
      {"jmp short before the range", {0xeb, 0x80, 0x90}, 3, (uintptr_t)-126, (uintptr_t)-125, 2},
      {"jmp short, window just out of reach", {0xeb, 0x80, 0x90}, 3, (uintptr_t)-127, (uintptr_t)-126, 0},
      /* jmp rel8 +127 at +0: ends at 2, lands at 129, after the range */
      {"jmp short past the range", {0xeb, 0x7f, 0x90}, 3, 129, 130, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct exact_case *c = &cases[i];
    size_t got = arch_branch_scan_limit(c->code, c->len, PC, PC + c->lo, PC + c->hi);
    if (got != c->limit) {
      fprintf(stderr, "exact case '%s': limit %zu, expected %zu\n", c->name, got, c->limit);
      check_failures++;
    }
  }
}

struct sweep {
  const char *lib;
  unsigned long functions, branches, outside, bytes, bounded_bytes;
};

static int sweep_symbol(const struct elf_symbol *sym, void *arg)
{
  struct sweep *s = arg;
  if (sym->type != STT_FUNC || sym->size == 0)
    return 0;
  const uint8_t *code = (const uint8_t *)sym->address;
  s->functions++;
  s->bytes += sym->size;
  /* the bound a scan for branches into the first 16 bytes would get */
  s->bounded_bytes +=
      arch_branch_scan_limit(code, sym->size, sym->address, sym->address + 1, sym->address + 16);
  for (size_t off = 0; off < sym->size;) {
    struct arch_insn in;
    if (arch_decode(code + off, sym->size - off, sym->address + off, &in) != 0)
      break; /* where the engine's scan stops too */
    off += in.length;
    if (!is_branch(&in))
      continue;
    s->branches++;
    if (arch_branch_scan_limit(code, sym->size, sym->address, in.target, in.target + 1) < off) {
      if (s->outside++ < 10)
        fprintf(stderr, "%s: %s: %s at +%zx outside the bound\n", s->lib, sym->name, in.mnemonic,
                off - in.length);
    }
  }
  return 0;
}

static void test_libraries(void)
{
  const char *libs[] = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libz.so.1"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
    void *handle = dlopen(libs[i], RTLD_NOW);
    CHECK(handle != NULL);
    struct link_map *lm = NULL;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
      check_failures++;
      continue;
    }
    struct elf_symbols es;
    CHECK(elf_symbols_open(&es, lm->l_name, lm->l_addr) == 0);
    struct sweep s = {libs[i], 0, 0, 0, 0, 0};
    elf_symbols_each(&es, ELF_SYMBOLS_DYNAMIC | ELF_SYMBOLS_STATIC, sweep_symbol, &s);
    elf_symbols_close(&es);
    printf("%s: %lu functions, %lu branches, %lu outside the bound; a scan for the first 16 "
           "bytes decodes %lu of %lu bytes\n",
           s.lib, s.functions, s.branches, s.outside, s.bounded_bytes, s.bytes);
    CHECK(s.functions >= 80);
    CHECK(s.branches >= 1000);
    CHECK_EQ_LONG(s.outside, 0);
  }
}

int main(void)
{
  test_exact();
  test_opcodes();
  test_libraries();
  return check_report("hook.scan_limit");
}
