/* ARM32 decoder, relocator and writer for the hook engine (see arch.h):
 * the A32 and Thumb-2 instruction sets of ARMv7-A (Debian armhf).
 *
 * The instruction set of an address is its low bit, as everywhere on ARM:
 * a pc or a code address with bit 0 set is Thumb, and its bytes start one
 * byte lower (the `code` pointers the engine passes carry the same bit;
 * bit 0 of a pointer is ignored when reading or writing bytes). Branch
 * targets are reported the same way: a Thumb target odd, an A32 one even.
 * Everything the writers put at an even pc is A32, at an odd pc Thumb.
 *
 * Patches:
 *   near (4 bytes)  A32 b (+-32 MiB); Thumb b.w (+-16 MiB)
 *   far (8 bytes)   A32 ldr pc, [pc, #-4]; .word target
 *                   Thumb ldr.w pc, [pc, #0]; .word target
 *                   (a Thumb entry at 2 mod 4 gets a 16-bit nop first, so
 *                   that the literal is word-aligned, as a load into pc
 *                   requires: 10 bytes; the relocator takes the two more
 *                   bytes itself)
 * A load into pc interworks: bit 0 of the word picks the instruction set.
 * b.w cannot change it, so the jump arch_write_jump() writes at an even
 * (A32) pc, which the engine puts at the head of every trampoline, carries
 * a Thumb twin 8 bytes in: ldr.w pc, [pc, #-8], reading the same literal.
 * A Thumb function's near patch is a b.w to that twin; arch_read_jump()
 * reports the jump it belongs to. arch_near_reachable() uses b.w's reach.
 *
 * Trampolines are A32 (their addresses are even, as the engine gives them).
 * A Thumb window is relocated as Thumb code between two mode switches:
 *   ldr pc, [pc, #-4]; .word next|1      A32 -> Thumb, no register used
 *   ...relocated Thumb instructions...
 *   [nop]; bx pc; udf                    Thumb -> A32 at the next word
 * after which the engine's A32 jump back loads fn + consumed, odd.
 *
 * Relocated forms (each keeps its exact effect):
 *   b, b<cond>, cbz/cbnz (T16, T32, A32 b<cond>): a new displacement where
 *       it reaches, else an inverted short branch over an absolute jump;
 *   bl, blx imm: bl/blx where they reach, else lr set by hand and an
 *       absolute jump; as the window's last instruction lr is set to the
 *       return address in the original function, so the callee returns
 *       straight there;
 *   literal loads (ldr, ldrb, ldrh, ldrsb, ldrsh, ldrd, vldr; ldr.w): the
 *       address built with movw/movt in the destination register (ip for
 *       vldr), then the same load from it; a literal inside the window (its
 *       bytes are about to be replaced) is loaded as a constant instead;
 *   adr, addw/subw rd, pc, mov rd, pc: the value built with movw/movt;
 *   add rd, pc (T16): rd plus the constant, in at most four add.w;
 *   A32 data-processing and loads that read pc (add rd, pc, rm; ldr rt,
 *       [pc, rm]...): pc's value built in a free register (the destination,
 *       else ip), substituted for pc in the same instruction, condition kept;
 *   pld/pli literal: dropped (a hint);
 *   IT blocks: split, every instruction under its own condition (a plain
 *       instruction behind a one-instruction `it`, a rewritten one behind a
 *       short branch on the opposite condition); a window that ends inside
 *       an IT block takes the rest of the block too.
 * Refused, with the reason: uses of pc that cannot move (bx pc, add pc,
 * rm, tbb/tbh [pc], mov pc, pc..., stores of or relative to pc, a load into
 * pc relative to pc), branches and cbz inside an IT block, and a rewrite
 * that needs ip after the window may have set it. ip (r12) is the register
 * the procedure-call standard lets a veneer clobber between a call and the
 * callee's entry, as x16/x17 on AArch64.
 *
 * Encodings: Arm Architecture Reference Manual ARMv7-A/R, A5 (A32) and A6
 * (Thumb), A8 (instruction details).
 */
#include "arch.h"

#include <string.h>

#include "message.h"

#define NEAR_SIZE 4
#define FAR_SIZE 8
#define REG_IP 12
#define REG_SP 13
#define REG_LR 14
#define REG_PC 15
#define COND_AL 14

#define A32_LDR_PC_M4 0xe51ff004u /* ldr pc, [pc, #-4] */
#define A32_B_SELF 0xeafffffeu    /* b . */
#define A32_LDR_PC_IP 0xe59cf000u /* ldr pc, [ip] */
#define T_NOP 0xbf00u
#define T_B_SELF 0xe7feu          /* b.n . */
#define T_BX_PC 0x4778u
#define T_UDF 0xdef0u             /* udf #240 */
#define T_LDRW_PC1 0xf8dfu        /* ldr.w pc, [pc, #0] */
#define T_LDRW_PC2 0xf000u
#define T_LDRW_PC_M8_1 0xf85fu    /* ldr.w pc, [pc, #-8] */
#define T_LDRW_PC_M8_2 0xf008u
/* A word that traps in both instruction sets: A32 udf; Thumb udf in its
 * low halfword and, in its high one, a b.n back to that udf. */
#define TRAP_WORD 0xe7fddef0u

/* b.w (Thumb) reaches +-16 MiB, b (A32) twice that: the near patch serves
 * either within the shorter, less a margin that keeps every byte of a
 * trampoline chunk and of a patch window on the same side of the answer. */
#define NEAR_LIMIT (((int64_t)1 << 24) - 0x10000)

size_t arch_patch_size_near(void) { return NEAR_SIZE; }
size_t arch_patch_size_far(void) { return FAR_SIZE; }

int arch_near_reachable(uintptr_t from, uintptr_t to, size_t span)
{
  int64_t d1 = (int64_t)to - (int64_t)from, d2 = (int64_t)to - (int64_t)(from + span);
  return d1 > -NEAR_LIMIT && d1 < NEAR_LIMIT && d2 > -NEAR_LIMIT && d2 < NEAR_LIMIT;
}

uintptr_t arch_near_search_radius(void) { return (uintptr_t)(NEAR_LIMIT - 0x100000); }

static const uint8_t *bytes_of(const void *code)
{
  return (const uint8_t *)((uintptr_t)code & ~(uintptr_t)1);
}

static uint16_t get_u16(const uint8_t *p)
{
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

static uint32_t get_u32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static void put_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static int32_t sign_extend(uint32_t v, unsigned bits)
{
  uint32_t m = (uint32_t)1 << (bits - 1);
  v &= (uint32_t)(((uint64_t)1 << bits) - 1);
  return (int32_t)((v ^ m) - m);
}

/* Does a byte displacement fit a signed field of `bits` bits (units of
 * `scale` bytes)? */
static int fits(int64_t delta, unsigned bits, unsigned scale)
{
  if (delta % (int64_t)scale)
    return 0;
  int64_t units = delta / (int64_t)scale;
  return units >= -((int64_t)1 << (bits - 1)) && units < ((int64_t)1 << (bits - 1));
}

static uint32_t addr32(uintptr_t a) { return (uint32_t)a; }

/* ---- the instruction classes the relocator treats ------------------------ */

enum form {
  F_PLAIN,   /* position independent: copied */
  F_END,     /* flow does not fall through (pop {pc}, bx lr, udf...): copied */
  F_B,       /* unconditional branch, same instruction set */
  F_BCOND,   /* conditional branch (A32 b<cond>, T16/T32 b<cond>) */
  F_CBZ,     /* cbz / cbnz */
  F_CALL,    /* bl, blx imm (target carries the instruction set) */
  F_LIT,     /* Thumb literal load: ldr*, ldrd, vldr [pc, #imm] */
  F_PLD,     /* pld / pli relative to pc: a hint */
  F_ADR,     /* rd = a constant (adr, addw/subw rd, pc, mov rd, pc) */
  F_ADD_PC,  /* T16 add rd, pc: rd += pc's value */
  F_SUBST,   /* A32 instruction reading pc as Rn or Rm */
  F_IT,      /* it */
  F_REFUSE   /* a use of pc this relocator cannot move */
};

/* F_LIT loads */
enum lit_kind { L_WORD, L_BYTE, L_HALF, L_SBYTE, L_SHALF, L_DUAL, L_VFP };

struct insn {
  enum form form;
  int thumb;
  unsigned len;        /* 2 or 4 */
  uint32_t w;          /* A32 word; T16 halfword; T32 first halfword << 16 | second */
  uintptr_t pc;        /* with bit 0 set for Thumb */
  uintptr_t target;    /* branch target (with the instruction-set bit) or data address */
  int known;           /* target is known (not for register-offset forms) */
  unsigned cond;       /* A32 condition; F_BCOND's condition */
  unsigned rd, rt2;    /* destination(s); cbz: the register tested */
  enum lit_kind lit;   /* F_LIT */
  unsigned size;       /* F_LIT bytes */
  unsigned subst;      /* F_SUBST: 1 = Rn is pc, 2 = Rm is pc */
  unsigned operands;   /* F_SUBST: the other registers it reads (bit set) */
  int dest_ok;         /* F_SUBST: rd is written and not read */
  unsigned written;    /* registers the instruction may write (bit set, r0..r15) */
  const char *name;
  const char *why;     /* F_REFUSE */
};

static const char *const cond_b[16] = {"beq", "bne", "bhs", "blo", "bmi", "bpl", "bvs", "bvc",
                                       "bhi", "bls", "bge", "blt", "bgt", "ble", "b", "b"};

static unsigned reg_bit(unsigned r) { return 1u << (r & 15); }

static void refuse_form(struct insn *d, const char *name, const char *why)
{
  d->form = F_REFUSE;
  d->name = name;
  d->why = why;
}

/* ---- A32 ----------------------------------------------------------------- */

static int a32_dp_writes_rd(uint32_t w)
{
  unsigned opcode = (w >> 21) & 0xf;
  return !(opcode >= 8 && opcode <= 11); /* tst, teq, cmp, cmn */
}

static void classify_a32_dp(uint32_t w, struct insn *d)
{
  unsigned op = (w >> 25) & 7, opcode = (w >> 21) & 0xf;
  unsigned rn = (w >> 16) & 0xf, rd = (w >> 12) & 0xf, rm = w & 0xf;
  int reg = op == 0;
  if (reg && (w & 0x10)) { /* register-shifted register: pc anywhere is unpredictable */
    if (rn == REG_PC || rd == REG_PC || rm == REG_PC || ((w >> 8) & 0xf) == REG_PC)
      refuse_form(d, "dp", "uses pc in a register-shifted form");
    return;
  }
  int uses_rn = opcode != 13 && opcode != 15; /* mov, mvn have no Rn */
  unsigned subst = (uses_rn && rn == REG_PC ? 1u : 0u) | (reg && rm == REG_PC ? 2u : 0u);
  d->name = opcode == 4 ? "add" : opcode == 2 ? "sub" : opcode == 13 ? "mov" : "dp";
  if (rd == REG_PC && a32_dp_writes_rd(w)) {
    if (subst)
      refuse_form(d, d->name, "computes a jump from pc");
    else
      d->form = d->cond == COND_AL ? F_END : F_PLAIN;
    return;
  }
  if (subst) {
    d->form = F_SUBST;
    d->subst = subst;
    d->rd = rd;
    d->operands = (uses_rn && rn != REG_PC ? reg_bit(rn) : 0) | (reg && rm != REG_PC ? reg_bit(rm) : 0);
    d->dest_ok = a32_dp_writes_rd(w);
    if (!reg && uses_rn && (opcode == 4 || opcode == 2)) { /* adr */
      unsigned rot = ((w >> 8) & 0xf) * 2, imm = w & 0xff;
      uint32_t v = rot ? (imm >> rot) | (imm << (32 - rot)) : imm;
      d->target = opcode == 4 ? d->pc + 8 + v : d->pc + 8 - v;
      d->known = 1;
    }
  }
}

/* ldrh/strh/ldrsb/ldrsh/ldrd/strd */
static void classify_a32_extra(uint32_t w, struct insn *d)
{
  unsigned rn = (w >> 16) & 0xf, rt = (w >> 12) & 0xf, rm = w & 0xf;
  unsigned op2 = (w >> 5) & 3;
  int load = ((w >> 20) & 1) || op2 == 2, imm = (w >> 22) & 1;
  int p = (w >> 24) & 1, wb = (w >> 21) & 1;
  d->name = load ? (op2 == 2 && !((w >> 20) & 1) ? "ldrd" : "ldrh") : "strh";
  unsigned subst = (rn == REG_PC ? 1u : 0u) | (!imm && rm == REG_PC ? 2u : 0u);
  if (!subst) {
    if (rt == REG_PC)
      refuse_form(d, d->name, "transfers pc");
    return;
  }
  if (!load || rt == REG_PC || !p || wb || (subst & 2)) {
    refuse_form(d, d->name, load ? "a pc-relative form that cannot move" : "stores relative to pc");
    return;
  }
  d->form = F_SUBST;
  d->subst = subst;
  d->rd = rt;
  d->dest_ok = 1;
  if (imm) {
    uint32_t off = ((w >> 4) & 0xf0) | (w & 0xf);
    d->target = (w >> 23) & 1 ? d->pc + 8 + off : d->pc + 8 - off;
    d->known = 1;
  }
}

static void classify_a32(uint32_t w, uintptr_t pc, struct insn *d)
{
  unsigned cond = w >> 28, op = (w >> 25) & 7;
  unsigned rn = (w >> 16) & 0xf, rt = (w >> 12) & 0xf;
  d->cond = cond;
  d->written = reg_bit(rt) | reg_bit(rn);
  if (cond == 0xf) { /* the unconditional space */
    d->written = 0;
    if (op == 5) {
      d->form = F_CALL;
      d->name = "blx";
      d->target = (pc + 8 + (uintptr_t)(sign_extend(w, 24) * 4) + ((w >> 23) & 2)) | 1;
      d->written = reg_bit(REG_LR);
    } else if ((w & 0xff30f000u) == 0xf510f000u || (w & 0xff70f000u) == 0xf450f000u ||
               (w & 0xff30f010u) == 0xf710f000u || (w & 0xff70f010u) == 0xf650f000u) {
      if (rn == REG_PC) { /* pld / pldw / pli relative to pc */
        d->form = F_PLD;
        d->name = "pld";
      }
    } else if ((w & 0xfe500000u) == 0xf8100000u) {
      d->form = F_END;
      d->name = "rfe";
    }
    return;
  }
  switch (op) {
  case 0:
    if ((w & 0x90) == 0x90) {
      if ((w & 0x60) != 0)
        classify_a32_extra(w, d);
      else
        d->written |= reg_bit(w >> 8) | reg_bit(w); /* multiplies, swp, exclusives */
      return;
    }
    if ((w & 0x01900000u) == 0x01000000u) { /* miscellaneous */
      unsigned rm = w & 0xf;
      if ((w & 0x0ffffff0u) == 0x012fff10u || (w & 0x0ffffff0u) == 0x012fff30u) {
        int link = (w & 0x20) != 0;
        d->name = link ? "blx" : "bx";
        if (rm == REG_PC)
          refuse_form(d, d->name, "branches to pc");
        else if (!link && cond == COND_AL)
          d->form = F_END;
        d->written = link ? reg_bit(REG_LR) : 0;
      } else if ((w & 0x0ff000f0u) == 0x01200070u) {
        d->form = F_END;
        d->name = "bkpt";
      }
      return;
    }
    classify_a32_dp(w, d);
    return;
  case 1:
    if ((w & 0x01900000u) == 0x01000000u)
      return; /* movw, movt, msr immediate, hints */
    classify_a32_dp(w, d);
    return;
  case 2:
  case 3: {
    if (op == 3 && (w & 0x10)) {
      if ((w & 0x0ff000f0u) == 0x07f000f0u) {
        d->form = F_END;
        d->name = "udf";
      }
      return; /* media */
    }
    int load = (w >> 20) & 1, p = (w >> 24) & 1, wb = (w >> 21) & 1;
    unsigned rm = w & 0xf;
    d->name = load ? "ldr" : "str";
    if (rn == REG_PC) {
      if (!load || !p || wb)
        refuse_form(d, d->name, load ? "a pc-relative form that cannot move" : "stores relative to pc");
      else if (rt == REG_PC)
        refuse_form(d, d->name, "loads pc relative to pc");
      else if (op == 3 && rm == REG_PC)
        refuse_form(d, d->name, "uses pc twice");
      else {
        d->form = F_SUBST;
        d->subst = 1;
        d->rd = rt;
        d->dest_ok = 1;
        d->operands = op == 3 ? reg_bit(rm) : 0;
        if (op == 2) {
          uint32_t off = w & 0xfff;
          d->target = (w >> 23) & 1 ? pc + 8 + off : pc + 8 - off;
          d->known = 1;
        }
      }
      return;
    }
    if (op == 3 && rm == REG_PC)
      refuse_form(d, d->name, "uses pc as an offset");
    else if (rt == REG_PC && load)
      d->form = cond == COND_AL ? F_END : F_PLAIN;
    else if (rt == REG_PC)
      refuse_form(d, d->name, "stores pc");
    return;
  }
  case 4: {
    int load = (w >> 20) & 1;
    d->name = load ? "ldm" : "stm";
    d->written = load ? (w & 0xffff) | reg_bit(rn) : reg_bit(rn);
    if (rn == REG_PC)
      refuse_form(d, d->name, "uses pc as its base");
    else if ((w & 0x8000) && load)
      d->form = cond == COND_AL ? F_END : F_PLAIN;
    else if (w & 0x8000)
      refuse_form(d, d->name, "stores pc");
    return;
  }
  case 5: {
    int link = (w >> 24) & 1;
    d->target = pc + 8 + (uintptr_t)(sign_extend(w, 24) * 4);
    d->form = link ? F_CALL : cond == COND_AL ? F_B : F_BCOND;
    d->name = link ? "bl" : cond_b[cond];
    d->written = link ? reg_bit(REG_LR) : 0;
    return;
  }
  case 6:
    d->written = reg_bit(rn);
    if (rn != REG_PC)
      return;
    if ((w & 0x0f300e00u) == 0x0d100a00u) { /* vldr */
      uint32_t off = (w & 0xff) * 4;
      d->form = F_SUBST;
      d->subst = 1;
      d->rd = REG_PC; /* no core destination: the scratch register is ip */
      d->name = "vldr";
      d->target = (w >> 23) & 1 ? pc + 8 + off : pc + 8 - off;
      d->known = 1;
    } else {
      refuse_form(d, "ldc/stc", "a coprocessor transfer relative to pc");
    }
    return;
  default:
    d->written = reg_bit(rt); /* svc, coprocessor register transfers */
    return;
  }
}

/* ---- Thumb --------------------------------------------------------------- */

static uintptr_t thumb_base(const struct insn *d) { return ((d->pc & ~(uintptr_t)1) + 4) & ~(uintptr_t)3; }

static void classify_t16(uint16_t h, struct insn *d)
{
  uintptr_t pcv = (d->pc & ~(uintptr_t)1) + 4;
  d->written = reg_bit(h & 7) | reg_bit(h >> 8 & 7) | reg_bit(h >> 3 & 7);
  if ((h & 0xf800) == 0x4800) { /* ldr rt, [pc, #imm8] */
    d->form = F_LIT;
    d->name = "ldr";
    d->lit = L_WORD;
    d->size = 4;
    d->rd = (h >> 8) & 7;
    d->target = thumb_base(d) + (h & 0xff) * 4;
    d->known = 1;
  } else if ((h & 0xf800) == 0xa000) { /* adr rd, #imm8 */
    d->form = F_ADR;
    d->name = "adr";
    d->rd = (h >> 8) & 7;
    d->target = thumb_base(d) + (h & 0xff) * 4;
    d->known = 1;
  } else if ((h & 0xfc00) == 0x4400) { /* add / cmp / mov (high registers), bx, blx */
    unsigned rm = (h >> 3) & 0xf, rdn = ((h >> 4) & 8) | (h & 7), op = (h >> 8) & 3;
    d->written = op == 1 ? 0 : op == 3 ? ((h & 0x80) ? reg_bit(REG_LR) : 0) : reg_bit(rdn);
    if (op == 3) {
      int link = (h & 0x80) != 0;
      d->name = link ? "blx" : "bx";
      if (rm == REG_PC)
        refuse_form(d, d->name, "branches to pc");
      else if (!link)
        d->form = F_END;
      return;
    }
    d->name = op == 0 ? "add" : op == 1 ? "cmp" : "mov";
    if (rdn == REG_PC && op != 1) {
      if (rm == REG_PC || op == 0)
        refuse_form(d, d->name, "computes a jump from pc");
      else
        d->form = F_END; /* mov pc, rm */
    } else if (rm == REG_PC || (op == 1 && rdn == REG_PC)) {
      if (op == 1 || rdn == REG_SP)
        refuse_form(d, d->name, "a use of pc that cannot move");
      else {
        d->form = op == 0 ? F_ADD_PC : F_ADR;
        d->rd = rdn;
        d->target = pcv;
        d->known = 1;
      }
    }
  } else if ((h & 0xf000) == 0xd000) {
    unsigned cond = (h >> 8) & 0xf;
    if (cond == 0xe) {
      d->form = F_END;
      d->name = "udf";
    } else if (cond != 0xf) {
      d->form = F_BCOND;
      d->cond = cond;
      d->name = cond_b[cond];
      d->target = (pcv + (uintptr_t)(sign_extend(h, 8) * 2)) | 1;
      d->written = 0;
    }
  } else if ((h & 0xf800) == 0xe000) {
    d->form = F_B;
    d->name = "b";
    d->target = (pcv + (uintptr_t)(sign_extend(h, 11) * 2)) | 1;
    d->written = 0;
  } else if ((h & 0xf500) == 0xb100) {
    d->form = F_CBZ;
    d->name = (h & 0x800) ? "cbnz" : "cbz";
    d->rd = h & 7;
    d->target = (pcv + (((h >> 2) & 0x3e) | ((h >> 3) & 0x40))) | 1;
    d->written = 0;
  } else if ((h & 0xff00) == 0xbf00) {
    d->written = 0;
    if (h & 0xf) {
      d->form = F_IT;
      d->name = "it";
    }
  } else if ((h & 0xff00) == 0xbd00) {
    d->form = F_END;
    d->name = "pop";
    d->written = (h & 0xff) | reg_bit(REG_SP);
  } else if ((h & 0xff00) == 0xbe00) {
    d->form = F_END;
    d->name = "bkpt";
  }
}

/* The offset of b.w / bl / blx: S:I1:I2:imm10:imm11:0, I = not(J xor S). */
static int32_t t32_branch_offset(uint16_t h1, uint16_t h2)
{
  uint32_t s = (h1 >> 10) & 1, j1 = (h2 >> 13) & 1, j2 = (h2 >> 11) & 1;
  uint32_t i1 = !(j1 ^ s), i2 = !(j2 ^ s);
  uint32_t v = s << 24 | i1 << 23 | i2 << 22 | (uint32_t)(h1 & 0x3ff) << 12 | (uint32_t)(h2 & 0x7ff) << 1;
  return sign_extend(v, 25);
}

static void classify_t32_branch(uint16_t h1, uint16_t h2, struct insn *d)
{
  uintptr_t pcv = (d->pc & ~(uintptr_t)1) + 4;
  unsigned op = h2 & 0x5000;
  d->written = 0;
  if (op == 0x0000) {
    unsigned cond = (h1 >> 6) & 0xf;
    if ((cond & 0xe) != 0xe) { /* b<cond>.w */
      uint32_t s = (h1 >> 10) & 1, j1 = (h2 >> 13) & 1, j2 = (h2 >> 11) & 1;
      uint32_t v = s << 20 | j2 << 19 | j1 << 18 | (uint32_t)(h1 & 0x3f) << 12 | (uint32_t)(h2 & 0x7ff) << 1;
      d->form = F_BCOND;
      d->cond = cond;
      d->name = cond_b[cond];
      d->target = (pcv + (uintptr_t)sign_extend(v, 21)) | 1;
    } else if (h1 == 0xf3de && (h2 & 0xff00) == 0x8f00) {
      d->form = F_END; /* subs pc, lr, #imm */
      d->name = "subs";
    } else if ((h1 & 0xfff0) == 0xf3e0 || (h1 & 0xfff0) == 0xf3f0) {
      d->written = reg_bit(h2 >> 8); /* mrs */
    } else if ((h1 & 0xfff0) == 0xf7f0 && (h2 & 0xf000) == 0xa000) {
      d->form = F_END;
      d->name = "udf";
    }
    return;
  }
  int32_t off = t32_branch_offset(h1, h2);
  if (op == 0x1000) {
    d->form = F_B;
    d->name = "b.w";
    d->target = (pcv + (uintptr_t)off) | 1;
  } else if (op == 0x5000) {
    d->form = F_CALL;
    d->name = "bl";
    d->target = (pcv + (uintptr_t)off) | 1;
    d->written = reg_bit(REG_LR);
  } else {
    d->form = F_CALL;
    d->name = "blx";
    d->target = ((pcv & ~(uintptr_t)3) + (uintptr_t)off) & ~(uintptr_t)1;
    d->written = reg_bit(REG_LR);
    if (h2 & 1)
      refuse_form(d, "blx", "an unaligned blx target");
  }
}

static void classify_t32(uint16_t h1, uint16_t h2, struct insn *d)
{
  unsigned rn = h1 & 0xf, rt = h2 >> 12;
  d->written = reg_bit(rt) | reg_bit(h2 >> 8) | reg_bit(rn);
  if ((h1 & 0xf800) == 0xf000 && (h2 & 0x8000)) {
    classify_t32_branch(h1, h2, d);
    return;
  }
  if (((h1 & 0xfbff) == 0xf20f || (h1 & 0xfbff) == 0xf2af) && !(h2 & 0x8000)) {
    /* addw / subw rd, pc, #imm12 (adr.w) */
    uint32_t imm = ((uint32_t)(h1 >> 10) & 1) << 11 | ((uint32_t)(h2 >> 12) & 7) << 8 | (h2 & 0xff);
    d->form = F_ADR;
    d->name = "adr.w";
    d->rd = (h2 >> 8) & 0xf;
    d->target = (h1 & 0x00a0) ? thumb_base(d) - imm : thumb_base(d) + imm;
    d->known = 1;
    if (d->rd == REG_SP || d->rd == REG_PC)
      refuse_form(d, "adr.w", "a use of pc that cannot move");
    return;
  }
  if ((h1 & 0xfe00) == 0xf800) { /* load/store single */
    int load = (h1 >> 4) & 1;
    unsigned size = (h1 >> 5) & 3, sign = (h1 >> 8) & 1;
    static const char *const names[2][4] = {{"ldrb.w", "ldrh.w", "ldr.w", "ldr?"},
                                            {"ldrsb", "ldrsh", "ldr?", "ldr?"}};
    d->name = load ? names[sign][size] : "str.w";
    if (rn == REG_PC && load) {
      uint32_t imm = h2 & 0xfff;
      d->target = (h1 & 0x80) ? thumb_base(d) + imm : thumb_base(d) - imm;
      d->known = 1;
      if (rt == REG_PC && size == 0) {
        d->form = F_PLD;
        d->name = sign ? "pli" : "pld";
      } else if (rt == REG_PC && size == 2 && !sign) {
        refuse_form(d, "ldr.w", "loads pc relative to pc");
      } else if (rt == REG_PC || rt == REG_SP || size == 3 || (sign && size == 2)) {
        refuse_form(d, d->name, "a literal load that cannot move");
      } else {
        static const enum lit_kind kinds[2][3] = {{L_BYTE, L_HALF, L_WORD}, {L_SBYTE, L_SHALF, L_WORD}};
        d->form = F_LIT;
        d->lit = kinds[sign][size];
        d->size = 1u << size;
        d->rd = rt;
      }
    } else if (rn == REG_PC) {
      refuse_form(d, d->name, "stores relative to pc");
    } else if (load && rt == REG_PC && size == 2 && !sign) {
      d->form = F_END; /* ldr.w pc, [sp], #4 ... (byte and halfword forms are hints) */
    }
    return;
  }
  if ((h1 & 0xfe00) == 0xe800) { /* load/store multiple, dual, exclusive, table branch */
    if (!(h1 & 0x40)) {
      int load = (h1 >> 4) & 1;
      unsigned op = (h1 >> 7) & 3;
      d->name = load ? "ldm" : "stm";
      d->written = load ? h2 | reg_bit(rn) : reg_bit(rn);
      if (op == 0 || op == 3) {
        if (load) {
          d->form = F_END; /* rfe */
          d->name = "rfe";
        }
      } else if (rn == REG_PC) {
        refuse_form(d, d->name, "uses pc as its base");
      } else if (load && (h2 & 0x8000)) {
        d->form = F_END;
      }
      return;
    }
    if ((h1 & 0xfff0) == 0xe8d0 && (h2 & 0xffe0) == 0xf000) {
      d->name = (h2 & 0x10) ? "tbh" : "tbb";
      if (rn == REG_PC)
        refuse_form(d, d->name, "a table branch relative to pc");
      else
        d->form = F_END;
      return;
    }
    if (rn == REG_PC) {
      if ((h1 & 0xff7f) == 0xe95f && rt != REG_PC && rt != REG_SP && ((h2 >> 8) & 0xf) < REG_SP) {
        uint32_t imm = (h2 & 0xff) * 4;
        d->form = F_LIT;
        d->name = "ldrd";
        d->lit = L_DUAL;
        d->size = 8;
        d->rd = rt;
        d->rt2 = (h2 >> 8) & 0xf;
        d->target = (h1 & 0x80) ? thumb_base(d) + imm : thumb_base(d) - imm;
        d->known = 1;
      } else {
        refuse_form(d, (h1 & 0x10) ? "ldrd" : "strd", "a pc-relative form that cannot move");
      }
    }
    return;
  }
  if ((h1 & 0xee00) == 0xec00 && rn == REG_PC) { /* coprocessor and VFP loads/stores */
    if ((h1 & 0xff30) == 0xed10 && (h2 & 0x0e00) == 0x0a00) {
      uint32_t imm = (h2 & 0xff) * 4;
      d->form = F_LIT;
      d->name = "vldr";
      d->lit = L_VFP;
      d->size = (h2 & 0x100) ? 8 : 4;
      d->target = (h1 & 0x80) ? thumb_base(d) + imm : thumb_base(d) - imm;
      d->known = 1;
      d->written = 0;
    } else {
      refuse_form(d, "ldc/stc", "a coprocessor transfer relative to pc");
    }
    return;
  }
}

static int is_t32(uint16_t h1) { return (h1 & 0xe000) == 0xe000 && (h1 & 0x1800) != 0; }

/* Classify the instruction at `p` (running at pc, bit 0 = Thumb), with at
 * most `avail` bytes. -1 if there are not enough bytes. */
static int classify(const uint8_t *p, size_t avail, uintptr_t pc, struct insn *d)
{
  memset(d, 0, sizeof *d);
  d->pc = pc;
  d->cond = COND_AL;
  d->name = "insn";
  d->thumb = (int)(pc & 1);
  if (!d->thumb) {
    if (avail < 4 || (pc & 3))
      return -1;
    d->len = 4;
    d->w = get_u32(p);
    classify_a32(d->w, pc, d);
    return 0;
  }
  if (avail < 2)
    return -1;
  uint16_t h1 = get_u16(p);
  if (!is_t32(h1)) {
    d->len = 2;
    d->w = h1;
    classify_t16(h1, d);
    return 0;
  }
  if (avail < 4)
    return -1;
  uint16_t h2 = get_u16(p + 2);
  d->len = 4;
  d->w = (uint32_t)h1 << 16 | h2;
  classify_t32(h1, h2, d);
  return 0;
}

int arch_decode(const void *code, size_t avail, uintptr_t pc, struct arch_insn *insn)
{
  struct insn d;
  if (classify(bytes_of(code), avail, pc, &d) != 0)
    return -1;
  insn->pc = pc;
  insn->length = d.len;
  insn->target = d.target;
  insn->literal = d.form == F_LIT ? d.size : 0;
  size_t n = strlen(d.name);
  if (n >= sizeof insn->mnemonic)
    n = sizeof insn->mnemonic - 1;
  memcpy(insn->mnemonic, d.name, n);
  insn->mnemonic[n] = 0;
  switch (d.form) {
  case F_B: insn->kind = ARCH_INSN_JUMP; break;
  case F_BCOND:
  case F_CBZ: insn->kind = ARCH_INSN_BRANCH; break;
  case F_CALL: insn->kind = ARCH_INSN_CALL; break;
  case F_LIT:
  case F_PLD:
  case F_ADR:
  case F_ADD_PC:
  case F_SUBST: insn->kind = ARCH_INSN_PCREL_DATA; break;
  case F_END: insn->kind = ARCH_INSN_END; break;
  case F_REFUSE: insn->kind = ARCH_INSN_OTHER; break;
  case F_PLAIN:
  case F_IT: insn->kind = ARCH_INSN_PLAIN; break;
  }
  return 0;
}

static int is_branch(enum form f) { return f == F_B || f == F_BCOND || f == F_CBZ || f == F_CALL; }

size_t arch_branch_scan_limit(const void *code, size_t len, uintptr_t pc, uintptr_t lo,
                              uintptr_t hi)
{
  /* Every halfword (A32: word) is looked at as the start of a branch, so
   * the bound holds whichever way the variable-length Thumb stream is cut;
   * a position the sequential decode never reaches only lengthens it. */
  const uint8_t *p = bytes_of(code);
  unsigned step = (pc & 1) ? 2 : 4;
  lo &= ~(uintptr_t)1;
  size_t best = 0;
  for (size_t i = 0; i + step <= len; i += step) {
    struct insn d;
    if (classify(p + i, len - i, pc + i, &d) != 0)
      continue;
    uintptr_t t = d.target & ~(uintptr_t)1;
    if (is_branch(d.form) && t >= lo && t < hi && i + d.len > best)
      best = i + d.len;
  }
  return best;
}

/* ---- writers ----------------------------------------------------------------- */

static int a32_b_reaches(uintptr_t pc, uintptr_t target)
{
  return !(target & 3) && fits((int64_t)target - (int64_t)(pc + 8), 24, 4);
}

static uint32_t a32_b(unsigned cond, int link, uintptr_t pc, uintptr_t target)
{
  int64_t delta = ((int64_t)target - (int64_t)(pc + 8)) / 4;
  return cond << 28 | (link ? 0x0b000000u : 0x0a000000u) | ((uint32_t)delta & 0xffffff);
}

static int t32_b_reaches(uintptr_t pc, uintptr_t target)
{
  return (target & 1) &&
         fits((int64_t)(target & ~(uintptr_t)1) - (int64_t)((pc & ~(uintptr_t)1) + 4), 24, 2);
}

/* b.w (T4), bl (T1), blx (T2: to A32, from the aligned pc) */
static void t32_branch(uint16_t out[2], unsigned kind, uintptr_t pc, uintptr_t target)
{
  uintptr_t from = kind == 0xc000 ? (pc + 4) & ~(uintptr_t)3 : (pc & ~(uintptr_t)1) + 4;
  uint32_t off = (uint32_t)((target & ~(uintptr_t)1) - from);
  uint32_t s = (off >> 24) & 1, i1 = (off >> 23) & 1, i2 = (off >> 22) & 1;
  uint32_t j1 = !(i1 ^ s), j2 = !(i2 ^ s);
  out[0] = (uint16_t)(0xf000 | s << 10 | ((off >> 12) & 0x3ff));
  out[1] = (uint16_t)(kind | j1 << 13 | j2 << 11 | ((off >> 1) & 0x7ff));
  if (kind == 0xc000)
    out[1] &= 0xfffe;
}

/* The far form at pc: its length (8, or 10 for Thumb at 2 mod 4). */
static size_t far_length(uintptr_t pc)
{
  return (pc & 1) && (pc & 2) ? 10 : 8;
}

size_t arch_write_far_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  uint8_t *p = (uint8_t *)bytes_of(dst);
  if (!(pc & 1)) {
    put_u32(p, A32_LDR_PC_M4);
    put_u32(p + 4, addr32(target));
    return 8;
  }
  size_t n = 0;
  if (pc & 2) {
    put_u16(p, T_NOP);
    n = 2;
  }
  put_u16(p + n, T_LDRW_PC1);
  put_u16(p + n + 2, T_LDRW_PC2);
  put_u32(p + n + 4, addr32(target));
  return n + 8;
}

/* The A32 jump at an even pc that arch_write_jump() writes carries a Thumb
 * twin 8 bytes in (ldr.w pc, [pc, #-8], the same literal): a Thumb b.w,
 * which cannot change the instruction set, enters there. */
#define THUMB_TWIN 8

size_t arch_write_near_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  uint8_t *p = (uint8_t *)bytes_of(dst);
  if (!(pc & 1)) {
    if (!a32_b_reaches(pc, target))
      return 0;
    put_u32(p, a32_b(COND_AL, 0, pc, target));
    return 4;
  }
  /* a Thumb site: a Thumb target, or the Thumb twin of an A32 jump */
  uintptr_t to = (target & 1) ? target : (target + THUMB_TWIN) | 1;
  if (!t32_b_reaches(pc, to))
    return 0;
  uint16_t b[2];
  t32_branch(b, 0x9000, pc, to);
  put_u16(p, b[0]);
  put_u16(p + 2, b[1]);
  return 4;
}

size_t arch_write_jump(void *dst, uintptr_t pc, uintptr_t target)
{
  if (pc & 1) {
    size_t n = (target & 1) ? arch_write_near_jump(dst, pc, target) : 0;
    return n ? n : arch_write_far_jump(dst, pc, target);
  }
  /* A32: the load into pc, then its Thumb twin */
  uint8_t *p = (uint8_t *)bytes_of(dst);
  arch_write_far_jump(p, pc, target);
  put_u16(p + THUMB_TWIN, T_LDRW_PC_M8_1);
  put_u16(p + THUMB_TWIN + 2, T_LDRW_PC_M8_2);
  return 12;
}

static uint32_t a32_movw(unsigned cond, unsigned rd, uint32_t v, int top)
{
  v = top ? v >> 16 : v & 0xffff;
  return cond << 28 | (top ? 0x03400000u : 0x03000000u) | (v >> 12) << 16 | rd << 12 | (v & 0xfff);
}

size_t arch_write_pointer_jump(void *dst, uintptr_t pc, uintptr_t slot)
{
  /* movw ip, #:lower16:slot; movt ip, #:upper16:slot; ldr pc, [ip] (A32) */
  if (pc & 1)
    return 0;
  uint8_t *p = (uint8_t *)bytes_of(dst);
  put_u32(p, a32_movw(COND_AL, REG_IP, addr32(slot), 0));
  put_u32(p + 4, a32_movw(COND_AL, REG_IP, addr32(slot), 1));
  put_u32(p + 8, A32_LDR_PC_IP);
  return 12;
}

void arch_write_traps(void *dst, size_t n)
{
  uint8_t *p = dst;
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    put_u32(p + i, TRAP_WORD);
  if (i + 2 <= n) {
    put_u16(p + i, T_UDF);
    i += 2;
  }
  memset(p + i, 0, n - i);
}

/* the A32 jump with its Thumb twin at p */
static int is_twin_jump(const uint8_t *p)
{
  return get_u32(p) == A32_LDR_PC_M4 && get_u16(p + THUMB_TWIN) == T_LDRW_PC_M8_1 &&
         get_u16(p + THUMB_TWIN + 2) == T_LDRW_PC_M8_2;
}

size_t arch_inline_jump(const void *code, uintptr_t pc, uintptr_t *target)
{
  const uint8_t *p = bytes_of(code);
  if (!(pc & 1)) {
    uint32_t w = get_u32(p);
    if (w == A32_LDR_PC_M4) {
      *target = get_u32(p + 4);
      return is_twin_jump(p) ? 12 : 8;
    }
    if ((w & 0xff000000u) == 0xea000000u) {
      *target = pc + 8 + (uintptr_t)(sign_extend(w, 24) * 4);
      return 4;
    }
    return 0;
  }
  uint16_t h1 = get_u16(p), h2 = get_u16(p + 2);
  if ((h1 & 0xf800) == 0xf000 && (h2 & 0xd000) == 0x9000) { /* b.w */
    *target = ((pc & ~(uintptr_t)1) + 4 + (uintptr_t)t32_branch_offset(h1, h2)) | 1;
    return 4;
  }
  size_t n = (pc & 2) && h1 == T_NOP ? 2 : 0;
  if (get_u16(p + n) == T_LDRW_PC1 && get_u16(p + n + 2) == T_LDRW_PC2 &&
      !((pc - 1 + n) & 3)) {
    *target = get_u32(p + n + 4);
    return n + 8;
  }
  return 0;
}

size_t arch_read_jump(const void *code, uintptr_t pc, uintptr_t *target)
{
  size_t n = arch_inline_jump(code, pc, target);
  if (n && (pc & 1) && n == 4) {
    /* a b.w into the Thumb twin of an A32 jump: that jump is the target */
    uintptr_t at = *target & ~(uintptr_t)1;
    if (!(at & 3) && at >= THUMB_TWIN && is_twin_jump((const uint8_t *)(at - THUMB_TWIN)))
      *target = at - THUMB_TWIN;
    return n;
  }
  if (n || (pc & 1))
    return n;
  const uint8_t *p = bytes_of(code);
  uint32_t w0 = get_u32(p), w1 = get_u32(p + 4);
  if ((w0 & 0xfff0f000u) == 0xe300c000u && (w1 & 0xfff0f000u) == 0xe340c000u &&
      get_u32(p + 8) == A32_LDR_PC_IP) {
    uint32_t slot = (w0 & 0xfff) | ((w0 >> 4) & 0xf000) | (w1 & 0xfff) << 16 | ((w1 >> 16) & 0xf) << 28;
    memcpy(target, (const void *)(uintptr_t)slot, sizeof *target);
    return 12;
  }
  return 0;
}

uintptr_t arch_code_bytes(uintptr_t code) { return (uintptr_t)bytes_of((const void *)code); }

void arch_flush_icache(void *addr, size_t len)
{
#if defined(__arm__)
  char *start = (char *)((uintptr_t)addr & ~(uintptr_t)1);
  __builtin___clear_cache(start, (char *)addr + len + 1);
#else
  /* built on another host for the relocator's tests: never executed */
  (void)addr;
  (void)len;
#endif
}

void arch_write_live_patch(void *at, const void *patch, size_t n)
{
  /* Park entering threads on a branch-to-self in the first unit (an A32
   * word, a Thumb halfword), make the rest visible to instruction fetch,
   * then store the first unit. Every store is single-copy atomic. */
  uint8_t *p = (uint8_t *)bytes_of(at);
  const uint8_t *src = patch;
  if ((uintptr_t)at & 1) {
    uint16_t *h = (uint16_t *)(void *)p;
    __atomic_store_n(h, (uint16_t)T_B_SELF, __ATOMIC_SEQ_CST);
    arch_flush_icache(at, 2);
    for (size_t i = 2; i + 2 <= n; i += 2)
      __atomic_store_n(&h[i / 2], get_u16(src + i), __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    arch_flush_icache(at, n);
    __atomic_store_n(h, get_u16(src), __ATOMIC_SEQ_CST);
    return;
  }
  uint32_t *w = (uint32_t *)(void *)p;
  if (n <= 4) {
    __atomic_store_n(w, get_u32(src), __ATOMIC_SEQ_CST);
    return;
  }
  __atomic_store_n(w, A32_B_SELF, __ATOMIC_SEQ_CST);
  arch_flush_icache(at, 4);
  for (size_t i = 4; i + 4 <= n; i += 4)
    __atomic_store_n(&w[i / 4], get_u32(src + i), __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  arch_flush_icache(at, n);
  __atomic_store_n(w, get_u32(src), __ATOMIC_SEQ_CST);
}

size_t arch_entry_landing_pad(const void *code)
{
  (void)code; /* ARMv7 has no branch-target landing pads */
  return 0;
}

size_t arch_write_pad_undo(void *dst, const void *pad)
{
  (void)dst;
  (void)pad;
  return 0;
}

/* ---- relocation ---------------------------------------------------------- */

struct reloc_ctx {
  uint8_t *dst;
  uintptr_t dst_pc; /* even: where dst runs */
  size_t cap;
  size_t written;
  int overflow;
};

static uintptr_t here(const struct reloc_ctx *c) { return c->dst_pc + c->written; }

static void emit16(struct reloc_ctx *c, uint16_t h)
{
  if (c->written + 2 > c->cap) {
    c->overflow = 1;
    return;
  }
  put_u16(c->dst + c->written, h);
  c->written += 2;
}

static void emit32(struct reloc_ctx *c, uint32_t w)
{
  emit16(c, (uint16_t)w);
  emit16(c, (uint16_t)(w >> 16));
}

/* a T32 instruction: first halfword, then second */
static void emit_t32(struct reloc_ctx *c, uint16_t h1, uint16_t h2)
{
  emit16(c, h1);
  emit16(c, h2);
}

/* Thumb movw/movt rd, #v */
static void t_mov32(struct reloc_ctx *c, unsigned rd, uint32_t v)
{
  for (int top = 0; top < 2; top++) {
    uint32_t x = top ? v >> 16 : v & 0xffff;
    emit_t32(c, (uint16_t)((top ? 0xf2c0 : 0xf240) | ((x >> 11) & 1) << 10 | (x >> 12)),
             (uint16_t)(((x >> 8) & 7) << 12 | rd << 8 | (x & 0xff)));
  }
}

static void t_far_jump(struct reloc_ctx *c, uintptr_t target)
{
  if (here(c) & 2)
    emit16(c, T_NOP);
  emit_t32(c, T_LDRW_PC1, T_LDRW_PC2);
  emit32(c, addr32(target));
}

static void t_jump(struct reloc_ctx *c, uintptr_t target)
{
  if (t32_b_reaches(here(c), target)) {
    uint16_t b[2];
    t32_branch(b, 0x9000, here(c), target);
    emit_t32(c, b[0], b[1]);
  } else {
    t_far_jump(c, target);
  }
}

/* Thumb add.w rd, rd, #v as at most four modified immediates, highest byte
 * first (each an 8-bit field with its top bit set, rotated into place). */
static void t_add_const(struct reloc_ctx *c, unsigned rd, uint32_t v)
{
  while (v) {
    unsigned top = 31 - (unsigned)__builtin_clz(v);
    uint32_t imm12;
    if (top < 8) {
      imm12 = v & 0xff;
      v = 0;
    } else {
      unsigned shift = top - 7;
      uint32_t b = (v >> shift) & 0xff;
      imm12 = (32 - shift) << 7 | (b & 0x7f);
      v &= ~(0xffu << shift);
    }
    emit_t32(c, (uint16_t)(0xf100 | ((imm12 >> 11) & 1) << 10 | rd),
             (uint16_t)(((imm12 >> 8) & 7) << 12 | rd << 8 | (imm12 & 0xff)));
  }
}

/* A 16-bit branch placeholder at `at`, resolved to jump to here. */
static void t_resolve_b16(struct reloc_ctx *c, size_t at, uint16_t opcode_cond)
{
  if (c->overflow)
    return;
  int64_t delta = (int64_t)here(c) - (int64_t)(c->dst_pc + at + 4);
  if ((opcode_cond & 0xf000) == 0xb000) /* cbz/cbnz: i:imm5 */
    put_u16(c->dst + at, (uint16_t)(opcode_cond | ((delta >> 6) & 1) << 9 | ((delta >> 1) & 0x1f) << 3));
  else
    put_u16(c->dst + at, (uint16_t)(opcode_cond | ((delta >> 1) & 0xff)));
}

struct window {
  const uint8_t *code;    /* the window's bytes (even address) */
  uintptr_t src;          /* their address, without the Thumb bit */
  size_t consumed;        /* source bytes covered so far */
  unsigned written_regs;  /* registers the window's instructions so far may write */
  struct message *m;
};

static enum arch_reloc_status refuse(struct window *win, const struct insn *d, const char *what)
{
  message_str(message_hex(message_str(message_str(win->m, d->name), " at +"),
                          (d->pc & ~(uintptr_t)1) - win->src),
              ": ");
  message_str(win->m, what);
  return ARCH_RELOC_UNRELOCATABLE;
}

static int ip_taken(const struct window *win) { return (win->written_regs >> REG_IP) & 1; }

/* A literal whose bytes lie (partly) in the window, which the patch is about
 * to replace: its value, read now, little-endian as the load reads it. */
static int literal_in_window(const struct window *win, const struct insn *d, size_t end)
{
  return d->target < win->src + end && d->target + d->size > win->src;
}

static uint32_t literal_value(const struct window *win, const struct insn *d, unsigned offset)
{
  const uint8_t *p = win->code + (d->target - win->src) + offset;
  switch (d->lit) {
  case L_BYTE: return p[0];
  case L_SBYTE: return (uint32_t)(int32_t)(int8_t)p[0];
  case L_HALF: return get_u16(p);
  case L_SHALF: return (uint32_t)(int32_t)(int16_t)get_u16(p);
  default: return get_u32(p);
  }
}

/* One Thumb instruction outside an IT block (or the unconditional body of
 * one inside); `last` when it ends the window, `end` the window's length. */
static enum arch_reloc_status relocate_thumb(struct reloc_ctx *c, struct window *win,
                                             const struct insn *d, int last, size_t end)
{
  uintptr_t at = d->pc & ~(uintptr_t)1;
  switch (d->form) {
  default:
    return refuse(win, d, "not a Thumb form"); /* F_SUBST: not produced by the Thumb decoder */
  case F_B:
    t_jump(c, d->target);
    break;
  case F_BCOND: {
    uintptr_t from = here(c) + 4;
    int64_t delta = (int64_t)(d->target & ~(uintptr_t)1) - (int64_t)from;
    if (fits(delta, 20, 2)) {
      uint32_t v = (uint32_t)delta;
      emit_t32(c, (uint16_t)(0xf000 | ((v >> 20) & 1) << 10 | d->cond << 6 | ((v >> 12) & 0x3f)),
               (uint16_t)(0x8000 | ((v >> 18) & 1) << 13 | ((v >> 19) & 1) << 11 | ((v >> 1) & 0x7ff)));
    } else {
      size_t skip = c->written;
      emit16(c, 0);
      t_jump(c, d->target);
      t_resolve_b16(c, skip, (uint16_t)(0xd000 | (d->cond ^ 1) << 8));
    }
    break;
  }
  case F_CBZ: {
    size_t skip = c->written;
    emit16(c, 0);
    t_jump(c, d->target);
    t_resolve_b16(c, skip, (uint16_t)((d->w & 0xf907) ^ 0x0800));
    break;
  }
  case F_CALL: {
    int to_thumb = (int)(d->target & 1);
    if (last) {
      /* the callee returns straight into the function, after the window */
      t_mov32(c, REG_LR, addr32((at + d->len) | 1));
      t_jump(c, d->target);
    } else if (to_thumb && t32_b_reaches(here(c), d->target)) {
      uint16_t b[2];
      t32_branch(b, 0xd000, here(c), d->target);
      emit_t32(c, b[0], b[1]);
    } else if (!to_thumb && !(d->target & 3) &&
               fits((int64_t)d->target - (int64_t)((here(c) + 4) & ~(uintptr_t)3), 23, 4)) {
      uint16_t b[2];
      t32_branch(b, 0xc000, here(c), d->target);
      emit_t32(c, b[0], b[1]);
    } else {
      /* returns into the trampoline, after the absolute jump */
      uintptr_t after = here(c) + 8 + far_length((here(c) + 8) | 1);
      t_mov32(c, REG_LR, addr32(after | 1));
      t_far_jump(c, d->target);
    }
    break;
  }
  case F_ADR:
    t_mov32(c, d->rd, addr32(d->target));
    break;
  case F_ADD_PC:
    t_add_const(c, d->rd, addr32(d->target));
    break;
  case F_LIT: {
    if (literal_in_window(win, d, end)) {
      if (d->lit == L_VFP)
        return refuse(win, d, "loads a literal inside the patch window into a VFP register");
      t_mov32(c, d->rd, literal_value(win, d, 0));
      if (d->lit == L_DUAL)
        t_mov32(c, d->rt2, literal_value(win, d, 4));
      break;
    }
    unsigned base = d->lit == L_VFP ? REG_IP : d->rd;
    if (base == REG_IP && d->lit == L_VFP && ip_taken(win))
      return refuse(win, d, "an earlier instruction may set ip, which the literal's address needs");
    t_mov32(c, base, addr32(d->target));
    uint16_t h1 = (uint16_t)(d->w >> 16), h2 = (uint16_t)d->w;
    if (d->lit == L_DUAL)
      emit_t32(c, (uint16_t)(0xe9d0 | base), (uint16_t)(d->rd << 12 | d->rt2 << 8));
    else if (d->lit == L_VFP)
      emit_t32(c, (uint16_t)((h1 & 0xff70) | 0x80 | base), (uint16_t)(h2 & 0xff00));
    else if (d->len == 2) /* ldr rt, [pc, #imm8] */
      emit_t32(c, (uint16_t)(0xf8d0 | base), (uint16_t)(d->rd << 12));
    else
      emit_t32(c, (uint16_t)((h1 & 0xff60) | 0x90 | base), (uint16_t)(d->rd << 12));
    break;
  }
  }
  return ARCH_RELOC_OK;
}

/* A32: movw/movt rd, #v under condition cond */
static void a_mov32(struct reloc_ctx *c, unsigned cond, unsigned rd, uint32_t v)
{
  emit32(c, a32_movw(cond, rd, v, 0));
  emit32(c, a32_movw(cond, rd, v, 1));
}

static void a_jump(struct reloc_ctx *c, unsigned cond, uintptr_t target)
{
  if (a32_b_reaches(here(c), target)) {
    emit32(c, a32_b(cond, 0, here(c), target));
  } else {
    emit32(c, (cond << 28) | (A32_LDR_PC_M4 & 0x0fffffffu));
    emit32(c, addr32(target));
  }
}

static enum arch_reloc_status relocate_a32(struct reloc_ctx *c, struct window *win,
                                           const struct insn *d, int last)
{
  unsigned cond = d->cond;
  switch (d->form) {
  default:
    return refuse(win, d, "not an A32 form"); /* Thumb forms: not produced by the A32 decoder */
  case F_B:
  case F_BCOND:
    a_jump(c, cond, d->target);
    break;
  case F_CALL: {
    int to_thumb = (int)(d->target & 1);
    if (d->w >> 28 == 0xf)
      cond = COND_AL; /* blx imm */
    if (last) {
      a_mov32(c, cond, REG_LR, addr32((d->pc & ~(uintptr_t)1) + 4));
      if (to_thumb) {
        emit32(c, (cond << 28) | (A32_LDR_PC_M4 & 0x0fffffffu));
        emit32(c, addr32(d->target));
      } else {
        a_jump(c, cond, d->target);
      }
    } else if (!to_thumb && a32_b_reaches(here(c), d->target)) {
      emit32(c, a32_b(cond, 1, here(c), d->target));
    } else if (to_thumb && fits((int64_t)(d->target & ~(uintptr_t)1) - (int64_t)(here(c) + 8), 25, 2)) {
      int64_t delta = (int64_t)(d->target & ~(uintptr_t)1) - (int64_t)(here(c) + 8);
      emit32(c, 0xfa000000u | ((uint32_t)(delta >> 1) & 1) << 24 | ((uint32_t)(delta >> 2) & 0xffffff));
    } else {
      /* add lr, pc, #4 (lr = after the literal); ldr pc, [pc, #-4]; .word */
      emit32(c, (cond << 28) | 0x028fe004u);
      emit32(c, (cond << 28) | (A32_LDR_PC_M4 & 0x0fffffffu));
      emit32(c, addr32(d->target));
    }
    break;
  }
  case F_SUBST: {
    /* pc's value into a free register, then the same instruction with
     * that register for pc */
    unsigned scratch = d->rd;
    if (!d->dest_ok || d->rd >= REG_SP || (d->operands & reg_bit(d->rd))) {
      if (ip_taken(win) || (d->operands & reg_bit(REG_IP)))
        return refuse(win, d, "no free register for pc's value (ip may be set by the window)");
      scratch = REG_IP;
    }
    uint32_t w = d->w;
    if (d->subst & 1)
      w = (w & ~0x000f0000u) | scratch << 16;
    if (d->subst & 2)
      w = (w & ~0x0000000fu) | scratch;
    a_mov32(c, cond, scratch, addr32((d->pc & ~(uintptr_t)1) + 8));
    emit32(c, w);
    break;
  }
  }
  return ARCH_RELOC_OK;
}

/* One instruction: the forms both instruction sets treat alike, then each
 * its own. */
static enum arch_reloc_status relocate_one(struct reloc_ctx *c, struct window *win,
                                           const struct insn *d, int last, size_t end)
{
  switch (d->form) {
  case F_PLAIN:
  case F_END:
    if (d->thumb && d->len == 4) /* first halfword first */
      emit32(c, d->w >> 16 | d->w << 16);
    else if (d->thumb)
      emit16(c, (uint16_t)d->w);
    else
      emit32(c, d->w);
    return ARCH_RELOC_OK;
  case F_IT:
  case F_PLD:
    return ARCH_RELOC_OK;
  case F_REFUSE:
    return refuse(win, d, d->why);
  default:
    return d->thumb ? relocate_thumb(c, win, d, last, end) : relocate_a32(c, win, d, last);
  }
}

/* Where an instruction of the window points inside the window itself. A
 * literal there is loaded as a constant; a branch, an address taken or a
 * return address there would reach bytes the patch has replaced. */
static int points_into(const struct insn *d, uintptr_t lo, uintptr_t hi)
{
  uintptr_t t = d->target & ~(uintptr_t)1;
  if (is_branch(d->form))
    return t >= lo && t < hi;
  return (d->form == F_ADR || d->form == F_SUBST) && d->known && t >= lo && t < hi;
}

/* The next condition of an IT block and its state after the instruction */
static unsigned it_cond(unsigned state) { return state >> 4; }
static unsigned it_advance(unsigned state) { return (state & 7) ? (state & 0xe0) | ((state << 1) & 0x1f) : 0; }

enum arch_reloc_status arch_relocate(const void *src, uintptr_t src_pc, size_t min_bytes,
                                     size_t src_limit, void *dst, uintptr_t dst_pc,
                                     size_t dst_cap, struct arch_relocation *out)
{
  struct message m = message_start(out->reason, sizeof out->reason);
  struct reloc_ctx c = {dst, dst_pc, dst_cap, 0, 0};
  int thumb = (int)(src_pc & 1);
  struct window win = {bytes_of(src), src_pc & ~(uintptr_t)1, 0, 0, &m};
  struct insn insns[ARCH_MAX_WINDOW / 2];
  unsigned n = 0;
  out->instructions = 0;

  /* the far Thumb patch at 2 mod 4 starts with a nop */
  if (thumb && (win.src & 2) && min_bytes >= FAR_SIZE)
    min_bytes += 2;
  if (src_limit && src_limit < min_bytes) {
    message_dec(message_str(&m, "function is "), src_limit);
    message_dec(message_str(&m, " bytes, the patch needs "), min_bytes);
    message_str(&m, " bytes of whole instructions");
    return ARCH_RELOC_TOO_SHORT;
  }
  if ((!thumb && (src_pc & 3)) || min_bytes > ARCH_MAX_WINDOW - 4) {
    message_str(&m, min_bytes > ARCH_MAX_WINDOW - 4 ? "window too long" : "entry is not 4-byte aligned");
    return ARCH_RELOC_UNDECODABLE;
  }
  if (thumb) {
    /* enter the Thumb body from the A32 trampoline */
    emit32(&c, A32_LDR_PC_M4);
    emit32(&c, addr32(dst_pc + 8) | 1);
  }
  unsigned it = 0;     /* IT state: condition << 4 | mask, 0 outside a block */
  int flow_ended = 0;  /* an unconditional end of flow was relocated */
  size_t consumed = 0;
  /* A window ending inside an IT block takes the rest of the block. */
  while (consumed < min_bytes || it) {
    if (flow_ended) {
      /* what follows an unconditional end of flow is never reached from
       * the window: data (a literal pool) or code entered from elsewhere,
       * which the branch scan looks for. Copied as it is. */
      size_t rest = min_bytes - consumed;
      for (size_t i = 0; i < rest; i += 2)
        emit16(&c, get_u16(win.code + consumed + i));
      consumed = min_bytes;
      break;
    }
    struct insn *d = &insns[n];
    size_t avail = src_limit ? src_limit - consumed : ARCH_MAX_WINDOW - consumed;
    if (consumed >= ARCH_MAX_WINDOW - 4 ||
        classify(win.code + consumed, avail, src_pc + consumed, d) != 0) {
      if (consumed >= ARCH_MAX_WINDOW - 4 || (src_limit && consumed + 2 > src_limit)) {
        message_str(&m, it ? "an IT block runs past the end of the function or the window"
                           : "the window passes the end of the function");
        return it ? ARCH_RELOC_UNRELOCATABLE : ARCH_RELOC_TOO_SHORT;
      }
      message_hex(message_str(&m, "invalid instruction at +"), consumed);
      return ARCH_RELOC_UNDECODABLE;
    }
    if (src_limit && consumed + d->len > src_limit) {
      message_str(&m, "the last instruction passes the end of the function");
      return ARCH_RELOC_TOO_SHORT;
    }
    n++;
    int last = consumed + d->len >= min_bytes && !(it && it_advance(it));
    enum arch_reloc_status st = ARCH_RELOC_OK;
    if (!thumb) {
      st = relocate_one(&c, &win, d, last, min_bytes);
      flow_ended = (d->form == F_END || d->form == F_B) && d->cond == COND_AL;
    } else if (d->form == F_IT) {
      if (it)
        return refuse(&win, d, "an IT instruction inside an IT block");
      it = d->w & 0xff;
    } else if (it) {
      /* one instruction of an IT block, under its own condition */
      unsigned cond = it_cond(it);
      it = it_advance(it);
      if (d->form == F_BCOND || d->form == F_CBZ)
        return refuse(&win, d, "a conditional branch inside an IT block");
      if (d->form == F_PLAIN || d->form == F_END) {
        emit16(&c, (uint16_t)(0xbf08 | cond << 4)); /* it <cond> */
        st = relocate_one(&c, &win, d, last, min_bytes);
      } else if (cond == COND_AL) {
        st = relocate_one(&c, &win, d, last, min_bytes);
      } else {
        size_t skip = c.written;
        emit16(&c, 0);
        st = relocate_one(&c, &win, d, last, min_bytes);
        t_resolve_b16(&c, skip, (uint16_t)(0xd000 | (cond ^ 1) << 8));
      }
      flow_ended = !it && (d->form == F_END || d->form == F_B) && cond == COND_AL;
    } else {
      st = relocate_one(&c, &win, d, last, min_bytes);
      flow_ended = d->form == F_END || d->form == F_B;
    }
    if (st != ARCH_RELOC_OK)
      return st;
    if (c.overflow) {
      message_str(&m, "trampoline buffer too small");
      return ARCH_RELOC_NO_SPACE;
    }
    win.written_regs |= d->written;
    consumed += d->len;
    if (flow_ended && consumed < min_bytes && !src_limit) {
      message_dec(message_str(&m, "code flow ends after "), consumed);
      message_str(&m, " bytes and the function size is unknown");
      return ARCH_RELOC_TOO_SHORT;
    }
  }
  for (unsigned i = 0; i < n; i++) {
    const struct insn *d = &insns[i];
    /* a literal loaded from memory that an IT block's tail took into the
     * window after all */
    if (d->form == F_LIT && literal_in_window(&win, d, consumed) &&
        !literal_in_window(&win, d, min_bytes))
      return refuse(&win, d, "loads a literal that the window covers");
    if (points_into(d, win.src, win.src + consumed)) {
      message_str(&m, d->name);
      message_hex(message_str(&m, " at +"), (d->pc & ~(uintptr_t)1) - win.src);
      message_hex(message_str(&m, is_branch(d->form) ? " branches to +" : " refers to +"),
                  (d->target & ~(uintptr_t)1) - win.src);
      message_str(&m, ", inside the patch window");
      return ARCH_RELOC_UNRELOCATABLE;
    }
  }
  if (thumb) {
    /* back to A32 for the engine's jump: bx pc from a word boundary */
    if (here(&c) & 2)
      emit16(&c, T_NOP);
    emit16(&c, T_BX_PC);
    emit16(&c, T_UDF);
  }
  if (c.overflow) {
    message_str(&m, "trampoline buffer too small");
    return ARCH_RELOC_NO_SPACE;
  }
  out->consumed = consumed;
  out->written = c.written;
  out->instructions = n;
  return ARCH_RELOC_OK;
}
