/* An independent check of a relocated patch window, for the hook tests.
 *
 * Given the original bytes of a window (as they ran at orig_pc) and the code
 * the relocator produced (running at chain_pc), decode both with Zydis and
 * check, instruction by instruction, that each relocated instruction has the
 * effect of the original: position-independent instructions are byte-for-byte
 * copies; instructions with a RIP-relative operand address the same absolute
 * location (or load the same absolute address into the same register when
 * rewritten); branches reach the same absolute target, in the near (rel32)
 * or absolute (jmp [rip+0] / call [rip+2]) form, with the same condition.
 * After the window, a jump must lead back to orig_pc + window.
 *
 * This deliberately shares no code with src/arch: it is the test's own
 * reading of the encodings.
 */
#ifndef IGPROF_TESTS_HOOK_RELOC_VERIFY_H
#define IGPROF_TESTS_HOOK_RELOC_VERIFY_H

#include <Zydis/Zydis.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct vinsn {
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

/* Statistics over every verified window: how many of each relocated form. */
struct verify_forms {
  unsigned long copied, rip_operand, rip_rewritten, rip_scratch, jmp, jmp_abs, call, call_abs, jcc,
      jcc_abs, loop_like;
};

static int vdecode(const uint8_t *code, size_t avail, struct vinsn *v)
{
  ZydisDecoder d;
  ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, code, avail, &v->in, v->ops)) ? 0 : -1;
}

/* Absolute target of the first relative operand (branch immediate or
 * RIP-based memory), 0 if none. */
static uint64_t vtarget(const struct vinsn *v, uint64_t pc)
{
  for (unsigned i = 0; i < v->in.operand_count; i++) {
    const ZydisDecodedOperand *op = &v->ops[i];
    int rel = (op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->imm.is_relative) ||
              (op->type == ZYDIS_OPERAND_TYPE_MEMORY && op->mem.base == ZYDIS_REGISTER_RIP);
    ZyanU64 abs;
    if (rel && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&v->in, op, pc, &abs)))
      return abs;
  }
  return 0;
}

static int is_rip_operand(const struct vinsn *v)
{
  for (unsigned i = 0; i < v->in.operand_count; i++)
    if (v->ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && v->ops[i].mem.base == ZYDIS_REGISTER_RIP)
      return 1;
  return 0;
}

static int is_relative_branch(const struct vinsn *v)
{
  return v->in.raw.imm[0].is_relative;
}

/* `jmp [rip+0]` followed by its 8-byte literal: the literal, else 0. */
static uint64_t abs_jump_target(const uint8_t *code)
{
  static const uint8_t form[] = {0xff, 0x25, 0, 0, 0, 0};
  uint64_t t = 0;
  if (memcmp(code, form, sizeof form) == 0)
    memcpy(&t, code + 6, 8);
  return t;
}

static int condition_code(const ZydisDecodedInstruction *in)
{
  if (in->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && in->opcode >= 0x70 && in->opcode <= 0x7f)
    return in->opcode & 0xf;
  if (in->opcode_map == ZYDIS_OPCODE_MAP_0F && in->opcode >= 0x80 && in->opcode <= 0x8f)
    return in->opcode & 0xf;
  return -1;
}

/* Does an operand of v (other than a RIP-based memory one) use the 64-bit
 * register reg64? */
static int vuses(const struct vinsn *v, ZydisRegister reg64)
{
  for (unsigned i = 0; i < v->in.operand_count; i++) {
    const ZydisDecodedOperand *op = &v->ops[i];
    ZydisRegister r[2] = {ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE};
    if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
      r[0] = op->reg.value;
    } else if (op->type == ZYDIS_OPERAND_TYPE_MEMORY) {
      r[0] = op->mem.base;
      r[1] = op->mem.index;
    }
    for (int k = 0; k < 2; k++)
      if (r[k] != ZYDIS_REGISTER_NONE &&
          ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r[k]) == reg64)
        return 1;
  }
  return 0;
}

/* The scratch-register form of a RIP-relative instruction `o` whose data
 * lies at `data`: lea rsp,[rsp-128]; push R; mov R, data; o with [R];
 * pop R; lea rsp,[rsp+128], with R unused by o. Returns its length, or 0
 * with the reason in why. */
static size_t verify_scratch_form(const struct vinsn *o, const uint8_t *code, size_t avail,
                                  uint64_t data, char *why, size_t why_cap)
{
  struct vinsn s[6];
  size_t at = 0;
  for (int i = 0; i < 6; i++) {
    if (vdecode(code + at, avail - at, &s[i]) != 0) {
      snprintf(why, why_cap, "scratch form: step %d does not decode", i);
      return 0;
    }
    at += s[i].in.length;
  }
  ZydisRegister scr = s[1].ops[0].reg.value;
  const char *bad = NULL;
  if (s[1].in.mnemonic != ZYDIS_MNEMONIC_PUSH || s[4].in.mnemonic != ZYDIS_MNEMONIC_POP ||
      s[4].ops[0].reg.value != scr)
    bad = "push/pop of the scratch register";
  else if (vuses(o, scr) || scr == ZYDIS_REGISTER_RSP)
    bad = "scratch register is used by the instruction";
  else if (s[2].in.mnemonic != ZYDIS_MNEMONIC_MOV || s[2].ops[0].reg.value != scr ||
           s[2].ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || s[2].ops[1].imm.value.u != data)
    bad = "scratch register not loaded with the data address";
  else if (s[5].in.mnemonic != ZYDIS_MNEMONIC_LEA || s[5].ops[0].reg.value != ZYDIS_REGISTER_RSP ||
           s[5].ops[1].mem.base != ZYDIS_REGISTER_RSP || s[5].ops[1].mem.disp.value != 128)
    bad = "stack pointer not restored";
  else if (s[3].in.mnemonic != o->in.mnemonic || s[3].in.operand_count != o->in.operand_count)
    bad = "instruction changed";
  for (unsigned i = 0; !bad && i < o->in.operand_count; i++) {
    const ZydisDecodedOperand *a = &o->ops[i], *b = &s[3].ops[i];
    if (a->type != b->type || a->size != b->size)
      bad = "operand kinds differ";
    else if (a->type == ZYDIS_OPERAND_TYPE_MEMORY && a->mem.base == ZYDIS_REGISTER_RIP) {
      if (b->mem.base != scr || b->mem.index != ZYDIS_REGISTER_NONE || b->mem.disp.value != 0)
        bad = "memory operand is not [scratch]";
    } else if (a->type == ZYDIS_OPERAND_TYPE_REGISTER && a->reg.value != b->reg.value)
      bad = "register operand differs";
    else if (a->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && a->imm.value.u != b->imm.value.u)
      bad = "immediate differs";
  }
  if (bad) {
    snprintf(why, why_cap, "%s: scratch form: %s", ZydisMnemonicGetString(o->in.mnemonic), bad);
    return 0;
  }
  return at;
}

#define VFAIL(...)                                       \
  do {                                                   \
    snprintf(why, why_cap, __VA_ARGS__);                 \
    return -1;                                           \
  } while (0)

/* A jump (near or absolute) at chain+at to `target`; its length, or 0. */
static size_t verify_jump_to(const uint8_t *chain, size_t avail, uint64_t pc, uint64_t target,
                             int *absolute)
{
  struct vinsn r;
  if (vdecode(chain, avail, &r) != 0)
    return 0;
  if (r.in.mnemonic != ZYDIS_MNEMONIC_JMP)
    return 0;
  if (is_relative_branch(&r)) {
    *absolute = 0;
    return vtarget(&r, pc) == target ? r.in.length : 0;
  }
  if (avail >= 14 && abs_jump_target(chain) == target) {
    *absolute = 1;
    return 14;
  }
  return 0;
}

/* chain_len is the exact length of the relocated code and its jump back, or
 * 0 when unknown (an installed trampoline): then only the window and the jump
 * back are checked. */
static int verify_relocation(const uint8_t *orig, uint64_t orig_pc, size_t window,
                             const uint8_t *chain, uint64_t chain_pc, size_t chain_len,
                             struct verify_forms *forms, char *why, size_t why_cap)
{
  size_t off = 0, roff = 0;
  int exact = chain_len != 0;
  if (!exact)
    chain_len = 256;
  while (off < window) {
    struct vinsn o, r;
    if (vdecode(orig + off, window - off, &o) != 0)
      VFAIL("original at +%zu does not decode", off);
    if (vdecode(chain + roff, chain_len - roff, &r) != 0)
      VFAIL("relocated at +%zu does not decode", roff);
    uint64_t opc = orig_pc + off, rpc = chain_pc + roff;
    const char *mn = ZydisMnemonicGetString(o.in.mnemonic);

    if (!(o.in.attributes & ZYDIS_ATTRIB_IS_RELATIVE)) {
      if (r.in.length != o.in.length || memcmp(orig + off, chain + roff, o.in.length) != 0)
        VFAIL("%s at +%zu: position-independent instruction not copied verbatim", mn, off);
      forms->copied++;
      roff += r.in.length;
    } else if (is_rip_operand(&o)) {
      uint64_t data = vtarget(&o, opc);
      if (r.in.mnemonic == o.in.mnemonic && is_rip_operand(&r)) {
        if (vtarget(&r, rpc) != data)
          VFAIL("%s at +%zu: rip operand %#llx, relocated %#llx", mn, off,
                (unsigned long long)data, (unsigned long long)vtarget(&r, rpc));
        /* everything but the displacement is unchanged */
        size_t d = o.in.raw.disp.offset;
        if (r.in.length != o.in.length || memcmp(orig + off, chain + roff, d) != 0 ||
            memcmp(orig + off + d + 4, chain + roff + d + 4, o.in.length - d - 4) != 0)
          VFAIL("%s at +%zu: bytes other than the displacement changed", mn, off);
        forms->rip_operand++;
        roff += r.in.length;
      } else if (r.in.mnemonic == ZYDIS_MNEMONIC_MOV && r.ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                 r.ops[1].imm.value.u == data && r.ops[0].reg.value == o.ops[0].reg.value &&
                 (o.in.mnemonic == ZYDIS_MNEMONIC_LEA || o.in.mnemonic == ZYDIS_MNEMONIC_MOV)) {
        roff += r.in.length;
        if (o.in.mnemonic == ZYDIS_MNEMONIC_MOV) {
          /* then mov reg, [reg] */
          struct vinsn l;
          if (vdecode(chain + roff, chain_len - roff, &l) != 0 || l.in.mnemonic != ZYDIS_MNEMONIC_MOV ||
              l.ops[0].reg.value != o.ops[0].reg.value ||
              l.ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY ||
              l.ops[1].mem.base != o.ops[0].reg.value || l.ops[1].mem.index != ZYDIS_REGISTER_NONE ||
              l.ops[1].mem.disp.value != 0)
            VFAIL("%s at +%zu: rewritten load is not mov reg, [reg]", mn, off);
          roff += l.in.length;
        }
        forms->rip_rewritten++;
      } else if (r.in.mnemonic == ZYDIS_MNEMONIC_LEA && r.ops[0].reg.value == ZYDIS_REGISTER_RSP &&
                 r.ops[1].mem.base == ZYDIS_REGISTER_RSP && r.ops[1].mem.disp.value == -128) {
        size_t n = verify_scratch_form(&o, chain + roff, chain_len - roff, data, why, why_cap);
        if (!n)
          return -1;
        forms->rip_scratch++;
        roff += n;
      } else {
        VFAIL("%s at +%zu: rip-relative instruction became %s", mn, off,
              ZydisMnemonicGetString(r.in.mnemonic));
      }
    } else {
      uint64_t target = vtarget(&o, opc);
      int absolute = 0;
      size_t n;
      switch (o.in.mnemonic) {
      case ZYDIS_MNEMONIC_JMP:
        if (!(n = verify_jump_to(chain + roff, chain_len - roff, rpc, target, &absolute)))
          VFAIL("jmp at +%zu: relocated jump does not reach %#llx", off, (unsigned long long)target);
        absolute ? forms->jmp_abs++ : forms->jmp++;
        roff += n;
        break;
      case ZYDIS_MNEMONIC_CALL:
        if (r.in.mnemonic != ZYDIS_MNEMONIC_CALL)
          VFAIL("call at +%zu became %s", off, ZydisMnemonicGetString(r.in.mnemonic));
        if (is_relative_branch(&r)) {
          if (vtarget(&r, rpc) != target)
            VFAIL("call at +%zu: relocated call misses the target", off);
          forms->call++;
          roff += r.in.length;
        } else {
          /* call [rip+2]; jmp +8; .quad target */
          uint64_t lit;
          if (r.ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY || r.ops[0].mem.base != ZYDIS_REGISTER_RIP ||
              r.ops[0].mem.disp.value != 2 || chain[roff + 6] != 0xeb || chain[roff + 7] != 8)
            VFAIL("call at +%zu: unexpected absolute call form", off);
          memcpy(&lit, chain + roff + 8, 8);
          if (lit != target)
            VFAIL("call at +%zu: absolute call literal %#llx != %#llx", off,
                  (unsigned long long)lit, (unsigned long long)target);
          forms->call_abs++;
          roff += 16;
        }
        break;
      case ZYDIS_MNEMONIC_JRCXZ:
      case ZYDIS_MNEMONIC_JECXZ:
      case ZYDIS_MNEMONIC_LOOP:
      case ZYDIS_MNEMONIC_LOOPE:
      case ZYDIS_MNEMONIC_LOOPNE: {
        /* same instruction jumping 2 bytes ahead; jmp short over; jump to target */
        if (r.in.mnemonic != o.in.mnemonic || vtarget(&r, rpc) != rpc + r.in.length + 2)
          VFAIL("%s at +%zu: relocated form is not 'cond +2'", mn, off);
        size_t at = roff + r.in.length;
        struct vinsn s;
        if (vdecode(chain + at, chain_len - at, &s) != 0 || s.in.mnemonic != ZYDIS_MNEMONIC_JMP)
          VFAIL("%s at +%zu: no skip jump", mn, off);
        at += s.in.length;
        if (!(n = verify_jump_to(chain + at, chain_len - at, chain_pc + at, target, &absolute)))
          VFAIL("%s at +%zu: taken path does not reach the target", mn, off);
        if (vtarget(&s, chain_pc + at - s.in.length) != chain_pc + at + n)
          VFAIL("%s at +%zu: fall-through skip lands wrong", mn, off);
        forms->loop_like++;
        roff = at + n;
        break;
      }
      default: {
        int cc = condition_code(&o.in);
        if (cc < 0)
          VFAIL("%s at +%zu: unexpected relative instruction", mn, off);
        int rc = condition_code(&r.in);
        if (rc == cc && vtarget(&r, rpc) == target) {
          forms->jcc++;
          roff += r.in.length;
        } else if (rc == (cc ^ 1) && vtarget(&r, rpc) == rpc + r.in.length + 14 &&
                   abs_jump_target(chain + roff + r.in.length) == target) {
          forms->jcc_abs++;
          roff += r.in.length + 14;
        } else {
          VFAIL("%s at +%zu: relocated condition or target differs", mn, off);
        }
      }
      }
    }
    off += o.in.length;
  }
  int absolute;
  size_t n = verify_jump_to(chain + roff, chain_len - roff, chain_pc + roff, orig_pc + window,
                            &absolute);
  if (!n)
    VFAIL("no jump back to the original at +%zu", window);
  if (exact && roff + n != chain_len)
    VFAIL("%zu unexpected bytes after the jump back", chain_len - roff - n);
  return 0;
}

#undef VFAIL
#endif
