/* AArch64 decoder, relocator and writer for the hook engine (see arch.h).
 *
 * Every A64 instruction is one little-endian 32-bit word, so decoding is a
 * handful of exact encoding masks: this file classifies only the forms whose
 * meaning depends on where they run, and copies every other word as is.
 *
 *   branches   b, bl (imm26, +-128 MiB), b.cond / bc.cond, cbz/cbnz (imm19,
 *              +-1 MiB), tbz/tbnz (imm14, +-32 KiB)
 *   addresses  adr (+-1 MiB), adrp (+-4 GiB in pages)
 *   literals   ldr w/x, ldrsw, ldr s/d/q, prfm (imm19, +-1 MiB)
 *
 * Relocated, each keeps its exact effect: a branch gets a new displacement,
 * or an inverted short branch over an absolute jump; an address is rebuilt
 * with adr, adrp+add or movz/movk into the same register; a literal load
 * loads from the same address, through the destination register itself (or
 * x17 for FP/SIMD destinations); prfm out of reach becomes a nop (a prefetch
 * is a hint: dropping it changes no result). `bl` as the last instruction of
 * the window sets x30 to the original return address before it jumps, so the
 * callee returns straight into the function after the window.
 *
 * x16 and x17 (IP0/IP1) are the registers the procedure-call standard lets a
 * veneer clobber between a call and the callee's entry: absolute jumps load
 * their target into x16, far FP/SIMD literal loads their address into x17.
 * A window whose earlier instructions may have written the one a later
 * rewrite needs is refused rather than silently changed.
 *
 * Encodings: Arm Architecture Reference Manual for A-profile, C4.1 (A64
 * instruction set encoding).
 */
#include "arch.h"

#include <string.h>

#include "message.h"

/* b / bl reach +-128 MiB; a margin keeps every byte of a trampoline chunk
 * and of a patch window on the same side of the answer. */
#define B_REACH ((int64_t)1 << 27)
#define NEAR_LIMIT (B_REACH - 0x10000)

#define NEAR_JUMP_SIZE 4
#define FAR_JUMP_SIZE 16

#define REG_IP0 16 /* x16: absolute jumps */
#define REG_IP1 17 /* x17: addresses of far FP/SIMD literals */
#define REG_LR 30
#define REG_ZR 31

#define INSN_NOP 0xd503201fu
#define INSN_BRK 0xd4200000u      /* brk #0 */
#define INSN_B_SELF 0x14000000u   /* b . */
#define INSN_LDR_X16_8 0x58000050u /* ldr x16, #8 */
#define INSN_BR_X16 0xd61f0200u   /* br x16 */
#define INSN_BTI_C 0xd503245fu
#define INSN_BTI_JC 0xd50324dfu
#define INSN_PACIASP 0xd503233fu
#define INSN_PACIBSP 0xd503237fu
#define INSN_AUTIASP 0xd50323bfu
#define INSN_AUTIBSP 0xd50323ffu

size_t arch_patch_size_near(void) { return NEAR_JUMP_SIZE; }
size_t arch_patch_size_far(void) { return FAR_JUMP_SIZE; }

int arch_near_reachable(uintptr_t from, uintptr_t to, size_t span)
{
  int64_t d1 = (int64_t)(to - from), d2 = (int64_t)(to - (from + span));
  return d1 > -NEAR_LIMIT && d1 < NEAR_LIMIT && d2 > -NEAR_LIMIT && d2 < NEAR_LIMIT;
}

uintptr_t arch_near_search_radius(void) { return (uintptr_t)NEAR_LIMIT - 0x100000; }

static uint32_t get_u32(const void *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static void put_u32(void *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(void *p, uint64_t v) { memcpy(p, &v, 8); }

/* ---- field helpers --------------------------------------------------------- */

static int64_t sign_extend(uint64_t v, unsigned bits)
{
  uint64_t m = (uint64_t)1 << (bits - 1);
  v &= ((uint64_t)1 << bits) - 1;
  return (int64_t)((v ^ m) - m);
}

/* Does a byte displacement fit a signed field of `bits` bits counting
 * `scale`-byte units? */
static int fits(int64_t delta, unsigned bits, unsigned scale)
{
  if (delta % (int64_t)scale)
    return 0;
  int64_t units = delta / (int64_t)scale;
  return units >= -((int64_t)1 << (bits - 1)) && units < ((int64_t)1 << (bits - 1));
}

static uint32_t field(int64_t units, unsigned bits, unsigned shift)
{
  return (uint32_t)(((uint64_t)units & (((uint64_t)1 << bits) - 1)) << shift);
}

/* ---- the instruction classes the relocator treats ------------------------ */

enum form {
  F_PLAIN,      /* position independent: copied */
  F_B,          /* b imm26 */
  F_BL,         /* bl imm26 */
  F_BCOND,      /* b.cond / bc.cond imm19 */
  F_CBZ,        /* cbz / cbnz imm19 */
  F_TBZ,        /* tbz / tbnz imm14 */
  F_ADR,        /* adr imm21 */
  F_ADRP,       /* adrp imm21 pages */
  F_LDR_LIT,    /* ldr w/x, ldrsw, ldr s/d/q literal */
  F_PRFM_LIT,   /* prfm literal */
  F_END,        /* no fall-through, no PC-relative operand: ret, br, brk, udf... */
  F_PCREL_OTHER /* PC-relative forms this relocator does not rewrite */
};

struct a64 {
  enum form form;
  uint32_t word;
  uintptr_t pc;
  uintptr_t target;   /* branch target, address computed or data address */
  unsigned size;      /* F_LDR_LIT: bytes loaded */
  const char *name;   /* mnemonic, for messages */
};

static const char *const cond_names[16] = {"b.eq", "b.ne", "b.hs", "b.lo", "b.mi", "b.pl",
                                           "b.vs", "b.vc", "b.hi", "b.ls", "b.ge", "b.lt",
                                           "b.gt", "b.le", "b.al", "b.nv"};

/* Unconditional branch (register) and exception generation: flow ends. */
static int classify_system(uint32_t w, struct a64 *d)
{
  if ((w & 0xfe000000u) == 0xd6000000u) {
    unsigned opc = (w >> 21) & 0xf;
    d->form = opc == 1 || opc == 9 ? F_PLAIN : F_END; /* blr / blraa... return here */
    d->name = opc == 1 || opc == 9 ? "blr" : opc == 2 || opc == 10 ? "ret" : "br";
    return 0;
  }
  if ((w & 0xffe0001fu) == 0xd4200000u) {
    d->form = F_END;
    d->name = "brk";
  } else if ((w & 0xffe0001fu) == 0xd4400000u) {
    d->form = F_END;
    d->name = "hlt";
  }
  return 0;
}

/* Sort one word into the forms above; -1 for an unallocated top-level
 * encoding group (data rather than code). */
static int classify(uint32_t w, uintptr_t pc, struct a64 *d)
{
  *d = (struct a64){F_PLAIN, w, pc, 0, 0, "insn"};
  unsigned op0 = (w >> 25) & 0xf;
  if (op0 == 0) {
    if ((w >> 16) == 0) {
      d->form = F_END; /* udf #imm16: permanently undefined */
      d->name = "udf";
      return 0;
    }
    return (w >> 31) ? 0 : -1; /* SME, or reserved */
  }
  if (op0 == 1 || op0 == 3)
    return -1;
  if ((w & 0x7c000000u) == 0x14000000u) { /* b, bl */
    d->form = (w >> 31) ? F_BL : F_B;
    d->name = (w >> 31) ? "bl" : "b";
    d->target = pc + (uintptr_t)(sign_extend(w, 26) * 4);
  } else if ((w & 0xff000000u) == 0x54000000u) { /* b.cond, bc.cond */
    d->form = F_BCOND;
    d->name = cond_names[w & 0xf];
    d->target = pc + (uintptr_t)(sign_extend(w >> 5, 19) * 4);
  } else if ((w & 0x7e000000u) == 0x34000000u) { /* cbz, cbnz */
    d->form = F_CBZ;
    d->name = (w >> 24) & 1 ? "cbnz" : "cbz";
    d->target = pc + (uintptr_t)(sign_extend(w >> 5, 19) * 4);
  } else if ((w & 0x7e000000u) == 0x36000000u) { /* tbz, tbnz */
    d->form = F_TBZ;
    d->name = (w >> 24) & 1 ? "tbnz" : "tbz";
    d->target = pc + (uintptr_t)(sign_extend(w >> 5, 14) * 4);
  } else if ((w & 0x1f000000u) == 0x10000000u) { /* adr, adrp */
    int64_t imm = sign_extend(((w >> 5) & 0x7ffff) << 2 | ((w >> 29) & 3), 21);
    int page = (int)(w >> 31);
    d->form = page ? F_ADRP : F_ADR;
    d->name = page ? "adrp" : "adr";
    d->target = page ? (pc & ~(uintptr_t)0xfff) + (uintptr_t)(imm * 4096) : pc + (uintptr_t)imm;
  } else if ((w & 0x3b000000u) == 0x18000000u) { /* load register (literal) */
    static const unsigned gpr_size[4] = {4, 8, 4, 0}, fp_size[4] = {4, 8, 16, 0};
    static const char *const gpr_name[4] = {"ldr", "ldr", "ldrsw", "prfm"};
    unsigned opc = w >> 30, simd = (w >> 26) & 1;
    if (simd && opc == 3)
      return -1;
    d->form = !simd && opc == 3 ? F_PRFM_LIT : F_LDR_LIT;
    d->size = simd ? fp_size[opc] : gpr_size[opc];
    d->name = simd ? "ldr" : gpr_name[opc];
    d->target = pc + (uintptr_t)(sign_extend(w >> 5, 19) * 4);
  } else if ((w & 0xff000000u) == 0x55000000u || (w & 0x7e000000u) == 0x74000000u) {
    /* PC-relative forms of recent extensions (retaasppc and friends,
     * compare-and-branch): not rewritten */
    d->form = F_PCREL_OTHER;
    d->name = (w & 0xff000000u) == 0x55000000u ? "retaasppc" : "cb<cc>";
  } else if ((w & 0xfc000000u) == 0xd4000000u) {
    return classify_system(w, d);
  }
  return 0;
}

int arch_decode(const void *code, size_t avail, uintptr_t pc, struct arch_insn *insn)
{
  struct a64 d;
  if (avail < 4 || classify(get_u32(code), pc, &d) != 0)
    return -1;
  insn->pc = pc;
  insn->length = 4;
  insn->target = d.target;
  size_t n = strlen(d.name);
  if (n >= sizeof insn->mnemonic)
    n = sizeof insn->mnemonic - 1;
  memcpy(insn->mnemonic, d.name, n);
  insn->mnemonic[n] = 0;
  switch (d.form) {
  case F_B: insn->kind = ARCH_INSN_JUMP; break;
  case F_BL: insn->kind = ARCH_INSN_CALL; break;
  case F_BCOND:
  case F_CBZ:
  case F_TBZ: insn->kind = ARCH_INSN_BRANCH; break;
  case F_ADR:
  case F_ADRP:
  case F_LDR_LIT:
  case F_PRFM_LIT: insn->kind = ARCH_INSN_PCREL_DATA; break;
  case F_END: insn->kind = ARCH_INSN_END; break;
  case F_PCREL_OTHER: insn->kind = ARCH_INSN_OTHER; break;
  case F_PLAIN: insn->kind = ARCH_INSN_PLAIN; break;
  }
  return 0;
}

static int is_branch(enum form f)
{
  return f == F_B || f == F_BL || f == F_BCOND || f == F_CBZ || f == F_TBZ;
}

size_t arch_branch_scan_limit(const void *code, size_t len, uintptr_t pc, uintptr_t lo,
                              uintptr_t hi)
{
  /* Fixed width: every word is looked at; the last branch into [lo, hi)
   * bounds the scan exactly. A word the decoder would reject is never a
   * branch here either. */
  const uint8_t *p = code;
  size_t best = 0;
  for (size_t i = 0; i + 4 <= len; i += 4) {
    uint32_t w = get_u32(p + i);
    /* cheap pre-filter: the branch classes all have bits 28:26 = 101 */
    if ((w & 0x1c000000u) != 0x14000000u)
      continue;
    struct a64 d;
    if (classify(w, pc + i, &d) == 0 && is_branch(d.form) && d.target >= lo && d.target < hi)
      best = i + 4;
  }
  return best;
}

/* ---- writers ----------------------------------------------------------------- */

static uint32_t enc_b(uintptr_t pc, uintptr_t target, int link)
{
  int64_t delta = (int64_t)(target - pc);
  return (link ? 0x94000000u : 0x14000000u) | field(delta / 4, 26, 0);
}

static int b_reaches(uintptr_t pc, uintptr_t target)
{
  return fits((int64_t)(target - pc), 26, 4);
}

size_t arch_write_near_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  if (!b_reaches(pc, target))
    return 0;
  put_u32(dst, enc_b(pc, target, 0));
  return NEAR_JUMP_SIZE;
}

size_t arch_write_far_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  (void)pc;
  uint8_t *p = dst;
  put_u32(p, INSN_LDR_X16_8);
  put_u32(p + 4, INSN_BR_X16);
  put_u64(p + 8, target);
  return FAR_JUMP_SIZE;
}

size_t arch_write_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  size_t n = arch_write_near_jump(dst, pc, target);
  return n ? n : arch_write_far_jump(dst, pc, target);
}

static int adrp_reaches(uintptr_t pc, uintptr_t address)
{
  int64_t pages = (int64_t)((address >> 12) - (pc >> 12));
  return pages >= -((int64_t)1 << 20) && pages < ((int64_t)1 << 20);
}

static uint32_t enc_adrp(unsigned rd, uintptr_t pc, uintptr_t address)
{
  int64_t pages = (int64_t)((address >> 12) - (pc >> 12));
  return 0x90000000u | (uint32_t)(pages & 3) << 29 | field(pages >> 2, 19, 5) | rd;
}

static uint32_t enc_adr(unsigned rd, uintptr_t pc, uintptr_t address)
{
  int64_t delta = (int64_t)(address - pc);
  return 0x10000000u | (uint32_t)(delta & 3) << 29 | field(delta >> 2, 19, 5) | rd;
}

/* add xd, xn, #imm12 */
static uint32_t enc_add_imm(unsigned rd, unsigned rn, unsigned imm12)
{
  return 0x91000000u | (imm12 & 0xfff) << 10 | rn << 5 | rd;
}

/* ldr xt, [xn, #off] (unsigned offset, off a multiple of 8 below 32 KiB) */
static uint32_t enc_ldr_x_uimm(unsigned rt, unsigned rn, unsigned off)
{
  return 0xf9400000u | (off / 8) << 10 | rn << 5 | rt;
}

size_t arch_write_pointer_jump(void *dst, uintptr_t pc, uintptr_t slot)
{
  /* adrp x16, slot; ldr x16, [x16, #lo12]; br x16 (the slot is a pointer:
   * 8-byte aligned, so the scaled offset holds its low bits) */
  if ((slot & 7) || !adrp_reaches(pc, slot))
    return 0;
  uint8_t *p = dst;
  put_u32(p, enc_adrp(REG_IP0, pc, slot));
  put_u32(p + 4, enc_ldr_x_uimm(REG_IP0, REG_IP0, (unsigned)(slot & 0xfff)));
  put_u32(p + 8, INSN_BR_X16);
  return 12;
}

void arch_write_traps(void *dst, size_t n)
{
  uint8_t *p = dst;
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    put_u32(p + i, INSN_BRK);
  memset(p + i, 0, n - i);
}

size_t arch_inline_jump(const void *code, uintptr_t pc, uintptr_t *target)
{
  const uint8_t *p = code;
  uint32_t w = get_u32(p);
  if ((w & 0xfc000000u) == 0x14000000u) {
    *target = pc + (uintptr_t)(sign_extend(w, 26) * 4);
    return NEAR_JUMP_SIZE;
  }
  if (w == INSN_LDR_X16_8 && get_u32(p + 4) == INSN_BR_X16) {
    uint64_t v;
    memcpy(&v, p + 8, 8);
    *target = (uintptr_t)v;
    return FAR_JUMP_SIZE;
  }
  return 0;
}

size_t arch_read_jump(const void *code, uintptr_t pc, uintptr_t *target)
{
  size_t n = arch_inline_jump(code, pc, target);
  if (n)
    return n;
  /* the pointer jump: adrp x16; ldr x16, [x16, #lo12]; br x16 */
  const uint8_t *p = code;
  uint32_t w0 = get_u32(p), w1 = get_u32(p + 4);
  struct a64 d;
  if ((w0 & 0x9f00001fu) == (0x90000000u | REG_IP0) && (w1 & 0xffc003ffu) == 0xf9400210u &&
      get_u32(p + 8) == INSN_BR_X16 && classify(w0, pc, &d) == 0) {
    uintptr_t slot = d.target + ((w1 >> 10) & 0xfff) * 8;
    memcpy(target, (const void *)slot, sizeof *target);
    return 12;
  }
  return 0;
}

uintptr_t arch_code_bytes(uintptr_t code) { return code; }

void arch_flush_icache(void *addr, size_t len)
{
#if defined(__aarch64__)
  /* dc cvau + ic ivau over the range, with the barriers: instruction fetch
   * on AArch64 is not coherent with data stores. */
  __builtin___clear_cache((char *)addr, (char *)addr + len);
#else
  /* built on another host for the relocator's tests: never executed */
  (void)addr;
  (void)len;
#endif
}

void arch_write_live_patch(void *at, const void *patch, size_t n)
{
  uint32_t *words = at;
  const uint8_t *bytes = patch;
  if (n <= 4) {
    /* one aligned word: a single-copy atomic store */
    __atomic_store_n(words, get_u32(bytes), __ATOMIC_SEQ_CST);
    return;
  }
  /* The far patch (ldr x16, #8; br x16; .quad) spans four words. Park
   * entering threads on a branch-to-self in the first, make the tail
   * visible to instruction fetch, then replace the branch with the head. A
   * thread never runs the new br x16 without the ldr before it. */
  __atomic_store_n(words, INSN_B_SELF, __ATOMIC_SEQ_CST);
  arch_flush_icache(at, 4);
  for (size_t i = 4; i + 4 <= n; i += 4)
    __atomic_store_n(&words[i / 4], get_u32(bytes + i), __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  arch_flush_icache(at, n);
  __atomic_store_n(words, get_u32(bytes), __ATOMIC_SEQ_CST);
}

size_t arch_entry_landing_pad(const void *code)
{
  /* bti c / bti jc, and paciasp / pacibsp, which are implicit bti c */
  uint32_t w = get_u32(code);
  return w == INSN_BTI_C || w == INSN_BTI_JC || w == INSN_PACIASP || w == INSN_PACIBSP ? 4 : 0;
}

size_t arch_write_pad_undo(void *dst, const void *pad)
{
  /* A kept paciasp has signed x30 with sp as the modifier before the patch
   * runs; the replacement must see the plain return address. sp is still
   * the entry's, so autiasp restores exactly what paciasp changed. */
  uint32_t w = get_u32(pad);
  if (w == INSN_PACIASP || w == INSN_PACIBSP) {
    put_u32(dst, w == INSN_PACIASP ? INSN_AUTIASP : INSN_AUTIBSP);
    return 4;
  }
  return 0;
}

/* ---- relocation ---------------------------------------------------------- */

struct reloc_ctx {
  uint8_t *dst;
  uintptr_t dst_pc;
  size_t cap;
  size_t written;
  int overflow;
  unsigned absolute_jumps; /* jumps written through x16 */
};

static uintptr_t here(const struct reloc_ctx *c) { return c->dst_pc + c->written; }

static void emit(struct reloc_ctx *c, uint32_t w)
{
  if (c->written + 4 > c->cap) {
    c->overflow = 1;
    return;
  }
  put_u32(c->dst + c->written, w);
  c->written += 4;
}

static void emit_u64(struct reloc_ctx *c, uint64_t v)
{
  emit(c, (uint32_t)v);
  emit(c, (uint32_t)(v >> 32));
}

/* movz/movk: the 64-bit constant v into xd, one instruction per non-zero
 * halfword (at least one). */
static void emit_mov64(struct reloc_ctx *c, unsigned rd, uint64_t v)
{
  int first = 1;
  for (unsigned hw = 0; hw < 4; hw++) {
    unsigned imm = (unsigned)(v >> (16 * hw)) & 0xffff;
    if (!imm && !(first && hw == 3))
      continue;
    emit(c, (first ? 0xd2800000u : 0xf2800000u) | hw << 21 | imm << 5 | rd);
    first = 0;
  }
}

/* The address `a` into xd: adr, adrp (+ add), or movz/movk. */
static void emit_address(struct reloc_ctx *c, unsigned rd, uintptr_t a)
{
  if (fits((int64_t)(a - here(c)), 21, 1)) {
    emit(c, enc_adr(rd, here(c), a));
  } else if (adrp_reaches(here(c), a)) {
    emit(c, enc_adrp(rd, here(c), a));
    if (a & 0xfff)
      emit(c, enc_add_imm(rd, rd, (unsigned)(a & 0xfff)));
  } else {
    emit_mov64(c, rd, a);
  }
}

/* A jump to target from here: b when in reach, else through x16. */
static void emit_jump(struct reloc_ctx *c, uintptr_t target)
{
  if (b_reaches(here(c), target)) {
    emit(c, enc_b(here(c), target, 0));
  } else {
    emit(c, INSN_LDR_X16_8);
    emit(c, INSN_BR_X16);
    emit_u64(c, target);
    c->absolute_jumps++;
  }
}

/* Replace the displacement field of a conditional branch by `units`. */
static uint32_t with_displacement(const struct a64 *d, int64_t units)
{
  if (d->form == F_TBZ)
    return (d->word & ~0x0007ffe0u) | field(units, 14, 5);
  return (d->word & ~0x00ffffe0u) | field(units, 19, 5);
}

/* The same test with the opposite outcome. */
static uint32_t inverted(const struct a64 *d)
{
  if (d->form == F_BCOND)
    return (d->word & ~0x1fu) | ((d->word & 0xf) ^ 1); /* bc.cond's hint bit dropped */
  return d->word ^ (1u << 24);                      /* cbz <-> cbnz, tbz <-> tbnz */
}

static void relocate_conditional(struct reloc_ctx *c, const struct a64 *d)
{
  unsigned bits = d->form == F_TBZ ? 14 : 19;
  int64_t delta = (int64_t)(d->target - here(c));
  if (d->form == F_BCOND && (d->word & 0xe) == 0xe) {
    emit_jump(c, d->target); /* b.al / b.nv: always taken */
  } else if (fits(delta, bits, 4)) {
    emit(c, with_displacement(d, delta / 4));
  } else {
    /* inverted test over the jump: taken means "skip the jump" */
    int far = !b_reaches(here(c) + 4, d->target);
    emit(c, with_displacement(&(struct a64){d->form, inverted(d), 0, 0, 0, 0}, far ? 5 : 2));
    emit_jump(c, d->target);
  }
}

/* Load size bytes from `address` into the destination of the literal load
 * d (same register, same extension), through base register `base`. */
static void emit_load(struct reloc_ctx *c, const struct a64 *d, unsigned base, uintptr_t address)
{
  uint32_t w = d->word;
  unsigned rt = w & 0x1f, opc = w >> 30, simd = (w >> 26) & 1;
  unsigned size = d->size;
  unsigned lo = (unsigned)(address & 0xfff);
  if (adrp_reaches(here(c), address) && lo % size == 0) {
    emit(c, enc_adrp(base, here(c), address));
  } else {
    emit_address(c, base, address);
    lo = 0;
  }
  /* load/store register (unsigned offset): size, V, opc */
  uint32_t op;
  if (simd)
    op = opc == 0 ? 0xbd400000u : opc == 1 ? 0xfd400000u : 0x3dc00000u; /* s, d, q */
  else
    op = opc == 0 ? 0xb9400000u : opc == 1 ? 0xf9400000u : 0xb9800000u; /* w, x, sw */
  emit(c, op | (lo / size) << 10 | base << 5 | rt);
}

/* Loads and stores that may write a register besides Rt: the second
 * register of pairs and the status of exclusives (bits 14:10, 20:16), the
 * base of writeback forms (bits 9:5). */
static uint32_t load_store_extra(uint32_t w)
{
  uint32_t rt2 = 1u << ((w >> 10) & 0x1f), rs = 1u << ((w >> 16) & 0x1f), rn = 1u << ((w >> 5) & 0x1f);
  if ((w & 0x3f000000u) == 0x08000000u) /* exclusive, ordered, compare-and-swap */
    return rt2 | rs;
  if ((w & 0x38000000u) == 0x28000000u) /* pairs: post-, pre-index write back */
    return rt2 | (((w >> 23) & 1) ? rn : 0);
  if ((w & 0x3b200000u) == 0x38000000u && ((w >> 10) & 1)) /* register, post-/pre-index */
    return rn;
  if ((w & 0xbe800000u) == 0x0c800000u) /* SIMD structures, post-index */
    return rn;
  if ((w & 0xff200000u) == 0xd9200000u || (w & 0xff200400u) == 0xf8200400u)
    return rn; /* memory tags, ldraa/ldrab: writeback forms */
  return 0;
}

/* General registers an instruction may write, as a bit set over x0..x30.
 * An overestimate: the destination field of everything but branches and
 * system instructions (stores included), load_store_extra(), and of branches
 * and system instructions what bl, blr, mrs and sysl write. */
static uint32_t may_write(uint32_t w)
{
  uint32_t regs;
  if ((w & 0x1c000000u) == 0x14000000u) { /* branches, exceptions, system */
    if ((w & 0x7c000000u) == 0x14000000u || (w & 0xfe000000u) == 0xd6000000u)
      regs = (w >> 31) || ((w >> 21) & 0xf) == 1 || ((w >> 21) & 0xf) == 9 ? 1u << REG_LR : 0;
    else
      regs = (w & 0xfff00000u) == 0xd5300000u || (w & 0xfff80000u) == 0xd5280000u
                 ? 1u << (w & 0x1f) /* mrs, sysl */
                 : 0;
  } else {
    regs = 1u << (w & 0x1f);
    if ((w & 0x0a000000u) == 0x08000000u)
      regs |= load_store_extra(w);
  }
  return regs & 0x7fffffffu;
}

struct window {
  const uint8_t *code;
  uintptr_t src_pc;
  uint32_t written_regs;  /* may_write() of the instructions relocated so far */
  struct message *m;
};

static enum arch_reloc_status refuse(struct window *win, const struct a64 *d, const char *what)
{
  message_str(message_hex(message_str(message_str(win->m, d->name), " at +"), d->pc - win->src_pc),
              ": ");
  message_str(win->m, what);
  return ARCH_RELOC_UNRELOCATABLE;
}

/* A rewrite that needs scratch register `reg` after an earlier instruction
 * of the window may have set it. */
static int scratch_taken(const struct window *win, unsigned reg)
{
  return (win->written_regs >> reg) & 1;
}

/* One source instruction; `last` when it ends the window. */
static enum arch_reloc_status relocate_one(struct reloc_ctx *c, struct window *win,
                                           const struct a64 *d, int last)
{
  unsigned rt = d->word & 0x1f;
  unsigned absolute_before = c->absolute_jumps;
  switch (d->form) {
  case F_PLAIN:
  case F_END:
    emit(c, d->word);
    break;
  case F_PCREL_OTHER:
    return refuse(win, d, "this PC-relative form is not relocated");
  case F_B:
    emit_jump(c, d->target);
    break;
  case F_BL:
    if (last) {
      /* The callee returns to the instruction after the window, in the
       * original function, as it would have from the original bl. */
      emit_mov64(c, REG_LR, d->pc + 4);
      emit_jump(c, d->target);
    } else if (b_reaches(here(c), d->target)) {
      emit(c, enc_b(here(c), d->target, 1));
    } else {
      /* returns into the trampoline, after the absolute jump */
      emit(c, enc_adr(REG_LR, here(c), here(c) + 4 + FAR_JUMP_SIZE));
      emit_jump(c, d->target);
    }
    break;
  case F_BCOND:
  case F_CBZ:
  case F_TBZ:
    relocate_conditional(c, d);
    break;
  case F_ADR:
    if (rt == REG_ZR)
      emit(c, INSN_NOP); /* writes xzr: nothing */
    else
      emit_address(c, rt, d->target);
    break;
  case F_ADRP:
    if (rt == REG_ZR)
      emit(c, INSN_NOP);
    else if (adrp_reaches(here(c), d->target))
      emit(c, enc_adrp(rt, here(c), d->target));
    else
      emit_mov64(c, rt, d->target);
    break;
  case F_PRFM_LIT:
    if (fits((int64_t)(d->target - here(c)), 19, 4))
      emit(c, (d->word & ~0x00ffffe0u) | field((int64_t)(d->target - here(c)) / 4, 19, 5));
    else
      emit(c, INSN_NOP); /* a prefetch out of reach is dropped: it is only a hint */
    break;
  case F_LDR_LIT: {
    int64_t delta = (int64_t)(d->target - here(c));
    if (fits(delta, 19, 4)) {
      emit(c, (d->word & ~0x00ffffe0u) | field(delta / 4, 19, 5));
      break;
    }
    /* an integer load addresses through its own destination; an FP/SIMD
     * one (or a load into xzr) through x17 */
    int simd = (d->word >> 26) & 1;
    unsigned base = simd || rt == REG_ZR ? REG_IP1 : rt;
    if (base == REG_IP1 && scratch_taken(win, REG_IP1))
      return refuse(win, d, "an earlier instruction may set x17, which the far literal load needs");
    emit_load(c, d, base, d->target);
    break;
  }
  }
  if (c->absolute_jumps != absolute_before && scratch_taken(win, REG_IP0))
    return refuse(win, d, "an earlier instruction may set x16, which the absolute jump needs");
  win->written_regs |= may_write(d->word);
  return ARCH_RELOC_OK;
}

/* Where an instruction of the window points inside the window itself (a
 * branch, a literal, an address taken), the copy would reach bytes the patch
 * has replaced. */
static int points_into(const struct a64 *d, uintptr_t lo, uintptr_t hi)
{
  return d->form != F_PLAIN && d->form != F_END && d->form != F_ADRP &&
         d->form != F_PRFM_LIT && d->form != F_PCREL_OTHER && d->target >= lo && d->target < hi;
}

enum arch_reloc_status arch_relocate(const void *src, uintptr_t src_pc, size_t min_bytes,
                                     size_t src_limit, void *dst, uintptr_t dst_pc,
                                     size_t dst_cap, struct arch_relocation *out)
{
  struct message m = message_start(out->reason, sizeof out->reason);
  struct reloc_ctx c = {dst, dst_pc, dst_cap, 0, 0, 0};
  struct window win = {src, src_pc, 0, &m};
  struct a64 insns[ARCH_MAX_WINDOW / 4];
  size_t consumed = 0;
  unsigned n = 0;
  out->instructions = 0;

  if (src_limit && src_limit < min_bytes) {
    message_dec(message_str(&m, "function is "), src_limit);
    message_dec(message_str(&m, " bytes, the patch needs "), min_bytes);
    message_str(&m, " bytes of whole instructions");
    return ARCH_RELOC_TOO_SHORT;
  }
  if ((src_pc & 3) || min_bytes > ARCH_MAX_WINDOW) {
    message_str(&m, (src_pc & 3) ? "entry is not 4-byte aligned" : "window too long");
    return ARCH_RELOC_UNDECODABLE;
  }
  for (; consumed < min_bytes; consumed += 4, n++) {
    struct a64 *d = &insns[n];
    if (classify(get_u32(win.code + consumed), src_pc + consumed, d) != 0) {
      message_hex(message_str(&m, "invalid instruction at +"), consumed);
      return ARCH_RELOC_UNDECODABLE;
    }
    enum arch_reloc_status st = relocate_one(&c, &win, d, consumed + 4 >= min_bytes);
    if (st != ARCH_RELOC_OK)
      return st;
    if (c.overflow) {
      message_str(&m, "trampoline buffer too small");
      return ARCH_RELOC_NO_SPACE;
    }
    if ((d->form == F_END || d->form == F_B) && consumed + 4 < min_bytes && !src_limit) {
      message_dec(message_str(&m, "code flow ends after "), consumed + 4);
      message_str(&m, " bytes and the function size is unknown");
      return ARCH_RELOC_TOO_SHORT;
    }
  }
  for (unsigned i = 0; i < n; i++)
    if (points_into(&insns[i], src_pc, src_pc + consumed)) {
      message_str(&m, insns[i].name);
      message_hex(message_str(&m, " at +"), insns[i].pc - src_pc);
      message_hex(message_str(&m, is_branch(insns[i].form) ? " branches to +" : " refers to +"),
                  insns[i].target - src_pc);
      message_str(&m, ", inside the patch window");
      return ARCH_RELOC_UNRELOCATABLE;
    }
  /* The caller's jump back goes through x16 when it is out of b reach; it
   * is never reached after a last instruction that does not fall through
   * (ret, br, b, and bl, which returns past the window). */
  enum form last = insns[n - 1].form;
  int falls_through = last != F_END && last != F_B && last != F_BL;
  if (falls_through && !b_reaches(here(&c), src_pc + consumed) && scratch_taken(&win, REG_IP0)) {
    message_str(&m, "an instruction of the window may set x16, which the absolute jump back needs");
    return ARCH_RELOC_UNRELOCATABLE;
  }
  out->consumed = consumed;
  out->written = c.written;
  out->instructions = n;
  return ARCH_RELOC_OK;
}
