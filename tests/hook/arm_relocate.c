/* hook.arm_relocate: the ARM32 relocator (src/arch/arm.c, compiled into this
 * host program) checked with Capstone, an independent A32/Thumb decoder.
 *
 * Each window is relocated to a trampoline 256 MiB away (beyond every
 * PC-relative reach) and to one 1 MiB away; Capstone decodes the source and
 * the copy, and both are reduced to the same list of effects:
 *   plain      an instruction with no PC-relative operand: the same bytes
 *   load       register <- memory at an absolute address
 *   set / add  register <- constant, register += constant
 *   subst      an A32 instruction reading pc, with pc's value in a register
 *   jump, branch, call   to an absolute target (with its instruction-set bit)
 * The copy's effects come from what it does (movw/movt constants, loads from
 * a register holding a constant, loads into pc from a literal, b/bl/blx),
 * the source's from the architecture's rules for pc; they must match in
 * order. A Thumb copy must enter Thumb from A32 and leave it with bx pc.
 *
 * Usage: arm_relocate patterns | arm_relocate sweep LIB...
 * (sweep: every exported function of armhf libraries, at 4 and 8 bytes) */
#include <capstone/capstone.h>
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"

enum { E_PLAIN, E_LOAD, E_SET, E_ADD, E_SUBST, E_JUMP, E_BRANCH, E_CALL };
static const char *const kind_names[] = {"plain", "load", "set", "add", "subst", "jump", "branch", "call"};

struct eff {
  int kind;
  unsigned reg;     /* Capstone register id */
  uint32_t value;   /* address, constant or target */
  uint8_t bytes[4];
  unsigned len;
  int ends;         /* the flow does not go on after it */
};

#define MAX_EFF 64
struct effs {
  struct eff e[MAX_EFF];
  int n;
};

static void add_eff(struct effs *l, struct eff e)
{
  /* consecutive adds to one register are one add */
  if (e.kind == E_ADD && l->n && l->e[l->n - 1].kind == E_ADD && l->e[l->n - 1].reg == e.reg) {
    l->e[l->n - 1].value += e.value;
    return;
  }
  if (l->n < MAX_EFF)
    l->e[l->n++] = e;
}

static csh cs_a32, cs_thumb;
static int failures;

static int reads_pc(unsigned id, const cs_arm *d)
{
  if (id == ARM_INS_POP || id == ARM_INS_LDM || id == ARM_INS_LDMIB || id == ARM_INS_LDMDA ||
      id == ARM_INS_LDMDB)
    return 0; /* pc in the register list is written */
  for (int i = 0; i < d->op_count; i++) {
    const cs_arm_op *o = &d->operands[i];
    if ((o->type == ARM_OP_REG && o->reg == ARM_REG_PC && i > 0) ||
        (o->type == ARM_OP_MEM && (o->mem.base == ARM_REG_PC || o->mem.index == ARM_REG_PC)))
      return 1;
  }
  return 0;
}

static int is_branch_id(unsigned id)
{
  return id == ARM_INS_B || id == ARM_INS_BL || id == ARM_INS_BLX || id == ARM_INS_CBZ ||
         id == ARM_INS_CBNZ;
}

static uint32_t get32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* The source's effects, from the rules for reading pc. */
static int source_effects(const uint8_t *code, uint32_t pc, size_t len, struct effs *out)
{
  int thumb = pc & 1;
  uint32_t base = pc & ~1u;
  cs_insn *in;
  size_t n = cs_disasm(thumb ? cs_thumb : cs_a32, code, len, base, 0, &in);
  size_t covered = 0;
  uint32_t konst[ARM_REG_ENDING] = {0};
  int known[ARM_REG_ENDING] = {0};
  for (size_t i = 0; i < n; i++) {
    const cs_insn *x = &in[i];
    const cs_arm *d = &x->detail->arm;
    uint32_t at = (uint32_t)x->address, pcv = thumb ? at + 4 : at + 8;
    uint32_t aligned = pcv & ~3u;
    struct eff e = {E_PLAIN, 0, 0, {0}, x->size, 0};
    memcpy(e.bytes, x->bytes, x->size);
    covered += x->size;
    if (x->id == ARM_INS_IT || (x->id == ARM_INS_NOP && thumb))
      continue; /* the copy splits IT blocks and pads with nops */
    int al = d->cc == ARM_CC_AL || d->cc == ARM_CC_INVALID;
    for (int k = 0; k < d->op_count; k++)
      if (d->operands[k].type == ARM_OP_REG && d->operands[k].reg == ARM_REG_PC &&
          (k == 0 || x->id == ARM_INS_POP || x->id == ARM_INS_LDM) && x->id != ARM_INS_BLX &&
          x->id != ARM_INS_PUSH && al)
        e.ends = 1;
    if (al && (x->id == ARM_INS_BX || x->id == ARM_INS_UDF || x->id == ARM_INS_BKPT))
      e.ends = 1;
    /* the same movw/movt reading as the copy's */
    if ((x->id == ARM_INS_MOVW || x->id == ARM_INS_MOVT) && d->op_count == 2) {
      unsigned r = d->operands[0].reg;
      uint32_t imm = (uint32_t)d->operands[1].imm;
      konst[r] = x->id == ARM_INS_MOVW ? imm : (konst[r] & 0xffff) | imm << 16;
      known[r] = 1;
      if (x->id == ARM_INS_MOVW)
        continue;
      e.kind = E_SET;
      e.reg = r;
      e.value = konst[r];
      add_eff(out, e);
      continue;
    }
    if (thumb && x->id == ARM_INS_ADD && d->op_count == 3 && x->size == 4 &&
        d->operands[1].type == ARM_OP_REG && d->operands[1].reg == d->operands[0].reg &&
        d->operands[2].type == ARM_OP_IMM) {
      e.kind = E_ADD; /* read as the copy's add chains are */
      e.reg = d->operands[0].reg;
      e.value = (uint32_t)d->operands[2].imm;
      add_eff(out, e);
      continue;
    }
    if (d->op_count > 1 && d->operands[1].type == ARM_OP_MEM && known[d->operands[1].mem.base] &&
        d->operands[1].mem.index == ARM_REG_INVALID && (!thumb || x->size == 4)) {
      e.kind = E_LOAD;
      e.reg = d->operands[0].reg;
      e.value = konst[d->operands[1].mem.base] + (uint32_t)d->operands[1].mem.disp;
      if (out->n && out->e[out->n - 1].kind == E_SET)
        out->n--;
      add_eff(out, e);
      continue;
    }
    if (d->op_count && d->operands[0].type == ARM_OP_REG)
      known[d->operands[0].reg] = 0;
    if (is_branch_id(x->id) && d->op_count && d->operands[d->op_count - 1].type == ARM_OP_IMM) {
      uint32_t t = (uint32_t)d->operands[d->op_count - 1].imm;
      int to_thumb = x->id == ARM_INS_BLX ? !thumb : thumb;
      e.value = to_thumb ? t | 1 : t & ~1u;
      e.kind = x->id == ARM_INS_BL || x->id == ARM_INS_BLX ? E_CALL
               : x->id == ARM_INS_B && (d->cc == ARM_CC_AL || d->cc == ARM_CC_INVALID) ? E_JUMP
                                                                                         : E_BRANCH;
      e.ends = e.kind == E_JUMP;
    } else if (x->id == ARM_INS_PLD || x->id == ARM_INS_PLI) {
      if (reads_pc(x->id, d))
        continue; /* dropped */
    } else if (reads_pc(x->id, d) || x->id == ARM_INS_ADR) {
      const cs_arm_op *o0 = &d->operands[0], *o1 = &d->operands[1];
      e.reg = o0->reg;
      const cs_arm_op *mem = x->id == ARM_INS_LDRD ? &d->operands[2] : o1; /* ldrd rt, rt2, [pc] */
      if (mem->type == ARM_OP_MEM && mem->mem.base == ARM_REG_PC && mem->mem.index == ARM_REG_INVALID) {
        e.kind = E_LOAD;
        e.value = (thumb ? aligned : pcv) + (uint32_t)mem->mem.disp;
      } else if (x->id == ARM_INS_ADR) {
        e.kind = E_SET;
        e.value = (thumb ? aligned : pcv) + (uint32_t)o1->imm;
      } else if (thumb && (x->id == ARM_INS_ADDW || x->id == ARM_INS_SUBW)) {
        e.kind = E_SET;
        e.value = x->id == ARM_INS_ADDW ? aligned + (uint32_t)d->operands[2].imm
                                       : aligned - (uint32_t)d->operands[2].imm;
      } else if (thumb && x->id == ARM_INS_ADD && d->op_count == 2) {
        e.kind = E_ADD;
        e.value = pcv;
      } else if (thumb && x->id == ARM_INS_MOV) {
        e.kind = E_SET;
        e.value = pcv;
      } else if (!thumb) {
        e.kind = E_SUBST;
        e.reg = x->id;
        e.value = pcv;
      } else {
        e.kind = -1; /* a Thumb use of pc the relocator refuses */
      }
    }
    add_eff(out, e);
  }
  cs_free(in, n);
  return covered == len ? 0 : -1;
}

/* The copy's effects, from what its instructions do. */
static int copy_effects(const uint8_t *buf, uint32_t dst_pc, size_t len, int thumb_body,
                        struct effs *out, char *why, size_t why_cap)
{
  uint32_t konst[ARM_REG_ENDING] = {0};
  int known[ARM_REG_ENDING] = {0};
  size_t off = 0;
  int thumb = 0;
  if (thumb_body) {
    /* ldr pc, [pc, #-4]; .word dst + 8 | 1 */
    if (len < 8 || get32(buf) != 0xe51ff004u || get32(buf + 4) != ((dst_pc + 8) | 1)) {
      snprintf(why, why_cap, "no A32 -> Thumb entry");
      return -1;
    }
    off = 8;
    thumb = 1;
  }
  while (off < len) {
    cs_insn *in;
    uint32_t at = dst_pc + (uint32_t)off;
    if (cs_disasm(thumb ? cs_thumb : cs_a32, buf + off, len - off, at, 1, &in) != 1) {
      snprintf(why, why_cap, "undecodable at +%zu", off);
      return -1;
    }
    const cs_insn *x = &in[0];
    const cs_arm *d = &x->detail->arm;
    const cs_arm_op *o0 = &d->operands[0], *o1 = &d->operands[1];
    struct eff e = {E_PLAIN, 0, 0, {0}, x->size, 0};
    memcpy(e.bytes, x->bytes, x->size);
    off += x->size;
    int skip = 0;
    if (x->id == ARM_INS_MOVW || x->id == ARM_INS_MOVT) {
      unsigned r = o0->reg;
      konst[r] = x->id == ARM_INS_MOVW ? (uint32_t)o1->imm
                                      : (konst[r] & 0xffff) | (uint32_t)o1->imm << 16;
      known[r] = 1;
      if (x->id == ARM_INS_MOVT) {
        e.kind = E_SET;
        e.reg = r;
        e.value = konst[r];
      } else {
        skip = 1;
      }
    } else if (thumb && x->id == ARM_INS_ADD && d->op_count == 3 && o1->type == ARM_OP_REG &&
               o1->reg == o0->reg && d->operands[2].type == ARM_OP_IMM && x->size == 4) {
      e.kind = E_ADD;
      e.reg = o0->reg;
      e.value = (uint32_t)d->operands[2].imm;
    } else if (o0->type == ARM_OP_REG && o0->reg == ARM_REG_PC && d->op_count == 2 &&
               o1->type == ARM_OP_MEM && o1->mem.base == ARM_REG_PC && x->id == ARM_INS_LDR) {
      /* a load into pc from the literal after it */
      uint32_t lit = (thumb ? (at + 4) & ~3u : at + 8) + (uint32_t)o1->mem.disp;
      size_t lo = lit - dst_pc;
      if (lo + 4 > len) {
        snprintf(why, why_cap, "literal out of the copy");
        cs_free(in, 1);
        return -1;
      }
      e.kind = E_JUMP;
      e.value = get32(buf + lo);
      off = lo + 4 > off ? lo + 4 : off;
      if (out->n && out->e[out->n - 1].kind == E_SET && out->e[out->n - 1].reg == ARM_REG_LR) {
        out->n--;
        e.kind = E_CALL;
      } else if (out->n && out->e[out->n - 1].kind == E_PLAIN && !thumb &&
                 (get32(out->e[out->n - 1].bytes) & 0x0fffffffu) == 0x028fe004u) {
        out->n--; /* add lr, pc, #4 */
        e.kind = E_CALL;
      }
    } else if (is_branch_id(x->id) && d->operands[d->op_count - 1].type == ARM_OP_IMM) {
      uint32_t t = (uint32_t)d->operands[d->op_count - 1].imm;
      if (t >= dst_pc && t < dst_pc + len) {
        skip = 1; /* a short branch over a rewrite: the guard of a condition */
      } else {
        int to_thumb = x->id == ARM_INS_BLX ? !thumb : thumb;
        e.value = to_thumb ? t | 1 : t & ~1u;
        e.kind = x->id == ARM_INS_BL || x->id == ARM_INS_BLX ? E_CALL
                 : (d->cc == ARM_CC_AL || d->cc == ARM_CC_INVALID) ? E_JUMP
                                                                   : E_BRANCH;
        if (e.kind == E_JUMP && out->n && out->e[out->n - 1].kind == E_SET &&
            out->e[out->n - 1].reg == ARM_REG_LR) {
          out->n--; /* lr set by hand: a call */
          e.kind = E_CALL;
        }
      }
    } else if (x->id == ARM_INS_IT || (x->id == ARM_INS_NOP && thumb)) {
      skip = 1;
    } else if (thumb && x->id == ARM_INS_BX && o0->reg == ARM_REG_PC) {
      thumb = 0;
      off = (off + 3) & ~(size_t)3;
      skip = 1;
    } else {
      /* a load from, or an A32 instruction reading, a register that holds
       * a constant this copy built */
      for (int i = 0; i < d->op_count && e.kind == E_PLAIN; i++) {
        const cs_arm_op *o = &d->operands[i];
        /* (the Thumb loads the relocator writes are all 32-bit ones) */
        if (o->type == ARM_OP_MEM && known[o->mem.base] && o->mem.index == ARM_REG_INVALID &&
            (!thumb || x->size == 4)) {
          e.kind = E_LOAD;
          e.reg = o0->reg;
          e.value = konst[o->mem.base] + (uint32_t)o->mem.disp;
        } else if (!thumb && i > 0 && o->type == ARM_OP_REG && known[o->reg] &&
                   !(x->id == ARM_INS_MOV && d->op_count == 2)) {
          e.kind = E_SUBST;
          e.reg = x->id;
          e.value = konst[o->reg];
        }
      }
      if (e.kind == E_SUBST || e.kind == E_LOAD) {
        /* the movw/movt pair was the address, not a value of its own */
        unsigned r = e.kind == E_LOAD ? 0 : 0;
        (void)r;
        for (int k = out->n - 1; k >= 0 && k >= out->n - 1; k--)
          if (out->e[k].kind == E_SET && known[out->e[k].reg] && konst[out->e[k].reg] == out->e[k].value)
            out->n--;
      }
    }
    /* a register the instruction writes no longer holds what we built */
    if (!skip && e.kind != E_SET && o0->type == ARM_OP_REG)
      known[o0->reg] = 0;
    if (!skip)
      add_eff(out, e);
    cs_free(in, 1);
  }
  if (thumb_body && thumb) {
    snprintf(why, why_cap, "the Thumb body does not return to A32");
    return -1;
  }
  return 0;
}

static void print_effs(const char *title, const struct effs *l)
{
  fprintf(stderr, "  %s:", title);
  for (int i = 0; i < l->n; i++)
    fprintf(stderr, " %s(%u,%#x)", l->e[i].kind >= 0 ? kind_names[l->e[i].kind] : "?",
            l->e[i].reg, l->e[i].value);
  fprintf(stderr, "\n");
}

static int same(const struct eff *s, const struct eff *c)
{
  if (s->kind == E_BRANCH)
    return (c->kind == E_BRANCH || c->kind == E_JUMP) && c->value == s->value;
  if (s->kind != c->kind)
    return 0;
  switch (s->kind) {
  case E_PLAIN: return s->len == c->len && !memcmp(s->bytes, c->bytes, s->len);
  case E_LOAD:
  case E_SET:
  case E_ADD:
  case E_SUBST: return s->reg == c->reg && s->value == c->value;
  default: return s->value == c->value;
  }
}

/* Relocate [code, code + min) at pc to dst_pc and compare. Returns 1 when
 * relocated and verified, 0 when the relocator refused, -1 on a mismatch. */
static int check_window(const char *name, const uint8_t *code, uint32_t pc, size_t min,
                        size_t limit, uint32_t dst_pc)
{
  uint8_t buf[1024];
  struct arch_relocation rel;
  memset(buf, 0, sizeof buf);
  if (arch_relocate(code, pc, min, limit, buf, dst_pc, sizeof buf, &rel) != ARCH_RELOC_OK)
    return 0;
  struct effs src = {0}, copy = {0};
  char why[80] = "";
  int flow_end = 0;
  if (source_effects(code, pc, rel.consumed, &src) != 0) {
    /* bytes after the end of the flow are data: copied, not decoded */
    flow_end = 1;
  }
  int bad = copy_effects(buf, dst_pc, rel.written, pc & 1, &copy, why, sizeof why) != 0;
  int i = 0, j = 0, ended = 0;
  for (; !ended && i < src.n && j < copy.n; i++, j++) {
    if (src.e[i].kind < 0 || !same(&src.e[i], &copy.e[j]))
      break;
    ended = src.e[i].ends; /* what follows is data or code reached otherwise */
  }
  if (!bad && ended)
    return 1;
  /* data after the flow's end is copied as it is: the rest may differ */
  int ends = i < src.n && j < copy.n && (flow_end || src.e[i].kind == E_PLAIN);
  if (!bad && i == src.n && j == copy.n)
    return 1;
  if (!bad && ends && i > 0 && (src.e[i - 1].kind == E_JUMP))
    return 1;
  if (!bad && flow_end && i == src.n)
    return 1;
  fprintf(stderr, "%s at %#x (%zu bytes to %#x): %s effect %d differs\n", name, pc, min, dst_pc,
          why[0] ? why : "", i);
  print_effs("source", &src);
  print_effs("copy", &copy);
  return -1;
}

/* ---- hand-written windows ---------------------------------------------- */

struct pattern {
  const char *name;
  int thumb;
  uint8_t bytes[24];
  size_t len, min;
};

/* From arm_api_code.c, as the cross assembler writes them (little-endian). */
static const struct pattern patterns[] = {
  {"t_lit: ldr.n, ldr.w", 1, {0x02, 0x49, 0xdf, 0xf8, 0x08, 0x20, 0x40, 0x18, 0x80, 0x18, 0x70, 0x47}, 12, 8},
  {"t_ldrd", 1, {0xdf, 0xe9, 0x02, 0x23, 0x80, 0x18, 0xc0, 0x18, 0x70, 0x47, 0x00, 0xbf}, 12, 8},
  {"t_vldr", 1, {0x9f, 0xed, 0x02, 0x1b, 0x30, 0xee, 0x01, 0x0b, 0x70, 0x47, 0x00, 0xbf}, 12, 8},
  {"t_adr, adr.w", 1, {0x01, 0xa1, 0x0f, 0xf2, 0x04, 0x01, 0x09, 0x68, 0x70, 0x47}, 10, 8},
  {"t_pic: add r1, pc", 1, {0x02, 0x49, 0x79, 0x44, 0x09, 0x68, 0x40, 0x18, 0x70, 0x47}, 10, 8},
  {"t_cbz, beq", 1, {0x20, 0xb1, 0x07, 0x28, 0x04, 0xd0, 0x64, 0x20, 0x70, 0x47}, 10, 8},
  {"t_bcondw", 1, {0x03, 0x28, 0x00, 0xf3, 0x04, 0x80, 0x00, 0xbf, 0x00, 0xbf}, 10, 8},
  {"t_itlong", 1, {0x0a, 0x28, 0xbf, 0xbf, 0x01, 0x30, 0x02, 0x30, 0x03, 0x30, 0x04, 0x30, 0x70, 0x47}, 14, 8},
  {"t_itlit", 1, {0x00, 0x28, 0x08, 0xbf, 0x01, 0x48, 0x70, 0x47, 0x00, 0xbf, 0x00, 0xbf}, 12, 8},
  {"t_bl", 1, {0x10, 0xb5, 0x00, 0xf0, 0x40, 0xf8, 0x01, 0x30, 0x10, 0xbd}, 10, 8},
  {"t_blx", 1, {0x10, 0xb5, 0x00, 0xf0, 0x40, 0xe8, 0x01, 0x30, 0x10, 0xbd}, 10, 8},
  {"a_lit", 0, {0x04, 0x10, 0x9f, 0xe5, 0x01, 0x00, 0x80, 0xe0, 0x1e, 0xff, 0x2f, 0xe1}, 12, 8},
  {"a_pic: add r1, pc, r1", 0, {0x08, 0x10, 0x9f, 0xe5, 0x01, 0x10, 0x8f, 0xe0, 0x00, 0x10, 0x91, 0xe5}, 12, 8},
  {"a_bcond", 0, {0x00, 0x00, 0x50, 0xe3, 0x01, 0x00, 0x00, 0x0a, 0x64, 0x00, 0xa0, 0xe3}, 12, 8},
  {"a_bl, blx", 0, {0x10, 0x40, 0x2d, 0xe9, 0x10, 0x00, 0x00, 0xeb, 0x10, 0x00, 0x00, 0xfa}, 12, 12},
  {"a_adr", 0, {0x04, 0x10, 0x8f, 0xe2, 0x00, 0x10, 0x91, 0xe5, 0x01, 0x00, 0x80, 0xe0}, 12, 8},
  {"a_condlit", 0, {0x00, 0x00, 0x50, 0xe3, 0x00, 0x00, 0x9f, 0x05, 0x1e, 0xff, 0x2f, 0xe1}, 12, 8},
};

static int run_patterns(void)
{
  int verified = 0;
  for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
    const struct pattern *p = &patterns[i];
    uint32_t pc = 0x40100000u | (p->thumb ? 1u : 0u);
    /* far (256 MiB away) and near (1 MiB): absolute and relative forms */
    int far = check_window(p->name, p->bytes, pc, p->min, p->len, 0x50100010u);
    int near = check_window(p->name, p->bytes, pc, p->min, p->len, 0x40200010u);
    if (far != 1 || near != 1) {
      fprintf(stderr, "%s: far %d near %d\n", p->name, far, near);
      failures++;
    } else {
      verified++;
    }
  }
  printf("patterns: %d of %zu relocated and verified both ways\n", verified,
         sizeof patterns / sizeof patterns[0]);
  return verified == (int)(sizeof patterns / sizeof patterns[0]) ? 0 : 1;
}

/* ---- every exported function of armhf libraries -------------------------- */

static int sweep(const char *path)
{
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "%s: cannot open\n", path);
    return -1;
  }
  const uint8_t *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  const Elf32_Ehdr *eh = (const Elf32_Ehdr *)img;
  if (img == MAP_FAILED || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS32 ||
      eh->e_machine != EM_ARM) {
    fprintf(stderr, "%s: not an ARM32 ELF file\n", path);
    return -1;
  }
  const Elf32_Shdr *sh = (const Elf32_Shdr *)(img + eh->e_shoff);
  const Elf32_Phdr *ph = (const Elf32_Phdr *)(img + eh->e_phoff);
  long ok = 0, refused = 0, bad = 0;
  for (int s = 0; s < eh->e_shnum; s++) {
    if (sh[s].sh_type != SHT_DYNSYM)
      continue;
    const Elf32_Sym *sym = (const Elf32_Sym *)(img + sh[s].sh_offset);
    size_t count = sh[s].sh_size / sizeof *sym;
    for (size_t i = 0; i < count; i++) {
      if (ELF32_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF ||
          sym[i].st_size < 4)
        continue;
      uint32_t vaddr = sym[i].st_value & ~1u;
      const uint8_t *code = NULL;
      for (int p = 0; p < eh->e_phnum && !code; p++)
        if (ph[p].p_type == PT_LOAD && vaddr >= ph[p].p_vaddr && vaddr < ph[p].p_vaddr + ph[p].p_filesz)
          code = img + ph[p].p_offset + (vaddr - ph[p].p_vaddr);
      if (!code)
        continue;
      const char *name = (const char *)img + sh[sh[s].sh_link].sh_offset + sym[i].st_name;
      uint32_t pc = 0x40000000u + sym[i].st_value; /* a library loaded at 0x40000000 */
      for (size_t min = 4; min <= 8; min += 4) {
        int r = check_window(name, code, pc, min, sym[i].st_size, 0x50000010u);
        int r2 = r == 1 ? check_window(name, code, pc, min, sym[i].st_size, (pc & ~15u) + 0x100010u) : r;
        if (r < 0 || r2 < 0)
          bad++;
        else if (r == 0)
          refused++;
        else
          ok++;
      }
    }
  }
  printf("%s: %ld windows relocated and verified, %ld refused, %ld mismatches\n", path, ok, refused, bad);
  munmap((void *)img, (size_t)st.st_size);
  failures += (int)bad;
  return ok > 0 && ok >= 9 * refused ? 0 : -1; /* at least 90% relocate */
}

int main(int argc, char **argv)
{
  if (cs_open(CS_ARCH_ARM, CS_MODE_ARM, &cs_a32) != CS_ERR_OK ||
      cs_open(CS_ARCH_ARM, CS_MODE_THUMB, &cs_thumb) != CS_ERR_OK)
    return 2;
  cs_option(cs_a32, CS_OPT_DETAIL, CS_OPT_ON);
  cs_option(cs_thumb, CS_OPT_DETAIL, CS_OPT_ON);
  int rc = 0;
  if (argc >= 2 && !strcmp(argv[1], "patterns")) {
    rc = run_patterns();
  } else if (argc >= 3 && !strcmp(argv[1], "sweep")) {
    for (int i = 2; i < argc; i++)
      if (sweep(argv[i]) != 0)
        rc = 1;
  } else {
    fprintf(stderr, "usage: arm_relocate patterns | arm_relocate sweep LIB...\n");
    return 2;
  }
  if (failures)
    fprintf(stderr, "hook.arm_relocate: %d mismatch(es)\n", failures);
  return rc || failures ? 1 : 0;
}
