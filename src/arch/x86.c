/* x86 decoder, relocator and writer for the hook engine (see arch.h), for
 * x86_64 (the 64-bit mode) and i386 (the 32-bit mode) alike.
 *
 * Decoding is Zydis's: lengths, prefixes, ModRM/SIB, VEX/EVEX and the
 * position of every displacement and immediate come from its tables, so no
 * prologue pattern has to be known in advance. This file only decides what to
 * do with the two PC-relative families x86_64 has:
 *
 *   - relative branches (jmp/call/jcc/loop/jrcxz rel8|rel32): re-emitted with
 *     a rel32 when the target is within reach of the trampoline, else with an
 *     absolute form (jmp [rip+0] + 8-byte address);
 *   - RIP-relative memory operands: the disp32 is re-based; if the data is out
 *     of reach, `lea` and `mov reg, [rip+d]` are rewritten through an absolute
 *     address, anything else is refused with its mnemonic.
 *
 * Everything else (endbr64, fs:-relative stack-protector loads, prefixes,
 * AVX...) is position independent and copied byte for byte.
 *
 * In the 32-bit mode (i386) a rel32 reaches the whole address space, so every
 * jump is the 5-byte one and nothing is ever out of reach; there is no
 * RIP-relative operand. Position-independent i386 code finds its own address
 * with `call __x86.get_pc_thunk.REG` (or `call 1f; 1: pop REG`): moved into a
 * trampoline, that call would hand the trampoline's address to the code, so
 * it is rewritten to load the address the original call would have given.
 */
#include "arch.h"

#include <Zydis/Zydis.h>
#include <string.h>

#include "message.h"

#if defined(__x86_64__)
#define X86_64 1
#define DECODER_MODE ZYDIS_MACHINE_MODE_LONG_64
#define DECODER_STACK ZYDIS_STACK_WIDTH_64
#elif defined(__i386__)
#define X86_64 0
#define DECODER_MODE ZYDIS_MACHINE_MODE_LEGACY_32
#define DECODER_STACK ZYDIS_STACK_WIDTH_32
#else
#error "x86.c is the backend of x86_64 and i386 only"
#endif

/* rel32 reach with a margin, so that every byte of a trampoline chunk and of a
 * patch window is covered by the same answer. */
#define NEAR_LIMIT ((int64_t)0x7fff0000)

#define NEAR_JMP_SIZE 5
#define FAR_JMP_SIZE (X86_64 ? 14 : NEAR_JMP_SIZE)

size_t arch_patch_size_near(void) { return NEAR_JMP_SIZE; }
size_t arch_patch_size_far(void) { return FAR_JMP_SIZE; }

static int fits_rel32(int64_t delta) { return delta >= INT32_MIN && delta <= INT32_MAX; }

/* to - from as the displacement a rel32 would hold: in the 32-bit mode the
 * address arithmetic wraps, so every address is within reach. */
static int64_t displacement(uintptr_t to, uintptr_t from)
{
  return X86_64 ? (int64_t)(to - from) : (int64_t)(int32_t)(to - from);
}

int arch_near_reachable(uintptr_t from, uintptr_t to, size_t span)
{
  int64_t d1 = displacement(to, from);
  int64_t d2 = displacement(to, from + span);
  return !X86_64 || (d1 > -NEAR_LIMIT && d1 < NEAR_LIMIT && d2 > -NEAR_LIMIT && d2 < NEAR_LIMIT);
}

uintptr_t arch_near_search_radius(void) { return (uintptr_t)NEAR_LIMIT - 0x100000; }

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

size_t arch_write_near_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  int64_t rel = displacement(target, pc + NEAR_JMP_SIZE);
  if (!fits_rel32(rel))
    return 0;
  uint8_t *p = dst;
  p[0] = 0xe9; /* jmp rel32 */
  put_u32(p + 1, (uint32_t)(int32_t)rel);
  return NEAR_JMP_SIZE;
}

size_t arch_write_far_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  if (!X86_64)
    return arch_write_near_jump(dst, pc, target); /* rel32 reaches everything */
  uint8_t *p = dst;
  p[0] = 0xff; /* jmp qword [rip+0] */
  p[1] = 0x25;
  put_u32(p + 2, 0);
  put_u64(p + 6, target);
  return FAR_JMP_SIZE;
}

size_t arch_write_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  size_t n = arch_write_near_jump(dst, pc, target);
  return n ? n : arch_write_far_jump(dst, pc, target);
}

size_t arch_write_pointer_jump(void *dst, uintptr_t pc, uintptr_t slot)
{
  /* jmp qword [rip+rel32] on x86_64; jmp dword [abs32] on i386 */
  int64_t rel = X86_64 ? displacement(slot, pc + 6) : (int64_t)(int32_t)slot;
  if (!fits_rel32(rel))
    return 0;
  uint8_t *p = dst;
  p[0] = 0xff;
  p[1] = 0x25;
  put_u32(p + 2, (uint32_t)(int32_t)rel);
  return 6;
}

void arch_write_traps(void *dst, size_t n) { memset(dst, 0xcc, n); /* int3 */ }

size_t arch_read_jump(const void *code, uintptr_t pc, uintptr_t *target)
{
  const uint8_t *p = code;
  int32_t rel32;
  if (p[0] == 0xe9) {
    memcpy(&rel32, p + 1, 4);
    *target = pc + 5 + (intptr_t)rel32;
    return 5;
  }
  if (p[0] == 0xff && p[1] == 0x25 && !X86_64) {
    uint32_t slot, v;
    memcpy(&slot, p + 2, 4);
    memcpy(&v, (const void *)(uintptr_t)slot, 4);
    *target = (uintptr_t)v;
    return 6;
  }
  if (p[0] == 0xff && p[1] == 0x25) {
    memcpy(&rel32, p + 2, 4);
    uint64_t v;
    if (rel32 == 0) {
      memcpy(&v, p + 6, 8);
      *target = (uintptr_t)v;
      return FAR_JMP_SIZE;
    }
    memcpy(&v, (const void *)(pc + 6 + (intptr_t)rel32), 8);
    *target = (uintptr_t)v;
    return 6;
  }
  return 0;
}

size_t arch_inline_jump(const void *code, uintptr_t pc, uintptr_t *target)
{
  const uint8_t *p = code;
  if (p[0] == 0xe9 || (X86_64 && p[0] == 0xff && p[1] == 0x25 && memcmp(p + 2, "\0\0\0\0", 4) == 0))
    return arch_read_jump(code, pc, target); /* rel32, or rip+0 with the address inline */
  return 0;
}

void arch_write_live_patch(void *at, const void *patch, size_t n)
{
  uintptr_t a = (uintptr_t)at;
  volatile uint8_t *code = at;
  const uint8_t *bytes = patch;
  if ((a & 7) + n <= 8) {
    /* The whole patch sits in one aligned quadword: a single store. */
    uint64_t *word = (uint64_t *)(a & ~(uintptr_t)7);
    uint64_t v = __atomic_load_n(word, __ATOMIC_RELAXED);
    memcpy((uint8_t *)&v + (a & 7), bytes, n);
    __atomic_store_n(word, v, __ATOMIC_SEQ_CST);
    return;
  }
  if ((a & 63) != 63 && n >= 2) {
    /* Park entering threads on a two-byte self-loop (jmp $), fill in the
     * tail, then replace the loop with the head of the jump. A 16-bit store
     * inside one cache line is atomic on x86. */
    uint16_t spin = 0xfeeb, head;
    __atomic_store_n((uint16_t *)at, spin, __ATOMIC_SEQ_CST);
    for (size_t i = 2; i < n; i++)
      code[i] = bytes[i];
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy(&head, bytes, 2);
    __atomic_store_n((uint16_t *)at, head, __ATOMIC_SEQ_CST);
    return;
  }
  for (size_t i = n; i-- > 0;)
    code[i] = bytes[i];
}

size_t arch_entry_landing_pad(const void *code)
{
  static const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, X86_64 ? 0xfa : 0xfb}; /* endbr64 / endbr32 */
  return memcmp(code, endbr, sizeof endbr) == 0 ? sizeof endbr : 0;
}

size_t arch_write_pad_undo(void *dst, const void *pad)
{
  (void)dst;
  (void)pad;
  return 0; /* endbr64 / endbr32 change no state */
}

uintptr_t arch_code_bytes(uintptr_t code) { return code; }

void arch_flush_icache(void *addr, size_t len)
{
  /* x86 keeps instruction fetch coherent with stores; the builtin documents
   * the intent and is a no-op here. */
  __builtin___clear_cache((char *)addr, (char *)addr + len);
}

/* ---- decoding ------------------------------------------------------------ */

static int zydis_decode(const void *code, size_t avail, ZydisDecodedInstruction *insn)
{
  ZydisDecoder decoder;
  if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, DECODER_MODE, DECODER_STACK)))
    return -1;
  if (avail > ZYDIS_MAX_INSTRUCTION_LENGTH)
    avail = ZYDIS_MAX_INSTRUCTION_LENGTH;
  return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, NULL, code, avail, insn)) ? 0 : -1;
}

static int has_relative_imm(const ZydisDecodedInstruction *in)
{
  return (in->attributes & ZYDIS_ATTRIB_IS_RELATIVE) && in->raw.imm[0].is_relative;
}

static int has_rip_operand(const ZydisDecodedInstruction *in)
{
  return (in->attributes & ZYDIS_ATTRIB_IS_RELATIVE) && !in->raw.imm[0].is_relative;
}

static uintptr_t relative_target(const ZydisDecodedInstruction *in, uintptr_t pc)
{
  int64_t off = has_relative_imm(in) ? in->raw.imm[0].value.s : in->raw.disp.value;
  return pc + in->length + (uintptr_t)off; /* wraps in the 32-bit mode, as the CPU does */
}

static int is_flow_end(const ZydisDecodedInstruction *in)
{
  switch (in->mnemonic) {
  case ZYDIS_MNEMONIC_RET:
  case ZYDIS_MNEMONIC_IRET:
  case ZYDIS_MNEMONIC_IRETD:
  case ZYDIS_MNEMONIC_IRETQ:
  case ZYDIS_MNEMONIC_INT3:
  case ZYDIS_MNEMONIC_UD0:
  case ZYDIS_MNEMONIC_UD1:
  case ZYDIS_MNEMONIC_UD2:
  case ZYDIS_MNEMONIC_HLT:
    return 1;
  case ZYDIS_MNEMONIC_JMP:
    return 1;
  default:
    return 0;
  }
}

static void copy_mnemonic(char *dst, size_t cap, const ZydisDecodedInstruction *in)
{
  const char *s = ZydisMnemonicGetString(in->mnemonic);
  size_t i = 0;
  for (; s && s[i] && i + 1 < cap; i++)
    dst[i] = s[i];
  dst[i] = 0;
}

int arch_decode(const void *code, size_t avail, uintptr_t pc, struct arch_insn *insn)
{
  ZydisDecodedInstruction in;
  if (zydis_decode(code, avail, &in) != 0)
    return -1;
  insn->pc = pc;
  insn->length = in.length;
  insn->target = 0;
  copy_mnemonic(insn->mnemonic, sizeof insn->mnemonic, &in);
  if (has_relative_imm(&in)) {
    insn->target = relative_target(&in, pc);
    insn->kind = in.mnemonic == ZYDIS_MNEMONIC_JMP    ? ARCH_INSN_JUMP
                 : in.mnemonic == ZYDIS_MNEMONIC_CALL ? ARCH_INSN_CALL
                                                      : ARCH_INSN_BRANCH;
  } else if (is_flow_end(&in)) {
    insn->kind = ARCH_INSN_END;
    if (has_rip_operand(&in))
      insn->target = relative_target(&in, pc);
  } else if (has_rip_operand(&in)) {
    insn->kind = ARCH_INSN_PCREL_DATA;
    insn->target = relative_target(&in, pc);
  } else {
    insn->kind = ARCH_INSN_PLAIN;
  }
  return 0;
}

/* Every x86_64 instruction with a PC-relative branch target ends with that
 * target's displacement, right after its opcode (no ModRM, except xbegin's
 * fixed C7 F8), and arch_decode() computes the target as the end of the
 * instruction plus the displacement:
 *
 *   rel8           70..7f jcc, e0..e3 loop*, jrcxz, eb jmp
 *   rel32 (rel16)  e8 call, e9 jmp, 0f 80..8f jcc, c7 f8 xbegin
 *
 * (rel16 with an operand-size prefix, if a decoder takes it so). A byte
 * position can end such an instruction only if the opcode bytes sit right
 * before a displacement that, added to the position's address, lands in
 * [lo, hi). Which positions really are instruction ends is left to the
 * decoder; this only says where the last candidate is: a few loads per byte,
 * against roughly a hundred nanoseconds per decoded instruction.
 * tests/hook/scan_limit.c checks the opcode list against Zydis over every
 * one- and two-byte opcode. */
static int lands_in(uint64_t base, int64_t displacement, uint64_t span)
{
  return base + (uint64_t)displacement < span;
}

/* Where a rel32 (or, prefixed, rel16) branch whose displacement starts at
 * `disp` could end landing in the window, else 0. */
static size_t wide_end(const uint8_t *p, size_t len, size_t disp, uint64_t base, uint64_t span)
{
  int32_t d32;
  int16_t d16;
  if (disp + 4 <= len) {
    memcpy(&d32, p + disp, 4);
    if (lands_in(base + disp + 4, d32, span))
      return disp + 4;
  }
  if (disp + 2 <= len) {
    memcpy(&d16, p + disp, 2);
    if (lands_in(base + disp + 2, d16, span))
      return disp + 2;
  }
  return 0;
}

/* The high bit of each byte of w that is zero, exactly. */
static uint64_t zero_bytes(uint64_t w)
{
  const uint64_t low7 = 0x7f7f7f7f7f7f7f7fu;
  return ~(((w & low7) + low7) | w | low7);
}

size_t arch_branch_scan_limit(const void *code, size_t len, uintptr_t pc, uintptr_t lo,
                              uintptr_t hi)
{
  if (hi <= lo || len < 2)
    return 0;
  const uint8_t *p = code;
  uint64_t span = hi - lo;
  /* target - lo = base + instruction end + displacement; signed, so that in
   * the 32-bit mode a window after pc gives a negative base, not 2^32 - n */
  uint64_t base = (uint64_t)(int64_t)(intptr_t)(pc - lo);
  size_t best = 0;

  /* rel32 / rel16 forms reach anywhere: every e8, e9, 0f 8x and c7 f8 of the
   * range, eight bytes at a time past words that hold none of e8, e9, 0f, c7. */
  const uint64_t ones = 0x0101010101010101u;
  for (size_t w = 0; w + 1 < len; w += 8) {
    uint64_t hits;
    if (w + 8 <= len) {
      uint64_t v;
      memcpy(&v, p + w, 8);
      hits = zero_bytes((v & ~ones) ^ 0xe8 * ones) | zero_bytes(v ^ 0x0f * ones) |
             zero_bytes(v ^ 0xc7 * ones);
    } else {
      hits = 0x8080808080808080u >> (8 * (w + 8 - len)); /* the tail: every byte */
    }
    for (; hits; hits &= hits - 1) {
      size_t j = w + (size_t)__builtin_ctzll(hits) / 8, end = 0;
      if (j + 1 >= len)
        break;
      if (p[j] == 0xe8 || p[j] == 0xe9)
        end = wide_end(p, len, j + 1, base, span);
      else if ((p[j] == 0x0f && p[j + 1] >= 0x80 && p[j + 1] <= 0x8f) ||
               (p[j] == 0xc7 && p[j + 1] == 0xf8))
        end = wide_end(p, len, j + 2, base, span);
      if (end > best)
        best = end;
    }
  }

  /* rel8 forms (70..7f jcc, e0..e3 loop and jrcxz, eb jmp) reach 128 bytes
   * from their end: only opcodes at offsets i with i + 2 - 128 < hi and
   * i + 2 + 127 >= lo can count. */
  int64_t first = (intptr_t)(lo - pc), last = (intptr_t)(hi - pc); /* window as offsets */
  int64_t from = first - 129 > 0 ? first - 129 : 0;
  int64_t to = last + 126 < (int64_t)len - 1 ? last + 126 : (int64_t)len - 1;
  for (int64_t k = from; k < to; k++) {
    size_t i = (size_t)k;
    uint8_t op = p[i];
    if (((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3) || op == 0xeb) &&
        lands_in(base + i + 2, (int8_t)p[i + 1], span) && i + 2 > best)
      best = i + 2;
  }
  return best;
}

/* ---- relocation ---------------------------------------------------------- */

struct reloc_ctx {
  uint8_t *dst;
  uintptr_t dst_pc;
  size_t cap;
  size_t written;
  char *reason;
  size_t reason_cap;
  uintptr_t src_pc;
};

static uint8_t *reserve(struct reloc_ctx *c, size_t n)
{
  if (c->written + n > c->cap)
    return NULL;
  uint8_t *p = c->dst + c->written;
  return p;
}

static uintptr_t here(const struct reloc_ctx *c) { return c->dst_pc + c->written; }

static enum arch_reloc_status fail(struct reloc_ctx *c, enum arch_reloc_status st,
                                   const ZydisDecodedInstruction *in, uintptr_t pc,
                                   const char *what)
{
  char mn[16];
  copy_mnemonic(mn, sizeof mn, in);
  struct message m = message_start(c->reason, c->reason_cap);
  message_str(message_hex(message_str(message_str(&m, mn), " at +"), pc - c->src_pc), ": ");
  message_str(&m, what);
  return st;
}

/* A call whose only use is to learn its own return address (32-bit
 * position-independent code): `call 1f; 1: pop REG`, or a call of a PC
 * thunk `mov (%esp), REG; ret`. Moved, it must produce the *original* return
 * address `next`: `push imm32` for the first (the pop that follows takes it),
 * `mov REG, imm32` for the second. Returns the bytes written at p, or 0 for
 * any other call. Only the 32-bit mode has these (x86_64 uses rip-relative
 * lea), and only there does an absolute address fit in an imm32. */
static size_t relocate_pc_call(uint8_t *p, uintptr_t next, uintptr_t target)
{
  if (X86_64)
    return 0;
  if (target == next) {
    p[0] = 0x68; /* push imm32 */
    put_u32(p + 1, (uint32_t)next);
    return 5;
  }
  /* mov REG, [esp] = 8b /r with mod 00, rm 100 (SIB), SIB 24; then ret;
   * behind an endbr32 in code built with -fcf-protection */
  const uint8_t *t = (const uint8_t *)target;
  t += arch_entry_landing_pad(t);
  if (t[0] == 0x8b && (t[1] & 0xc7) == 0x04 && t[2] == 0x24 && t[3] == 0xc3 && ((t[1] >> 3) & 7) != 4) {
    p[0] = (uint8_t)(0xb8 | ((t[1] >> 3) & 7)); /* mov REG, imm32 */
    put_u32(p + 1, (uint32_t)next);
    return 5;
  }
  return 0;
}

/* jmp/call/jcc/loop/jrcxz with a relative immediate. */
static enum arch_reloc_status relocate_branch(struct reloc_ctx *c, const ZydisDecodedInstruction *in,
                                              const uint8_t *src, uintptr_t pc)
{
  uintptr_t target = relative_target(in, pc);
  uint8_t *p = reserve(c, ARCH_MAX_RELOCATED_INSN);
  if (!p)
    return ARCH_RELOC_NO_SPACE;
  size_t n;
  switch (in->mnemonic) {
  case ZYDIS_MNEMONIC_JMP:
    n = arch_write_jump(p, here(c), target);
    break;
  case ZYDIS_MNEMONIC_CALL:
    n = 0;
    if ((n = relocate_pc_call(p, pc + in->length, target)) != 0) {
      /* the original's own address, as the call would have given it */
    } else if (fits_rel32(displacement(target, here(c) + 5))) {
      p[0] = 0xe8; /* call rel32 */
      put_u32(p + 1, (uint32_t)(int32_t)displacement(target, here(c) + 5));
      n = 5;
    } else {
      static const uint8_t call_abs[] = {0xff, 0x15, 0x02, 0, 0, 0, /* call [rip+2] */
                                         0xeb, 0x08};               /* jmp over the address */
      memcpy(p, call_abs, sizeof call_abs);
      put_u64(p + 8, target);
      n = 16;
    }
    break;
  case ZYDIS_MNEMONIC_JRCXZ:
  case ZYDIS_MNEMONIC_JECXZ:
  case ZYDIS_MNEMONIC_JCXZ:
  case ZYDIS_MNEMONIC_LOOP:
  case ZYDIS_MNEMONIC_LOOPE:
  case ZYDIS_MNEMONIC_LOOPNE: {
    /* Only a rel8 form exists: keep the instruction (and its prefixes) with
     * rel8 = 2 so that the taken path lands on a jump to the real target and
     * the fall-through skips it. */
    if (in->raw.imm[0].size != 8)
      return fail(c, ARCH_RELOC_UNRELOCATABLE, in, pc, "unexpected displacement size");
    memcpy(p, src, in->length);
    p[in->raw.imm[0].offset] = 2;
    size_t at = in->length;
    uint8_t *skip = p + at;
    at += 2;
    size_t jn = arch_write_jump(p + at, here(c) + at, target);
    skip[0] = 0xeb; /* jmp rel8 over the jump to the target */
    skip[1] = (uint8_t)jn;
    n = at + jn;
    break;
  }
  default: {
    unsigned cc;
    if (in->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && in->opcode >= 0x70 && in->opcode <= 0x7f)
      cc = in->opcode & 0xf;
    else if (in->opcode_map == ZYDIS_OPCODE_MAP_0F && in->opcode >= 0x80 && in->opcode <= 0x8f)
      cc = in->opcode & 0xf;
    else
      return fail(c, ARCH_RELOC_UNRELOCATABLE, in, pc, "relative form has no relocation");
    int64_t rel = displacement(target, here(c) + 6);
    if (fits_rel32(rel)) {
      p[0] = 0x0f; /* jcc rel32 */
      p[1] = (uint8_t)(0x80 | cc);
      put_u32(p + 2, (uint32_t)(int32_t)rel);
      n = 6;
    } else {
      p[0] = (uint8_t)(0x70 | (cc ^ 1)); /* inverted jcc rel8 over an absolute jump */
      p[1] = FAR_JMP_SIZE;
      n = 2 + arch_write_far_jump(p + 2, here(c) + 2, target);
    }
    break;
  }
  }
  c->written += n;
  return ARCH_RELOC_OK;
}

#if X86_64
static unsigned modrm_reg_index(const ZydisDecodedInstruction *in)
{
  unsigned r = in->raw.modrm.reg;
  if (in->attributes & ZYDIS_ATTRIB_HAS_REX)
    r |= (unsigned)in->raw.rex.R << 3;
  return r;
}

/* mov r64, imm64 */
static size_t put_mov_imm64(uint8_t *p, unsigned reg, uint64_t value)
{
  p[0] = (uint8_t)(0x48 | (reg >> 3));
  p[1] = (uint8_t)(0xb8 | (reg & 7));
  put_u64(p + 2, value);
  return 10;
}

/* Does any operand of the instruction (explicit or implicit) touch `reg64`? */
static int uses_register(const ZydisDecodedOperand *ops, unsigned n, ZydisRegister reg64)
{
  for (unsigned i = 0; i < n; i++) {
    ZydisRegister r[2] = {ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE};
    if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER) {
      r[0] = ops[i].reg.value;
    } else if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY) {
      r[0] = ops[i].mem.base;
      r[1] = ops[i].mem.index;
    }
    for (int k = 0; k < 2; k++)
      if (r[k] != ZYDIS_REGISTER_NONE &&
          ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r[k]) == reg64)
        return 1;
  }
  return 0;
}

/* Any instruction with a [rip+disp32] operand whose data is out of rel32
 * reach, rewritten to address it through a scratch register:
 *
 *   lea rsp, [rsp-128]      ; step over the red zone the function may use
 *   push SCR
 *   mov SCR, imm64          ; the absolute data address
 *   <insn with [SCR]>       ; ModRM rm=SCR, the disp32 removed
 *   pop SCR
 *   lea rsp, [rsp+128]
 *
 * None of these touches the flags. Refused for branches and for anything
 * that uses the stack pointer (push/pop/call read or move it), and for EVEX
 * encodings. SCR is a low register (no REX.B, no SIB/disp8 special cases)
 * that no operand uses. Returns 1 when written at p. */
static int relocate_through_scratch(struct reloc_ctx *c, const ZydisDecodedInstruction *in,
                                    const uint8_t *src, uintptr_t data, uint8_t *p)
{
  static const ZydisRegister candidates[] = {ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RCX,
                                             ZYDIS_REGISTER_RDX, ZYDIS_REGISTER_RBX,
                                             ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI};
  static const uint8_t numbers[] = {0, 1, 2, 3, 6, 7};
  if ((in->encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY &&
       in->encoding != ZYDIS_INSTRUCTION_ENCODING_VEX) ||
      is_flow_end(in) || in->mnemonic == ZYDIS_MNEMONIC_CALL ||
      !(in->attributes & ZYDIS_ATTRIB_HAS_MODRM))
    return 0;
  ZydisDecoder decoder;
  ZydisDecodedInstruction full;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  ZydisDecoderInit(&decoder, DECODER_MODE, DECODER_STACK);
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, src, in->length, &full, ops)))
    return 0;
  if (uses_register(ops, full.operand_count, ZYDIS_REGISTER_RSP))
    return 0;
  int scr = -1;
  for (unsigned i = 0; i < sizeof candidates / sizeof candidates[0] && scr < 0; i++)
    if (!uses_register(ops, full.operand_count, candidates[i]))
      scr = numbers[i];
  if (scr < 0)
    return 0;

  static const uint8_t lea_down[] = {0x48, 0x8d, 0x64, 0x24, 0x80};       /* lea rsp,[rsp-128] */
  static const uint8_t lea_up[] = {0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}; /* lea rsp,[rsp+128] */
  size_t n = 0;
  memcpy(p, lea_down, sizeof lea_down);
  n += sizeof lea_down;
  p[n++] = (uint8_t)(0x50 | scr); /* push */
  n += put_mov_imm64(p + n, (unsigned)scr, data);
  /* the instruction, with [rip+disp32] turned into [SCR] */
  uint8_t *insn = p + n;
  size_t d = in->raw.disp.offset;
  memcpy(insn, src, d);
  memcpy(insn + d, src + d + 4, in->length - d - 4);
  insn[in->raw.modrm.offset] = (uint8_t)((insn[in->raw.modrm.offset] & 0x38) | scr);
  if (in->encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY && (in->attributes & ZYDIS_ATTRIB_HAS_REX))
    insn[in->raw.rex.offset] &= (uint8_t)~1; /* REX.B = 0 */
  if (in->encoding == ZYDIS_INSTRUCTION_ENCODING_VEX && src[in->raw.vex.offset] == 0xc4)
    insn[in->raw.vex.offset + 1] |= 0x20; /* VEX.~B = 1 */
  n += in->length - 4;
  p[n++] = (uint8_t)(0x58 | scr); /* pop */
  memcpy(p + n, lea_up, sizeof lea_up);
  n += sizeof lea_up;
  c->written += n;
  return 1;
}

/* An instruction with a [rip+disp32] operand. */
static enum arch_reloc_status relocate_rip_operand(struct reloc_ctx *c,
                                                   const ZydisDecodedInstruction *in,
                                                   const uint8_t *src, uintptr_t pc)
{
  uintptr_t data = relative_target(in, pc);
  uint8_t *p = reserve(c, ARCH_MAX_RELOCATED_INSN);
  if (!p)
    return ARCH_RELOC_NO_SPACE;
  if (in->address_width != 64 || in->raw.disp.size != 32)
    return fail(c, ARCH_RELOC_UNRELOCATABLE, in, pc, "32-bit rip-relative address");
  int64_t disp = displacement(data, here(c) + in->length);
  if (fits_rel32(disp)) {
    memcpy(p, src, in->length);
    put_u32(p + in->raw.disp.offset, (uint32_t)(int32_t)disp);
    c->written += in->length;
    return ARCH_RELOC_OK;
  }
  /* The data is beyond rel32 of the trampoline: the two forms that only
   * compute or load from the address are rewritten through a register they
   * overwrite anyway. */
  int legacy64 = in->encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY && in->operand_width == 64;
  if (legacy64 && in->mnemonic == ZYDIS_MNEMONIC_LEA) {
    c->written += put_mov_imm64(p, modrm_reg_index(in), data);
    return ARCH_RELOC_OK;
  }
  if (legacy64 && in->mnemonic == ZYDIS_MNEMONIC_MOV && in->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT &&
      in->opcode == 0x8b && in->raw.prefix_count == 1) {
    unsigned reg = modrm_reg_index(in);
    size_t n = put_mov_imm64(p, reg, data);
    /* mov reg, [reg] ; rm=reg needs a SIB for rsp/r12 and a disp8 for rbp/r13 */
    p[n++] = (uint8_t)(0x48 | (reg >> 3) << 2 | (reg >> 3));
    p[n++] = 0x8b;
    if ((reg & 7) == 4) {
      p[n++] = (uint8_t)(0x04 | (reg & 7) << 3);
      p[n++] = 0x24;
    } else if ((reg & 7) == 5) {
      p[n++] = (uint8_t)(0x45 | (reg & 7) << 3);
      p[n++] = 0;
    } else {
      p[n++] = (uint8_t)((reg & 7) << 3 | (reg & 7));
    }
    c->written += n;
    return ARCH_RELOC_OK;
  }
  if (relocate_through_scratch(c, in, src, data, p))
    return ARCH_RELOC_OK;
  return fail(c, ARCH_RELOC_UNRELOCATABLE, in, pc,
              "rip-relative operand out of +-2GiB of the trampoline");
}

#else
static enum arch_reloc_status relocate_rip_operand(struct reloc_ctx *c,
                                                   const ZydisDecodedInstruction *in,
                                                   const uint8_t *src, uintptr_t pc)
{
  (void)src;
  return fail(c, ARCH_RELOC_UNRELOCATABLE, in, pc, "rip-relative operand in 32-bit code");
}
#endif

/* One source instruction at pc, by its kind of PC-relative operand. */
static enum arch_reloc_status relocate_one(struct reloc_ctx *c, const ZydisDecodedInstruction *in,
                                           const uint8_t *src, uintptr_t pc)
{
  enum arch_reloc_status st;
  if (has_relative_imm(in)) {
    if (in->mnemonic == ZYDIS_MNEMONIC_XBEGIN)
      return fail(c, ARCH_RELOC_UNRELOCATABLE, in, pc, "transaction abort address cannot be moved");
    st = relocate_branch(c, in, src, pc);
  } else if (has_rip_operand(in)) {
    st = relocate_rip_operand(c, in, src, pc);
  } else {
    uint8_t *p = reserve(c, in->length);
    st = p ? ARCH_RELOC_OK : ARCH_RELOC_NO_SPACE;
    if (p) {
      memcpy(p, src, in->length);
      c->written += in->length;
    }
  }
  if (st == ARCH_RELOC_NO_SPACE) {
    struct message m = message_start(c->reason, c->reason_cap);
    message_str(&m, "trampoline buffer too small");
  }
  return st;
}

enum arch_reloc_status arch_relocate(const void *src, uintptr_t src_pc, size_t min_bytes,
                                     size_t src_limit, void *dst, uintptr_t dst_pc,
                                     size_t dst_cap, struct arch_relocation *out)
{
  struct reloc_ctx c = {dst, dst_pc, dst_cap, 0, out->reason, sizeof out->reason, src_pc};
  const uint8_t *code = src;
  uintptr_t branch_targets[ARCH_MAX_WINDOW];
  unsigned nbranch = 0;
  size_t consumed = 0;
  out->reason[0] = 0;
  out->instructions = 0;

  while (consumed < min_bytes) {
    size_t avail = ZYDIS_MAX_INSTRUCTION_LENGTH;
    if (src_limit) {
      if (consumed >= src_limit)
        goto too_short;
      if (src_limit - consumed < avail)
        avail = src_limit - consumed;
    }
    ZydisDecodedInstruction in;
    if (zydis_decode(code + consumed, avail, &in) != 0) {
      if (src_limit && avail < ZYDIS_MAX_INSTRUCTION_LENGTH &&
          zydis_decode(code + consumed, ZYDIS_MAX_INSTRUCTION_LENGTH, &in) == 0)
        goto too_short; /* a valid instruction that runs past the symbol */
      struct message m = message_start(out->reason, sizeof out->reason);
      message_hex(message_str(&m, "invalid instruction at +"), consumed);
      return ARCH_RELOC_UNDECODABLE;
    }
    uintptr_t pc = src_pc + consumed;
    if (has_relative_imm(&in) &&
        !(in.mnemonic == ZYDIS_MNEMONIC_CALL && relative_target(&in, pc) == pc + in.length))
      branch_targets[nbranch++] = relative_target(&in, pc); /* (call 1f; 1: is not a branch) */
    enum arch_reloc_status st = relocate_one(&c, &in, code + consumed, pc);
    if (st != ARCH_RELOC_OK)
      return st;
    consumed += in.length;
    out->instructions++;
    if (is_flow_end(&in) && consumed < min_bytes && !src_limit) {
      struct message m = message_start(out->reason, sizeof out->reason);
      message_dec(message_str(&m, "code flow ends after "), consumed);
      message_str(&m, " bytes and the function size is unknown");
      return ARCH_RELOC_TOO_SHORT;
    }
  }
  if (src_limit && consumed > src_limit)
    goto too_short;
  for (unsigned i = 0; i < nbranch; i++)
    if (branch_targets[i] >= src_pc && branch_targets[i] < src_pc + consumed) {
      struct message m = message_start(out->reason, sizeof out->reason);
      message_hex(message_str(&m, "branch inside the patch window to +"), branch_targets[i] - src_pc);
      return ARCH_RELOC_UNRELOCATABLE;
    }
  out->consumed = consumed;
  out->written = c.written;
  return ARCH_RELOC_OK;

too_short:
  {
    struct message m = message_start(out->reason, sizeof out->reason);
    message_dec(message_str(&m, "function is "), src_limit);
    message_dec(message_str(&m, " bytes, the patch needs "), min_bytes);
    message_str(&m, " bytes of whole instructions");
  }
  return ARCH_RELOC_TOO_SHORT;
}
