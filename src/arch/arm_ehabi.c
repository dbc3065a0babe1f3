/* ARM EHABI table lookup and unwinding-instruction interpreter (arm_ehabi.h).
 *
 * An index entry is two words: the function's start (prel31) and either
 * EXIDX_CANTUNWIND (1), the instructions themselves (bit 31 set: the
 * compact model with personality 0, three instruction bytes), or a prel31
 * pointer to a table entry in .ARM.extab. A table entry starts with either
 * a compact-model word (bit 31 set; personality 0: three bytes in it;
 * personality 1 or 2: a count of further words in bits 23-16, two bytes in
 * it, four in each further word) or the prel31 address of a personality
 * routine followed by a word of GCC's layout (count of further words in its
 * top byte, three bytes in it, then four in each). Bytes are taken from the
 * most significant down. A missing "finish" is implied at the end.
 */
#include "arm_ehabi.h"

#define EXIDX_CANTUNWIND 1u

const uint32_t *ehabi_find(const struct ehabi_table *t, uintptr_t pc)
{
  size_t lo = 0, hi = t->count;
  const uint32_t *found = NULL;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const uint32_t *e = t->exidx + 2 * mid;
    if (ehabi_prel31(e) <= pc) {
      found = e;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return found;
}

/* The instruction bytes of an entry: up to 4 + 4 * 255 of them. */
struct bytes {
  const uint32_t *word; /* the word being read */
  unsigned shift;       /* bit position of the next byte in it, +8 (0: take the next word) */
  unsigned words_left;  /* further words after `word` */
};

static int next_byte(struct bytes *b, unsigned *out)
{
  if (b->shift == 0) {
    if (b->words_left == 0)
      return 0;
    b->word++;
    b->words_left--;
    b->shift = 32;
  }
  b->shift -= 8;
  *out = (*b->word >> b->shift) & 0xff;
  return 1;
}

static int in_extab(const struct ehabi_table *t, const uint32_t *w, size_t words)
{
  uintptr_t a = (uintptr_t)w;
  return a >= t->extab_lo && a <= t->extab_hi && (t->extab_hi - a) / 4 >= words && (a & 3) == 0;
}

/* Where an entry's instructions are, or a result that ends the step. */
static enum ehabi_result instructions(const struct ehabi_table *t, const uint32_t *entry, struct bytes *b)
{
  uint32_t w = entry[1];
  if (w == EXIDX_CANTUNWIND)
    return EHABI_END;
  if (w & 0x80000000u) { /* inline, personality 0 */
    if ((w >> 24) != 0x80)
      return EHABI_BAD_TABLE;
    *b = (struct bytes){&entry[1], 24, 0};
    return EHABI_OK;
  }
  const uint32_t *x = (const uint32_t *)ehabi_prel31(&entry[1]);
  if (!in_extab(t, x, 1))
    return EHABI_BAD_TABLE;
  if (x[0] & 0x80000000u) {
    unsigned index = (x[0] >> 24) & 0xf;
    if (index == 0) {
      *b = (struct bytes){x, 24, 0};
    } else if (index == 1 || index == 2) {
      unsigned more = (x[0] >> 16) & 0xff;
      if (!in_extab(t, x, 1 + (size_t)more))
        return EHABI_BAD_TABLE;
      *b = (struct bytes){x, 16, more};
    } else {
      return EHABI_UNSUPPORTED;
    }
    return EHABI_OK;
  }
  /* A personality routine of its own (C++: __gxx_personality_v0), then
   * the instructions in GCC's layout. */
  if (!in_extab(t, x, 2))
    return EHABI_BAD_TABLE;
  unsigned more = x[1] >> 24;
  if (!in_extab(t, x, 2 + (size_t)more))
    return EHABI_BAD_TABLE;
  *b = (struct bytes){&x[1], 24, more};
  return EHABI_OK;
}

static int read_word(uintptr_t at, uintptr_t lo, uintptr_t hi, uintptr_t *out)
{
  if (at < lo || at > hi - 4 || (at & 3))
    return 0;
  *out = *(const uint32_t *)at;
  return 1;
}

/* Pop the registers of `mask` (bit n: rn) from vsp, lowest first. */
static int pop(struct ehabi_regs *r, uintptr_t *vsp, unsigned mask, uintptr_t lo, uintptr_t hi, int *set_pc)
{
  uintptr_t at = *vsp, sp = 0;
  int set_sp = 0;
  for (unsigned n = 0; n < 16; n++) {
    if (!(mask & (1u << n)))
      continue;
    uintptr_t v;
    if (!read_word(at, lo, hi, &v))
      return 0;
    at += 4;
    if (n == 13) {
      sp = v, set_sp = 1;
      continue;
    }
    r->r[n] = v;
    if (n == 15)
      *set_pc = 1;
  }
  *vsp = set_sp ? sp : at;
  return 1;
}

enum ehabi_result ehabi_step(const struct ehabi_table *t, const uint32_t *entry, struct ehabi_regs *regs,
                             uintptr_t lo, uintptr_t hi)
{
  struct bytes b;
  enum ehabi_result res = instructions(t, entry, &b);
  if (res != EHABI_OK)
    return res;
  struct ehabi_regs r = *regs;
  uintptr_t vsp = r.r[13];
  int set_pc = 0;
  unsigned op, op2;
  while (next_byte(&b, &op)) {
    if ((op & 0xc0) == 0x00) { /* vsp += (x << 2) + 4 */
      vsp += ((op & 0x3f) << 2) + 4;
    } else if ((op & 0xc0) == 0x40) { /* vsp -= (x << 2) + 4 */
      vsp -= ((op & 0x3f) << 2) + 4;
    } else if ((op & 0xf0) == 0x80) { /* pop r4-r15 by mask, or refuse */
      if (!next_byte(&b, &op2))
        return EHABI_BAD_TABLE;
      unsigned mask = ((op & 0x0f) << 8 | op2) << 4;
      if (mask == 0)
        return EHABI_END;
      if (!pop(&r, &vsp, mask, lo, hi, &set_pc))
        return EHABI_BAD_STACK;
    } else if ((op & 0xf0) == 0x90) { /* vsp = r[n] */
      unsigned n = op & 0x0f;
      if (n == 13 || n == 15)
        return EHABI_UNSUPPORTED;
      vsp = r.r[n];
    } else if ((op & 0xf0) == 0xa0) { /* pop r4-r[4+n] (and r14) */
      unsigned mask = ((1u << ((op & 7) + 1)) - 1) << 4;
      if (op & 8)
        mask |= 1u << 14;
      if (!pop(&r, &vsp, mask, lo, hi, &set_pc))
        return EHABI_BAD_STACK;
    } else if (op == 0xb0) { /* finish */
      break;
    } else if (op == 0xb1) { /* pop r0-r3 by mask */
      if (!next_byte(&b, &op2))
        return EHABI_BAD_TABLE;
      if (op2 == 0 || (op2 & 0xf0))
        return EHABI_UNSUPPORTED;
      if (!pop(&r, &vsp, op2, lo, hi, &set_pc))
        return EHABI_BAD_STACK;
    } else if (op == 0xb2) { /* vsp += 0x204 + (uleb128 << 2) */
      uintptr_t v = 0;
      unsigned shift = 0;
      do {
        if (!next_byte(&b, &op2) || shift > 28)
          return EHABI_BAD_TABLE;
        v |= (uintptr_t)(op2 & 0x7f) << shift;
        shift += 7;
      } while (op2 & 0x80);
      vsp += 0x204 + (v << 2);
    } else if (op == 0xb3) { /* VFP d[s]-d[s+c] saved by FSTMFDX: 8 (c + 1) + 4 */
      if (!next_byte(&b, &op2))
        return EHABI_BAD_TABLE;
      vsp += 8 * ((op2 & 0x0f) + 1) + 4;
    } else if ((op & 0xf8) == 0xb8) { /* VFP d8-d[8+n] by FSTMFDX */
      vsp += 8 * ((op & 7) + 1) + 4;
    } else if (op == 0xc8 || op == 0xc9) { /* VFP d[16+s]-... or d[s]-... by VPUSH */
      if (!next_byte(&b, &op2))
        return EHABI_BAD_TABLE;
      vsp += 8 * ((op2 & 0x0f) + 1);
    } else if ((op & 0xf8) == 0xd0) { /* VFP d8-d[8+n] by VPUSH */
      vsp += 8 * ((op & 7) + 1);
    } else { /* iWMMXt registers, spare codes */
      return EHABI_UNSUPPORTED;
    }
  }
  if (!set_pc)
    r.r[15] = r.r[14];
  /* The caller's frame is above this one (a leaf without a frame leaves
   * the stack pointer where it was; then the return address came from lr,
   * which must have changed for the walk to move). */
  if (vsp < regs->r[13] || vsp > hi || (vsp == regs->r[13] && r.r[15] == regs->r[15]))
    return EHABI_BAD_STACK;
  r.r[13] = vsp;
  *regs = r;
  return EHABI_OK;
}

/* ehabi_step's loop without a stack: vsp followed as r[base] + off, every
 * pop recorded as a save slot at its offset. Offsets are taken relative to
 * the caller's stack pointer at the end. */
enum ehabi_result ehabi_shape(const struct ehabi_table *t, const uint32_t *entry, struct ehabi_shape *out)
{
  struct bytes b;
  enum ehabi_result res = instructions(t, entry, &b);
  if (res != EHABI_OK)
    return res;
  struct ehabi_shape s = {13, 0, 0, 0, {0}};
  int32_t off = 0;
  int interpret = 0;
  unsigned op, op2, mask = 0;
  while (next_byte(&b, &op)) {
    if ((op & 0xc0) == 0x00) {
      off += (int32_t)((op & 0x3f) << 2) + 4;
    } else if ((op & 0xc0) == 0x40) {
      off -= (int32_t)((op & 0x3f) << 2) + 4;
    } else if ((op & 0xf0) == 0x80 || (op & 0xf0) == 0xa0 || op == 0xb1) {
      if ((op & 0xf0) == 0x80) {
        if (!next_byte(&b, &op2))
          return EHABI_BAD_TABLE;
        mask = ((op & 0x0f) << 8 | op2) << 4;
        if (mask == 0)
          return EHABI_END;
      } else if ((op & 0xf0) == 0xa0) {
        mask = ((1u << ((op & 7) + 1)) - 1) << 4;
        if (op & 8)
          mask |= 1u << 14;
      } else {
        if (!next_byte(&b, &op2))
          return EHABI_BAD_TABLE;
        if (op2 == 0 || (op2 & 0xf0))
          return EHABI_UNSUPPORTED;
        mask = op2;
      }
      if (mask & (1u << 13))
        interpret = 1; /* the caller's sp read from the stack */
      for (unsigned n = 0; n < 16; n++) {
        if (!(mask & (1u << n)))
          continue;
        s.saved |= 1u << n;
        s.save_at[n] = off;
        off += 4;
      }
    } else if ((op & 0xf0) == 0x90) {
      unsigned n = op & 0x0f;
      if (n == 13 || n == 15)
        return EHABI_UNSUPPORTED;
      if (!(s.saved & (1u << n)))
        s.reads |= 1u << n;
      if (s.saved) /* a register popped, or slots taken from another base */
        interpret = 1;
      s.base = n;
      off = 0;
    } else if (op == 0xb0) {
      break;
    } else if (op == 0xb2) {
      uint32_t v = 0;
      unsigned shift = 0;
      do {
        if (!next_byte(&b, &op2) || shift > 28)
          return EHABI_BAD_TABLE;
        v |= (uint32_t)(op2 & 0x7f) << shift;
        shift += 7;
      } while (op2 & 0x80);
      if (v > 0x1000000u)
        interpret = 1; /* no frame is that large: left to the bounds checks */
      off += 0x204 + (int32_t)(v << 2);
    } else if (op == 0xb3) {
      if (!next_byte(&b, &op2))
        return EHABI_BAD_TABLE;
      off += 8 * ((op2 & 0x0f) + 1) + 4;
    } else if ((op & 0xf8) == 0xb8) {
      off += 8 * ((op & 7) + 1) + 4;
    } else if (op == 0xc8 || op == 0xc9) {
      if (!next_byte(&b, &op2))
        return EHABI_BAD_TABLE;
      off += 8 * ((op2 & 0x0f) + 1);
    } else if ((op & 0xf8) == 0xd0) {
      off += 8 * ((op & 7) + 1);
    } else {
      return EHABI_UNSUPPORTED;
    }
  }
  s.cfa = off;
  for (unsigned n = 0; n < 16; n++)
    if (s.saved & (1u << n))
      s.save_at[n] -= off;
  *out = s;
  return interpret ? EHABI_INTERPRET : EHABI_OK;
}
