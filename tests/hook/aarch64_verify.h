/* An independent check of AArch64 relocations, for tests on any host.
 *
 * Capstone (not src/arch) decodes both the original window, running at its
 * original PC, and the relocated code, running at the trampoline's PC. A
 * small abstract interpreter executes each, once per combination of outcomes
 * of its conditional branches, and records a trace:
 *
 *   - every instruction it does not interpret (copied code) with the
 *     abstract values of the registers it reads (Capstone's access sets);
 *   - every conditional test (which register, bit or flags, and the value
 *     of what it tests);
 *   - every call (target), and the exit: the address control leaves for,
 *     with every register's final value.
 *
 * Values are abstract: a register holds its entry value, a constant (from
 * adr, adrp, movz/movk, add), a load from a constant address (size and
 * signedness), or the result of the n-th copied instruction or call. The
 * relocation is right when both traces are equal for every combination:
 * the same copied instructions see the same inputs, the same addresses are
 * computed and loaded, the same targets are reached. x16 and x17 may differ
 * where the original never set them (the call standard's scratch registers,
 * dead at a function's entry). A jump out of the code with x30 holding the
 * address where execution continues counts as a call (the relocated `bl` of
 * a window's last instruction sets x30 to the original return address).
 */
#ifndef IGPROF_TESTS_HOOK_AARCH64_VERIFY_H
#define IGPROF_TESTS_HOOK_AARCH64_VERIFY_H

#include <capstone/capstone.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { VR_GPR = 0, VR_SP = 31, VR_FP = 32, VR_FLAGS = 64, VR_COUNT = 65, VR_NONE = -1 };

enum aval_kind { AV_ENTRY = 0, AV_CONST, AV_LOAD, AV_RESULT };

struct aval {
  enum aval_kind kind;
  uint64_t value;      /* AV_CONST: the value; AV_LOAD: the address; AV_RESULT: event number */
  unsigned size;       /* AV_LOAD: bytes */
  int is_signed;       /* AV_LOAD: sign-extended */
};

enum ev_kind { EV_COPIED, EV_TEST, EV_CALL, EV_EXIT };

#define VERIFY_MAX_READS 8
struct event {
  enum ev_kind kind;
  uint32_t word;            /* EV_COPIED: the instruction */
  uint64_t target;          /* EV_CALL / EV_EXIT */
  int test_kind, test_reg, test_arg; /* EV_TEST: what is tested */
  int nreads;
  int reads[VERIFY_MAX_READS];
  struct aval read_values[VERIFY_MAX_READS];
};

#define VERIFY_MAX_EVENTS 48
struct trace {
  int nevents;
  struct event ev[VERIFY_MAX_EVENTS];
  int nprefetch;
  uint64_t prefetch[8];        /* addresses prefetched (a hint: may be dropped) */
  struct aval regs[VR_COUNT];  /* at the exit */
  char error[160];
};

struct verify_code {
  const uint8_t *bytes;
  size_t len;
  uint64_t pc;         /* where the bytes run */
  uint64_t end;        /* where falling off the end continues (original + consumed) */
};

static int verify_reg_index(csh h, unsigned reg)
{
  const char *n = cs_reg_name(h, reg);
  if (!n)
    return VR_NONE;
  if (!strcmp(n, "sp") || !strcmp(n, "wsp"))
    return VR_SP;
  if (!strcmp(n, "xzr") || !strcmp(n, "wzr"))
    return VR_NONE;
  if (!strcmp(n, "nzcv"))
    return VR_FLAGS;
  if (!strcmp(n, "fp"))
    return 29;
  if (!strcmp(n, "lr"))
    return 30;
  int num = 0;
  if (sscanf(n + 1, "%d", &num) != 1)
    return VR_NONE;
  if (n[0] == 'x' || n[0] == 'w')
    return num <= 30 ? VR_GPR + num : VR_NONE;
  if (strchr("vqdshb", n[0]))
    return num < 32 ? VR_FP + num : VR_NONE;
  return VR_NONE;
}

static int aval_equal(const struct aval *a, const struct aval *b)
{
  if (a->kind != b->kind)
    return 0;
  switch (a->kind) {
  case AV_ENTRY: return 1;
  case AV_CONST:
  case AV_RESULT: return a->value == b->value;
  case AV_LOAD: return a->value == b->value && a->size == b->size && a->is_signed == b->is_signed;
  }
  return 0;
}

struct verify_run {
  csh h;
  const struct verify_code *code;
  struct trace *t;
  unsigned truths;    /* outcome of the n-th conditional test: bit n */
  int ntests;
  uint64_t event_id;  /* results are numbered by the event that made them */
};

static struct event *verify_event(struct verify_run *r, enum ev_kind k)
{
  if (r->t->nevents == VERIFY_MAX_EVENTS) {
    snprintf(r->t->error, sizeof r->t->error, "trace too long");
    return NULL;
  }
  struct event *e = &r->t->ev[r->t->nevents++];
  memset(e, 0, sizeof *e);
  e->kind = k;
  r->event_id++;
  return e;
}

static void verify_read(struct verify_run *r, struct event *e, int reg)
{
  if (reg == VR_NONE || e->nreads == VERIFY_MAX_READS)
    return;
  for (int i = 0; i < e->nreads; i++)
    if (e->reads[i] == reg)
      return;
  e->reads[e->nreads] = reg;
  e->read_values[e->nreads++] = r->t->regs[reg];
}

static void verify_set_result(struct verify_run *r, int reg)
{
  if (reg != VR_NONE)
    r->t->regs[reg] = (struct aval){AV_RESULT, r->event_id, 0, 0};
}

/* A call: the callee may change every caller-saved register; x16 and x17
 * hold nothing anyone may rely on afterwards. */
static void verify_call(struct verify_run *r, uint64_t target)
{
  struct event *e = verify_event(r, EV_CALL);
  if (!e)
    return;
  e->target = target;
  for (int i = 0; i <= 18; i++)
    verify_set_result(r, VR_GPR + i);
  r->t->regs[16] = r->t->regs[17] = (struct aval){AV_ENTRY, 0, 0, 0};
  verify_set_result(r, 30);
  verify_set_result(r, VR_FLAGS);
  for (int i = 0; i < 32; i++)
    if (i < 8 || i > 15)
      verify_set_result(r, VR_FP + i);
}

/* Read `size` bytes at `addr` if they lie in the code being run. */
static int verify_code_bytes(const struct verify_code *c, uint64_t addr, unsigned size, uint64_t *out)
{
  if (addr < c->pc || addr + size > c->pc + c->len || size > 8)
    return 0;
  uint64_t v = 0;
  memcpy(&v, c->bytes + (addr - c->pc), size);
  *out = v;
  return 1;
}

static int verify_is_const(const struct verify_run *r, int reg)
{
  return reg != VR_NONE && r->t->regs[reg].kind == AV_CONST;
}

/* A load of `size` bytes from the constant address `addr` into reg. */
static void verify_load(struct verify_run *r, int reg, uint64_t addr, unsigned size, int is_signed)
{
  uint64_t v;
  if (reg == VR_NONE)
    return;
  if (size <= 8 && !is_signed && verify_code_bytes(r->code, addr, size, &v))
    r->t->regs[reg] = (struct aval){AV_CONST, v, 0, 0}; /* a literal of the code itself */
  else
    r->t->regs[reg] = (struct aval){AV_LOAD, addr, size, is_signed};
}

static unsigned verify_access_size(csh h, const cs_insn *in, int reg)
{
  const char *n = cs_reg_name(h, in->detail->arm64.operands[0].reg);
  (void)reg;
  switch (n[0]) {
  case 'w': case 's': return 4;
  case 'x': case 'd': return 8;
  case 'q': return 16;
  case 'h': return 2;
  case 'b': return 1;
  }
  return 0;
}

/* Leave the code for `target`: a jump out, or a call when x30 holds where
 * execution goes on (returns the address to go on at, 0 when done). */
static uint64_t verify_leave(struct verify_run *r, uint64_t target)
{
  const struct aval *lr = &r->t->regs[30];
  if (target != r->code->end && lr->kind == AV_CONST &&
      (lr->value == r->code->end || (lr->value >= r->code->pc && lr->value < r->code->pc + r->code->len))) {
    uint64_t back = lr->value;
    verify_call(r, target);
    if (back != r->code->end)
      return back;
    target = back;
  }
  struct event *e = verify_event(r, EV_EXIT);
  if (e)
    e->target = target;
  return 0;
}

static int verify_inside(const struct verify_run *r, uint64_t a)
{
  return a >= r->code->pc && a < r->code->pc + r->code->len;
}

/* Conditional tests, canonical so that a test and its inverse compare
 * equal: b.cond by condition pair, cbz/cbnz by register, tbz/tbnz by
 * register and bit. Returns 1 when the branch is taken. */
static int verify_test(struct verify_run *r, int kind, int reg, int arg, int taken_if_true)
{
  struct event *e = verify_event(r, EV_TEST);
  int truth = (r->truths >> r->ntests++) & 1;
  if (!e)
    return 0;
  e->test_kind = kind;
  e->test_reg = reg;
  e->test_arg = arg;
  verify_read(r, e, reg);
  return taken_if_true ? truth : !truth;
}

/* One instruction; returns the next pc, or 0 when the run is over. */
static uint64_t verify_step(struct verify_run *r, const cs_insn *in)
{
  cs_arm64 *a = &in->detail->arm64;
  uint64_t next = in->address + 4;
  int r0 = a->op_count > 0 && a->operands[0].type == ARM64_OP_REG ? verify_reg_index(r->h, a->operands[0].reg) : VR_NONE;
  int64_t imm_last = a->op_count > 0 && a->operands[a->op_count - 1].type == ARM64_OP_IMM
                         ? a->operands[a->op_count - 1].imm
                         : 0;
  uint64_t target = (uint64_t)imm_last;
  int taken = -1;
  switch (in->id) {
  case ARM64_INS_NOP:
    return next;
  case ARM64_INS_B:
    if (a->cc == ARM64_CC_INVALID || a->cc == ARM64_CC_AL || a->cc == ARM64_CC_NV)
      taken = 1;
    else
      taken = verify_test(r, 1, VR_FLAGS, (a->cc - 1) >> 1, ((a->cc - 1) & 1) == 0);
    break;
  case ARM64_INS_CBZ:
  case ARM64_INS_CBNZ:
    taken = verify_test(r, 2, r0, (int)verify_access_size(r->h, in, r0), in->id == ARM64_INS_CBZ);
    break;
  case ARM64_INS_TBZ:
  case ARM64_INS_TBNZ:
    taken = verify_test(r, 3, r0, (int)a->operands[1].imm, in->id == ARM64_INS_TBZ);
    break;
  case ARM64_INS_BL:
    if (verify_inside(r, target) || target == r->code->end)
      break; /* handled below as copied: a call into the code itself is suspect */
    verify_call(r, target);
    return next;
  case ARM64_INS_BR:
    if (verify_is_const(r, r0)) {
      target = r->t->regs[r0].value;
      taken = 1;
    }
    break;
  case ARM64_INS_ADR:
  case ARM64_INS_ADRP:
    if (r0 != VR_NONE)
      r->t->regs[r0] = (struct aval){AV_CONST, target, 0, 0};
    return next;
  case ARM64_INS_MOVZ:
  case ARM64_INS_MOVK: {
    if (r0 == VR_NONE || a->operands[1].type != ARM64_OP_IMM)
      break;
    unsigned shift = a->operands[1].shift.type == ARM64_SFT_LSL ? a->operands[1].shift.value : 0;
    uint64_t part = (uint64_t)a->operands[1].imm << shift;
    if (in->id == ARM64_INS_MOVZ) {
      r->t->regs[r0] = (struct aval){AV_CONST, part, 0, 0};
    } else if (verify_is_const(r, r0)) {
      uint64_t v = r->t->regs[r0].value & ~((uint64_t)0xffff << shift);
      r->t->regs[r0].value = v | part;
    } else {
      break;
    }
    if (verify_access_size(r->h, in, r0) == 4)
      r->t->regs[r0].value &= 0xffffffffu;
    return next;
  }
  case ARM64_INS_ADD:
    if (a->op_count == 3 && a->operands[2].type == ARM64_OP_IMM && r0 != VR_NONE &&
        verify_access_size(r->h, in, r0) == 8 &&
        verify_is_const(r, verify_reg_index(r->h, a->operands[1].reg))) {
      unsigned shift = a->operands[2].shift.type == ARM64_SFT_LSL ? a->operands[2].shift.value : 0;
      uint64_t base = r->t->regs[verify_reg_index(r->h, a->operands[1].reg)].value;
      r->t->regs[r0] = (struct aval){AV_CONST, base + ((uint64_t)a->operands[2].imm << shift), 0, 0};
      return next;
    }
    break;
  case ARM64_INS_PRFM:
    /* a hint: nothing observable, but where a relocated one points is
     * checked against the original's */
    if (a->op_count == 2 && a->operands[1].type == ARM64_OP_IMM && r->t->nprefetch < 8)
      r->t->prefetch[r->t->nprefetch++] = (uint64_t)a->operands[1].imm;
    return next;
  case ARM64_INS_LDR:
  case ARM64_INS_LDRSW: {
    int is_signed = in->id == ARM64_INS_LDRSW;
    unsigned size = is_signed ? 4 : verify_access_size(r->h, in, r0);
    if (a->op_count == 2 && a->operands[1].type == ARM64_OP_IMM) {
      verify_load(r, r0, (uint64_t)a->operands[1].imm, size, is_signed);
      return next;
    }
    if (a->op_count == 2 && a->operands[1].type == ARM64_OP_MEM && !a->writeback &&
        a->operands[1].mem.index == ARM64_REG_INVALID &&
        verify_is_const(r, verify_reg_index(r->h, a->operands[1].mem.base))) {
      uint64_t base = r->t->regs[verify_reg_index(r->h, a->operands[1].mem.base)].value;
      verify_load(r, r0, base + (uint64_t)(int64_t)a->operands[1].mem.disp, size, is_signed);
      return next;
    }
    break;
  }
  default:
    break;
  }
  if (taken == 1) {
    if (verify_inside(r, target) || target == r->code->pc + r->code->len)
      return target; /* within the code, or to its end: on after the window */
    return verify_leave(r, target);
  }
  if (taken == 0)
    return next;
  /* copied: compare what it reads, and its results become opaque */
  struct event *e = verify_event(r, EV_COPIED);
  if (!e)
    return 0;
  memcpy(&e->word, in->bytes, 4);
  cs_regs rd, wr;
  uint8_t nrd = 0, nwr = 0;
  if (cs_regs_access(r->h, in, rd, &nrd, wr, &nwr) == CS_ERR_OK) {
    for (int i = 0; i < nrd; i++)
      verify_read(r, e, verify_reg_index(r->h, rd[i]));
    for (int i = 0; i < nwr; i++)
      verify_set_result(r, verify_reg_index(r->h, wr[i]));
  }
  if (in->id == ARM64_INS_RET || in->id == ARM64_INS_BR || in->id == ARM64_INS_BRK ||
      in->id == ARM64_INS_BL || in->id == ARM64_INS_B)
    return 0; /* the run ends inside copied code (a return, a trap...) */
  return next;
}

/* Run the code once with the given outcomes of its tests. */
static void verify_run_once(csh h, const struct verify_code *code, unsigned truths, struct trace *t)
{
  memset(t, 0, sizeof *t);
  struct verify_run r = {h, code, t, truths, 0, 0};
  uint64_t pc = code->pc;
  for (int steps = 0; steps < 64 && !t->error[0]; steps++) {
    if (pc == code->pc + code->len) {
      verify_leave(&r, code->end); /* falls off the end: on after the window */
      return;
    }
    if (!verify_inside(&r, pc) || (pc & 3)) {
      snprintf(t->error, sizeof t->error, "control reached 0x%llx", (unsigned long long)pc);
      return;
    }
    cs_insn *in;
    size_t n = cs_disasm(h, code->bytes + (pc - code->pc), 4, pc, 1, &in);
    if (n != 1) {
      /* not known to Capstone: copied code that reads and writes nothing
       * it can name (relocation must have kept it as is) */
      struct event *e = verify_event(&r, EV_COPIED);
      if (e)
        memcpy(&e->word, code->bytes + (pc - code->pc), 4);
      pc += 4;
      continue;
    }
    pc = verify_step(&r, in);
    cs_free(in, n);
    if (!pc)
      return;
  }
  if (!t->error[0])
    snprintf(t->error, sizeof t->error, "no exit within 64 steps");
}

static int verify_event_equal(const struct event *a, const struct event *b)
{
  if (a->kind != b->kind || a->word != b->word || a->target != b->target ||
      a->test_kind != b->test_kind || a->test_reg != b->test_reg || a->test_arg != b->test_arg ||
      a->nreads != b->nreads)
    return 0;
  for (int i = 0; i < a->nreads; i++)
    if (a->reads[i] != b->reads[i] || !aval_equal(&a->read_values[i], &b->read_values[i]))
      return 0;
  return 1;
}

static const char *verify_kind_name(enum ev_kind k)
{
  return k == EV_COPIED ? "copied" : k == EV_TEST ? "test" : k == EV_CALL ? "call" : "exit";
}

/* Compare two traces; a message in `why` when they differ. */
static int verify_traces_equal(const struct trace *o, const struct trace *n, char *why, size_t cap)
{
  if (o->error[0] || n->error[0]) {
    snprintf(why, cap, "%s%s", o->error[0] ? "original: " : "relocated: ",
             o->error[0] ? o->error : n->error);
    return 0;
  }
  int m = o->nevents < n->nevents ? o->nevents : n->nevents;
  for (int i = 0; i < m; i++)
    if (!verify_event_equal(&o->ev[i], &n->ev[i])) {
      snprintf(why, cap, "event %d differs: %s %08x target 0x%llx vs %s %08x target 0x%llx", i,
               verify_kind_name(o->ev[i].kind), o->ev[i].word,
               (unsigned long long)o->ev[i].target, verify_kind_name(n->ev[i].kind),
               n->ev[i].word, (unsigned long long)n->ev[i].target);
      return 0;
    }
  if (o->nevents != n->nevents) {
    snprintf(why, cap, "%d events vs %d", o->nevents, n->nevents);
    return 0;
  }
  for (int i = 0; i < n->nprefetch; i++) {
    int found = 0;
    for (int k = 0; k < o->nprefetch; k++)
      found |= o->prefetch[k] == n->prefetch[i];
    if (!found) {
      snprintf(why, cap, "prefetch of 0x%llx, which the original does not prefetch",
               (unsigned long long)n->prefetch[i]);
      return 0;
    }
  }
  for (int reg = 0; reg < VR_COUNT; reg++) {
    if ((reg == 16 || reg == 17) && o->regs[reg].kind == AV_ENTRY)
      continue; /* scratch the original never set: dead */
    if (!aval_equal(&o->regs[reg], &n->regs[reg])) {
      snprintf(why, cap, "register %d at the exit: kind %d value 0x%llx vs kind %d value 0x%llx",
               reg, o->regs[reg].kind, (unsigned long long)o->regs[reg].value, n->regs[reg].kind,
               (unsigned long long)n->regs[reg].value);
      return 0;
    }
  }
  return 1;
}

/* Does `relocated` (running at reloc_pc) do what the window at orig_pc did?
 * Every combination of up to 6 test outcomes is tried. Returns 1 if so,
 * else 0 with the first difference in `why`. */
static int verify_relocation(csh h, const uint8_t *orig, size_t consumed, uint64_t orig_pc,
                             const uint8_t *relocated, size_t written, uint64_t reloc_pc,
                             char *why, size_t cap)
{
  struct verify_code oc = {orig, consumed, orig_pc, orig_pc + consumed};
  struct verify_code nc = {relocated, written, reloc_pc, orig_pc + consumed};
  static struct trace to, tn;
  for (unsigned truths = 0; truths < 64; truths++) {
    verify_run_once(h, &oc, truths, &to);
    verify_run_once(h, &nc, truths, &tn);
    if (!verify_traces_equal(&to, &tn, why, cap)) {
      size_t l = strlen(why);
      snprintf(why + l, cap - l, " (outcomes %#x)", truths);
      return 0;
    }
  }
  return 1;
}

static csh verify_open(void)
{
  csh h = 0;
  if (cs_open(CS_ARCH_ARM64, CS_MODE_ARM, &h) != CS_ERR_OK)
    return 0;
  cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
  return h;
}

#endif
