/* ARM32 prologue reading (arm_prologue.h): find the push that saved lr by
 * scanning back from the PC, then decode forwards from it to the PC,
 * following every change of sp the decoder knows, so instruction
 * boundaries are decided going forwards (Thumb-2 mixes 2- and 4-byte
 * instructions, and a halfword may be either half of one). What moves sp
 * in a way the decoder does not follow (sp from a register, an
 * instruction under a condition) refuses the frame; a push candidate whose
 * decoding does not end exactly at the PC (it was data, or half of an
 * instruction) is dropped for the next one further back.
 *
 * Code after an unconditional transfer (a return, a branch) is reached by
 * a branch from the function's body: its frame is the body's, the state
 * before the epilogue (the deepest state reached), not what the epilogue
 * left. Literal pools referenced by a PC-relative load earlier in the
 * function and the tables of tbb/tbh are skipped as data. */
#include "arm_prologue.h"

#include <string.h>

/* The code as the reader sees it: memory, with the windows a hook patched
 * read as they were (the caller's arm_code_patch list, usually empty). */
struct code {
  const struct arm_code_patch *patch;
  size_t npatch;
};

static void unpatch(const struct code *c, uintptr_t at, uint8_t *v, size_t len)
{
  for (size_t i = 0; i < c->npatch; i++) {
    const struct arm_code_patch *w = &c->patch[i];
    for (size_t k = 0; k < len; k++)
      if (at + k >= w->at && at + k < w->at + w->len)
        v[k] = w->bytes[at + k - w->at];
  }
}

static uint32_t rd16(const struct code *c, uintptr_t at)
{
  uint16_t v;
  memcpy(&v, (const void *)at, sizeof v);
  if (c && c->npatch)
    unpatch(c, at, (uint8_t *)&v, sizeof v);
  return v;
}

static uint32_t rd32(const struct code *c, uintptr_t at)
{
  uint32_t v;
  memcpy(&v, (const void *)at, sizeof v);
  if (c && c->npatch)
    unpatch(c, at, (uint8_t *)&v, sizeof v);
  return v;
}

struct state {
  int32_t off;                  /* bytes below the caller's sp */
  int32_t ra_at, r7_at, r11_at; /* save slots relative to the caller's sp; 0: none */
  int ra_in_lr;
  int r7_known;   /* r7 = caller's sp - r7_off */
  int32_t r7_off;
  int unknown;    /* sp not followed until the next unconditional transfer */
};

/* Literal data seen referenced so far: skipped when the decoding gets there. */
#define MAX_LITERALS 64
struct literals {
  int n;
  uintptr_t lo[MAX_LITERALS], hi[MAX_LITERALS];
};

static void literal_add(struct literals *l, uintptr_t at, uintptr_t len)
{
  if (l->n < MAX_LITERALS) {
    l->lo[l->n] = at;
    l->hi[l->n] = at + len;
    l->n++;
  }
}

/* The end of the literal data at p, or p. */
static uintptr_t literal_skip(const struct literals *l, uintptr_t p)
{
  for (int again = 1; again;) {
    again = 0;
    for (int i = 0; i < l->n; i++)
      if (p >= l->lo[i] && p < l->hi[i]) {
        p = l->hi[i];
        again = 1;
      }
  }
  return p;
}

static void push_regs(struct state *s, uint32_t list)
{
  int n = __builtin_popcount(list);
  s->off += 4 * n;
  int32_t slot = -s->off;
  for (int r = 0; r < 16; r++) {
    if (!(list & (1u << r)))
      continue;
    if (r == 14 && (s->ra_at == 0 || s->ra_in_lr)) {
      s->ra_at = slot;
      s->ra_in_lr = 0;
    }
    if (r == 7 && s->r7_at == 0)
      s->r7_at = slot;
    if (r == 11 && s->r11_at == 0)
      s->r11_at = slot;
    slot += 4;
  }
}

/* Returns 0 when sp would rise above the caller's. */
static int pop_regs(struct state *s, uint32_t list)
{
  s->off -= 4 * __builtin_popcount(list);
  if (list & (1u << 14))
    s->ra_in_lr = 1;
  if (list & (1u << 7)) {
    s->r7_at = 0; /* r7 holds the caller's again */
    s->r7_known = 0;
  }
  if (list & (1u << 11))
    s->r11_at = 0;
  return s->off >= 0;
}

enum decoded { D_OK, D_MISALIGNED, D_REFUSED };

/* ThumbExpandImm / A32's rotated immediate, for the sp forms only. */
static uint32_t thumb_expand_imm(uint32_t i12)
{
  if ((i12 >> 10) == 0) {
    uint32_t b = i12 & 0xff;
    switch ((i12 >> 8) & 3) {
    case 0: return b;
    case 1: return b << 16 | b;
    case 2: return b << 24 | b << 8;
    default: return b << 24 | b << 16 | b << 8 | b;
    }
  }
  uint32_t v = 0x80 | (i12 & 0x7f), rot = i12 >> 7;
  return v >> rot | v << (32 - rot);
}

static uint32_t a32_imm(uint32_t w)
{
  uint32_t v = w & 0xff, rot = ((w >> 8) & 15) * 2;
  return rot ? v >> rot | v << (32 - rot) : v;
}

/* sp += delta (negative: down). */
static int adjust(struct state *s, int64_t delta)
{
  int64_t off = (int64_t)s->off - delta;
  if (off < 0 || off > (1 << 24))
    return 0;
  s->off = (int32_t)off;
  return 1;
}

/* A decoding that reached p: the state at the PC (end), if it is there. */
static enum decoded decoded_at(uintptr_t p, uintptr_t end, const struct state *cur,
                               struct state *out)
{
  if (p != end)
    return D_MISALIGNED;
  if (cur->unknown)
    return D_REFUSED;
  *out = *cur;
  return D_OK;
}

static enum decoded decode_thumb(const struct code *c, uintptr_t start, uintptr_t end, struct state *out)
{
  struct state cur, body;
  memset(&cur, 0, sizeof cur);
  body = cur;
  struct literals lits;
  lits.n = 0;
  int it_left = 0;
  uintptr_t p = start;
  while (p < end) {
    uintptr_t q = literal_skip(&lits, p);
    if (q != p) {
      p = q;
      continue;
    }
    uint32_t h1 = rd16(c, p), h2 = 0;
    int wide = (h1 >> 11) >= 0x1d;
    if (wide) {
      if (p + 4 > end)
        return D_MISALIGNED;
      h2 = rd16(c, p + 2);
    }
    int in_it = it_left > 0;
    if (in_it)
      it_left--;
    int grows = 0, transfer = 0, returns = 0, sp_written = 0;
    if (!wide) {
      if ((h1 & 0xff00) == 0xbf00 && (h1 & 0xf)) { /* it */
        uint32_t mask = h1 & 0xf;
        it_left = 4 - __builtin_ctz(mask);
      } else if ((h1 & 0xfe00) == 0xb400) { /* push */
        push_regs(&cur, (h1 & 0xff) | (h1 & 0x100 ? 1u << 14 : 0));
        grows = sp_written = 1;
      } else if ((h1 & 0xfe00) == 0xbc00) { /* pop */
        if (h1 & 0x100)
          returns = 1;
        else if (!pop_regs(&cur, h1 & 0xff))
          return D_REFUSED;
        sp_written = !returns;
      } else if ((h1 & 0xff80) == 0xb080) { /* sub sp, #imm */
        if (!adjust(&cur, -(int64_t)((h1 & 0x7f) * 4)))
          return D_REFUSED;
        grows = sp_written = 1;
      } else if ((h1 & 0xff80) == 0xb000) { /* add sp, #imm */
        if (!adjust(&cur, (h1 & 0x7f) * 4))
          return D_REFUSED;
        sp_written = 1;
      } else if (h1 == 0x4770) { /* bx lr */
        returns = 1;
      } else if ((h1 & 0xff87) == 0x4700 || (h1 & 0xff87) == 0x4687) { /* bx rm, mov pc, rm */
        transfer = 1; /* a tail call through a register, a jump table */
      } else if ((h1 & 0xff87) == 0x4685) { /* mov sp, rm */
        sp_written = 1;
        if (((h1 >> 3) & 15) == 7 && cur.r7_known)
          cur.off = cur.r7_off;
        else if (((h1 >> 3) & 15) == 7 || ((h1 >> 3) & 15) == 11)
          cur.unknown = 1; /* a frame pointer's epilogue */
        else
          return D_REFUSED;
      } else if ((h1 & 0xff87) == 0x4485) { /* add sp, rm */
        return D_REFUSED;
      } else if (h1 == 0x466f) { /* mov r7, sp */
        cur.r7_known = 1;
        cur.r7_off = cur.off;
        grows = 1;
      } else if ((h1 & 0xff00) == 0xaf00) { /* add r7, sp, #imm */
        cur.r7_known = 1;
        cur.r7_off = cur.off - (int32_t)((h1 & 0xff) * 4);
        grows = 1;
      } else if ((h1 & 0xff00) == 0x3700) { /* adds r7, #imm */
        cur.r7_off -= (int32_t)(h1 & 0xff);
      } else if ((h1 & 0xff00) == 0x3f00) { /* subs r7, #imm */
        cur.r7_off += (int32_t)(h1 & 0xff);
      } else if ((h1 & 0xf800) == 0x4800) { /* ldr rt, [pc, #imm]: a literal */
        literal_add(&lits, ((p + 4) & ~(uintptr_t)3) + (h1 & 0xff) * 4, 4);
      } else if ((h1 & 0xf800) == 0xe000) { /* b */
        transfer = 1;
      }
    } else {
      if (h1 == 0xe92d) { /* push.w / stmdb sp! */
        if (h2 & (1u << 13 | 1u << 15))
          return D_REFUSED;
        push_regs(&cur, h2);
        grows = sp_written = 1;
      } else if (h1 == 0xe8bd) { /* pop.w / ldmia sp! */
        if (h2 & (1u << 13))
          return D_REFUSED;
        if (h2 & (1u << 15))
          returns = 1;
        else if (!pop_regs(&cur, h2))
          return D_REFUSED;
        sp_written = !returns;
      } else if (h1 == 0xf84d && (h2 & 0x0fff) == 0x0d04) { /* str.w rt, [sp, #-4]! */
        if ((h2 >> 12) == 13 || (h2 >> 12) == 15)
          return D_REFUSED;
        push_regs(&cur, 1u << (h2 >> 12));
        grows = sp_written = 1;
      } else if (h1 == 0xf85d && (h2 & 0x0fff) == 0x0b04) { /* ldr.w rt, [sp], #4 */
        if ((h2 >> 12) == 15)
          returns = 1;
        else if ((h2 >> 12) == 13 || !pop_regs(&cur, 1u << (h2 >> 12)))
          return D_REFUSED;
        sp_written = !returns;
      } else if ((h1 & 0xffbf) == 0xed2d && (h2 & 0x0e00) == 0x0a00) { /* vpush */
        if (!adjust(&cur, -(int64_t)((h2 & 0xff) * 4)))
          return D_REFUSED;
        grows = sp_written = 1;
      } else if ((h1 & 0xffbf) == 0xecbd && (h2 & 0x0e00) == 0x0a00) { /* vpop */
        if (!adjust(&cur, (h2 & 0xff) * 4))
          return D_REFUSED;
        sp_written = 1;
      } else if ((h1 & 0xfff0) == 0xf8d0 && (h2 >> 12) == 15) { /* ldr.w pc, [rn, #imm] */
        transfer = 1;
      } else if ((h1 & 0xf800) == 0xf000 && (h2 & 0x8000)) { /* branches, misc control */
        if ((h2 & 0xd000) == 0x9000)
          transfer = 1; /* b.w */
        /* bl, blx, b<c>.w: the frame is the same after them */
      } else if ((h1 & 0xf800) == 0xf000 && !(h2 & 0x8000) && ((h2 >> 8) & 15) == 13) {
        /* data processing with an immediate, writing sp */
        uint32_t rn = h1 & 15, op = h1 & 0xfbe0;
        uint32_t i12 = (h1 & 0x400) << 1 | (h2 & 0x7000) >> 4 | (h2 & 0xff);
        sp_written = 1;
        if (rn == 13 && (op == 0xf1a0 || op == 0xf2a0)) { /* sub.w / subw sp, sp, #imm */
          if (!adjust(&cur, -(int64_t)(op == 0xf1a0 ? thumb_expand_imm(i12) : i12)))
            return D_REFUSED;
          grows = 1;
        } else if (rn == 13 && (op == 0xf100 || op == 0xf200)) { /* add.w / addw */
          if (!adjust(&cur, op == 0xf100 ? thumb_expand_imm(i12) : i12))
            return D_REFUSED;
        } else if (rn == 7 || rn == 11) {
          cur.unknown = 1; /* sp from the frame pointer: an epilogue */
        } else {
          return D_REFUSED;
        }
      } else if ((h1 & 0xfe00) == 0xea00 && ((h2 >> 8) & 15) == 13) {
        /* data processing with a register, writing sp (mov.w sp, rm) */
        sp_written = 1;
        if ((h2 & 15) == 7 || (h2 & 15) == 11)
          cur.unknown = 1;
        else
          return D_REFUSED;
      } else if ((h1 & 0xff7f) == 0xf85f) { /* ldr.w rt, [pc, #+-imm] */
        uintptr_t base = (p + 4) & ~(uintptr_t)3, imm = h2 & 0xfff;
        literal_add(&lits, h1 & 0x80 ? base + imm : base - imm, 4);
      } else if ((h1 & 0xff7f) == 0xe95f) { /* ldrd literal */
        uintptr_t base = (p + 4) & ~(uintptr_t)3, imm = (h2 & 0xff) * 4;
        literal_add(&lits, h1 & 0x80 ? base + imm : base - imm, 8);
      } else if ((h1 & 0xff3f) == 0xed1f && (h2 & 0x0e00) == 0x0a00) { /* vldr literal */
        uintptr_t base = (p + 4) & ~(uintptr_t)3, imm = (h2 & 0xff) * 4;
        literal_add(&lits, h1 & 0x80 ? base + imm : base - imm, h2 & 0x100 ? 8 : 4);
      } else if (h1 == 0xe8df && (h2 & 0xffe0) == 0xf000) { /* tbb/tbh [pc, rm] */
        /* The table follows; it ends where its nearest target is. */
        uintptr_t table = p + 4, limit = end;
        int size = h2 & 0x10 ? 2 : 1;
        for (uintptr_t t = table; t + size <= limit && t + size <= end; t += size) {
          uintptr_t target = table + 2 * (size == 2 ? rd16(c, t) : *(const uint8_t *)t);
          if (target < limit)
            limit = target;
        }
        if (limit > end || limit < table)
          return D_MISALIGNED;
        literal_add(&lits, table, limit - table);
        transfer = 1;
      }
    }
    p += wide ? 4 : 2;
    if (in_it) {
      if (returns || transfer)
        continue; /* taken: gone; not taken: nothing changed */
      if (sp_written)
        return D_REFUSED; /* sp changed under a condition */
    }
    if (returns || transfer) {
      cur = body;
    } else if (grows && !cur.unknown) {
      body = cur;
    }
  }
  return decoded_at(p, end, &cur, out);
}

static enum decoded decode_a32(const struct code *c, uintptr_t start, uintptr_t end, struct state *out)
{
  struct state cur, body;
  memset(&cur, 0, sizeof cur);
  body = cur;
  struct literals lits;
  lits.n = 0;
  uintptr_t p = start;
  while (p < end) {
    uintptr_t q = literal_skip(&lits, p);
    if (q != p) {
      p = (q + 3) & ~(uintptr_t)3;
      continue;
    }
    uint32_t w = rd32(c, p), cond = w >> 28, body_w = w & 0x0fffffff;
    int always = cond == 0xe;
    int grows = 0, transfer = 0, returns = 0, sp_written = 0;
    if ((body_w & 0x0fff0000) == 0x092d0000) { /* push / stmdb sp! */
      if ((w & (1u << 13 | 1u << 15)) || !always)
        return D_REFUSED;
      push_regs(&cur, w & 0xffff);
      grows = sp_written = 1;
    } else if ((body_w & 0x0fff0000) == 0x08bd0000) { /* pop / ldmia sp! */
      if (w & (1u << 13))
        return D_REFUSED;
      if (w & (1u << 15))
        returns = 1;
      else if (!always || !pop_regs(&cur, w & 0xffff))
        return D_REFUSED;
      sp_written = !returns;
    } else if ((body_w & 0x0fff0fff) == 0x052d0004) { /* str rt, [sp, #-4]! */
      uint32_t rt = (w >> 12) & 15;
      if (rt == 13 || rt == 15 || !always)
        return D_REFUSED;
      push_regs(&cur, 1u << rt);
      grows = sp_written = 1;
    } else if ((body_w & 0x0fff0fff) == 0x049d0004) { /* ldr rt, [sp], #4 */
      uint32_t rt = (w >> 12) & 15;
      if (rt == 15)
        returns = 1;
      else if (rt == 13 || !always || !pop_regs(&cur, 1u << rt))
        return D_REFUSED;
      sp_written = !returns;
    } else if ((body_w & 0x0fbf0e00) == 0x0d2d0a00) { /* vpush */
      if (!always || !adjust(&cur, -(int64_t)((w & 0xff) * 4)))
        return D_REFUSED;
      grows = sp_written = 1;
    } else if ((body_w & 0x0fbf0e00) == 0x0cbd0a00) { /* vpop */
      if (!always || !adjust(&cur, (w & 0xff) * 4))
        return D_REFUSED;
      sp_written = 1;
    } else if ((body_w & 0x0fffffff) == 0x012fff1e) { /* bx lr */
      returns = 1;
    } else if (cond != 0xf && ((body_w & 0x0ffffff0) == 0x012fff10 || (body_w & 0x0feffff0) == 0x01a0f000 ||
                               ((body_w & 0x0e50f000) == 0x0410f000 && ((w >> 16) & 15) != 13))) {
      transfer = 1; /* bx rm, mov pc, rm, ldr pc, [rn, ...]: a tail call, a jump table */
    } else if (cond != 0xf && (body_w & 0x0f000000) == 0x0a000000) { /* b */
      transfer = 1;
    } else if (cond != 0xf && (body_w & 0x0f7f0000) == 0x051f0000) { /* ldr rt, [pc, #+-imm] */
      uintptr_t imm = w & 0xfff;
      literal_add(&lits, w & (1u << 23) ? p + 8 + imm : p + 8 - imm, 4);
    } else if (cond != 0xf && (body_w & 0x0f3f0e00) == 0x0d1f0a00) { /* vldr literal */
      uintptr_t imm = (w & 0xff) * 4;
      literal_add(&lits, w & (1u << 23) ? p + 8 + imm : p + 8 - imm, w & 0x100 ? 8 : 4);
    } else if (cond != 0xf && (body_w & 0x0c000000) == 0 && ((w >> 12) & 15) == 13 &&
               !((w & 0x01900000) == 0x01000000) && !((w & 0x02000090) == 0x90)) {
      /* data processing writing sp (not tst/teq/cmp/cmn, not a multiply
       * or an extra load/store) */
      uint32_t rn = (w >> 16) & 15, op = (w >> 21) & 15, imm = w & (1u << 25);
      sp_written = 1;
      if (!always) {
        return D_REFUSED;
      } else if (imm && rn == 13 && op == 2) { /* sub sp, sp, #imm */
        if (!adjust(&cur, -(int64_t)a32_imm(w)))
          return D_REFUSED;
        grows = 1;
      } else if (imm && rn == 13 && op == 4) { /* add sp, sp, #imm */
        if (!adjust(&cur, a32_imm(w)))
          return D_REFUSED;
      } else if (rn == 11 || rn == 7 || (op == 13 && !imm && ((w & 15) == 11 || (w & 15) == 7))) {
        cur.unknown = 1; /* sp from the frame pointer: an epilogue */
      } else {
        return D_REFUSED;
      }
    }
    p += 4;
    if (!always && (returns || transfer))
      continue; /* a conditional return or branch: not taken, nothing changed */
    if (returns || transfer)
      cur = body;
    else if (grows && !cur.unknown)
      body = cur;
  }
  return decoded_at(p, end, &cur, out);
}

/* Whether the halfword(s) at `at` (Thumb) save lr on the stack. */
static int thumb_saves_lr(const struct code *c, uintptr_t at, uintptr_t end)
{
  uint32_t h = rd16(c, at);
  if ((h & 0xff00) == 0xb500)
    return 1;
  if (at + 4 > end)
    return 0;
  uint32_t h2 = rd16(c, at + 2);
  return (h == 0xe92d && (h2 & 0xe000) == 0x4000) || (h == 0xf84d && h2 == 0xed04);
}

static int thumb_returns(const struct code *c, uintptr_t at, uintptr_t end)
{
  uint32_t h = rd16(c, at);
  if (h == 0x4770 || (h & 0xff00) == 0xbd00)
    return 1;
  return at + 4 <= end && h == 0xe8bd && (rd16(c, at + 2) & 0x8000);
}

static int a32_saves_lr(uint32_t w) { return (w & 0xffffe000) == 0xe92d4000 || w == 0xe52de004; }

static int a32_returns(uint32_t w)
{
  return w == 0xe12fff1e || (w & 0xffff8000) == 0xe8bd8000 || w == 0xe49df004;
}

/* A varargs function spills r0-r3 (or makes room) before it saves lr:
 * the instruction just before the push belongs to the prologue. */
static uintptr_t spill_before(const struct code *c, uintptr_t at, uintptr_t lo, int thumb)
{
  if (thumb) {
    if (at < lo + 2)
      return at;
    uint32_t h = rd16(c, at - 2);
    if (((h & 0xfff0) == 0xb400 && (h & 0xf)) || ((h & 0xff80) == 0xb080 && (h & 0x7f) <= 4))
      return at - 2;
    return at;
  }
  if (at < lo + 4)
    return at;
  uint32_t w = rd32(c, at - 4);
  if (((w & 0xfffffff0) == 0xe92d0000 && (w & 0xf)) ||
      ((w & 0xffffff00) == 0xe24dd000 && (w & 0xff) <= 16 && (w & 3) == 0))
    return at - 4;
  return at;
}

/* Whether the code at `at` moves sp down without saving lr: a leaf's
 * prologue (push without lr, sub sp). */
static int thumb_leaf_prologue(const struct code *c, uintptr_t at, uintptr_t end)
{
  uint32_t h = rd16(c, at);
  if ((h & 0xff00) == 0xb400 || (h & 0xff80) == 0xb080)
    return 1;
  if (at + 4 > end)
    return 0;
  uint32_t h2 = rd16(c, at + 2);
  return (h == 0xe92d && !(h2 & 0xe000)) || (h == 0xf84d && (h2 & 0x0fff) == 0x0d04);
}

static int a32_leaf_prologue(uint32_t w)
{
  return (w & 0xffffe000) == 0xe92d0000 || (w & 0xffff0fff) == 0xe52d0004 ||
         (w & 0xfffff000) == 0xe24dd000;
}

enum arm_prologue_result arm_prologue_read(uintptr_t lo, uintptr_t end, int thumb,
                                           const struct arm_code_patch *patch, size_t npatch,
                                           struct arm_prologue *out)
{
  const struct code code = {patch, npatch}, *c = &code;
  memset(out, 0, sizeof *out);
  unsigned step = thumb ? 2 : 4;
  if (end % step)
    return ARM_PROLOGUE_REFUSED;
  uintptr_t scan_lo = end > ARM_PROLOGUE_SCAN ? end - ARM_PROLOGUE_SCAN : 0;
  if (scan_lo < lo)
    scan_lo = lo;
  int tries = 0;
  uintptr_t leaf_start = end;
  enum arm_prologue_result res = ARM_PROLOGUE_LEAF;
  for (uintptr_t at = end; at >= scan_lo + step && tries < 4;) {
    at -= step;
    int saves = thumb ? thumb_saves_lr(c, at, end) : a32_saves_lr(rd32(c, at));
    if (!saves) {
      if (out->crossed_return)
        continue;
      if (thumb ? thumb_returns(c, at, end) : a32_returns(rd32(c, at))) {
        out->crossed_return = 1;
        out->return_at = at;
      } else if (thumb ? thumb_leaf_prologue(c, at, end) : a32_leaf_prologue(rd32(c, at))) {
        leaf_start = at;
      }
      continue;
    }
    tries++;
    uintptr_t start = spill_before(c, at, scan_lo, thumb);
    struct state st;
    enum decoded d = thumb ? decode_thumb(c, start, end, &st) : decode_a32(c, start, end, &st);
    if (d == D_MISALIGNED)
      continue;
    if (d == D_REFUSED) {
      res = ARM_PROLOGUE_REFUSED;
      break;
    }
    out->cfa = st.off;
    out->ra_at = st.ra_at;
    out->r7_at = st.r7_at;
    out->r11_at = st.r11_at;
    out->ra_in_lr = st.ra_in_lr || st.ra_at == 0;
    out->push = at;
    res = ARM_PROLOGUE_OK;
    break;
  }
  /* The leaf's reading: from the furthest sp change before the nearest
   * return (none: sp is the caller's). */
  struct state leaf;
  if (leaf_start == end) {
    out->leaf_ok = 1;
  } else if ((thumb ? decode_thumb(c, leaf_start, end, &leaf) : decode_a32(c, leaf_start, end, &leaf)) == D_OK &&
             leaf.ra_at == 0) {
    out->leaf_ok = 1;
    out->leaf_cfa = leaf.off;
  }
  return res;
}

int arm_follows_call(uintptr_t ra)
{
  if (ra & 1) {
    uintptr_t a = ra & ~(uintptr_t)1;
    uint32_t h1 = rd16(NULL, a - 4), h2 = rd16(NULL, a - 2);
    if ((h1 & 0xf800) == 0xf000 && ((h2 & 0xd000) == 0xd000 || (h2 & 0xd001) == 0xc000))
      return 1; /* bl, blx imm */
    return (h2 & 0xff87) == 0x4780; /* blx rm */
  }
  if (ra & 3)
    return 0;
  uint32_t w = rd32(NULL, ra - 4);
  if ((w >> 28) != 0xf && (w & 0x0f000000) == 0x0b000000)
    return 1; /* bl */
  if ((w & 0xfe000000) == 0xfa000000)
    return 1; /* blx imm */
  return (w & 0x0ffffff0) == 0x012fff30; /* blx rm */
}

int arm_call_target(uintptr_t ra, uintptr_t *target)
{
  if (ra & 1) {
    uintptr_t a = ra & ~(uintptr_t)1;
    uint32_t h1 = rd16(NULL, a - 4), h2 = rd16(NULL, a - 2);
    if ((h1 & 0xf800) != 0xf000 || (h2 & 0xc000) != 0xc000)
      return 0;
    uint32_t s = (h1 >> 10) & 1, j1 = (h2 >> 13) & 1, j2 = (h2 >> 11) & 1;
    uint32_t i1 = !(j1 ^ s), i2 = !(j2 ^ s);
    uint32_t imm = s << 24 | i1 << 23 | i2 << 22 | (h1 & 0x3ff) << 12 | (h2 & 0x7ff) << 1;
    int32_t off = (int32_t)(imm << 7) >> 7;
    if (h2 & 0x1000) /* bl: Thumb */
      *target = (a + (uintptr_t)(intptr_t)off) | 1;
    else /* blx: A32 */
      *target = (a & ~(uintptr_t)3) + (uintptr_t)(intptr_t)(off & ~3);
    return 1;
  }
  uint32_t w = rd32(NULL, ra - 4);
  int32_t off = (int32_t)(w << 8) >> 6;
  if ((w >> 28) != 0xf && (w & 0x0f000000) == 0x0b000000) {
    *target = ra + 4 + (uintptr_t)(intptr_t)off;
    return 1;
  }
  if ((w & 0xfe000000) == 0xfa000000) {
    *target = (ra + 4 + (uintptr_t)(intptr_t)off + ((w >> 23) & 2)) | 1;
    return 1;
  }
  return 0;
}

/* Whether [at, at + 2) (Thumb) ends the code before it: a return, an
 * unconditional branch (a tail call), or the second half of pop.w {..., pc}
 * or b.w, with [lo, at + 2) readable. */
static int thumb_ends_before(uintptr_t lo, uintptr_t at)
{
  uint32_t h = rd16(NULL, at);
  if (h == 0x4770 || (h & 0xff00) == 0xbd00 || (h & 0xf800) == 0xe000)
    return 1; /* bx lr, pop {..., pc}, b.n */
  if (at < lo + 2)
    return 0;
  uint32_t h1 = rd16(NULL, at - 2);
  return (h1 == 0xe8bd && (h & 0x8000)) || ((h1 & 0xf800) == 0xf000 && (h & 0xd000) == 0x9000);
}

uint32_t arm_push_at(uintptr_t pc)
{
  /* Thumb: push {...} (lr as bit 14), push.w (stmdb sp!, {...}), str.w rt, [sp, #-4]!. */
  uint32_t h = rd16(NULL, pc);
  if ((h & 0xfe00) == 0xb400)
    return (h & 0xff) | ((h & 0x100) ? 1u << 14 : 0);
  if (h == 0xe92d || h == 0xf84d) {
    uint32_t h2 = rd16(NULL, pc + 2);
    if (h == 0xe92d && !(h2 & 0xa000))
      return h2;
    if (h == 0xf84d && (h2 & 0x0fff) == 0x0d04)
      return 1u << (h2 >> 12);
  }
  /* A32: stmdb sp!, {...} (push), str rt, [sp, #-4]!. */
  if (pc % 4 == 0) {
    uint32_t w = rd32(NULL, pc);
    if ((w & 0xffff0000) == 0xe92d0000 && !(w & 0xa000))
      return w & 0xffff;
    if ((w & 0xffff0fff) == 0xe52d0004)
      return 1u << ((w >> 12) & 15);
  }
  return 0;
}

int arm_function_entry(uintptr_t lo, uintptr_t pc)
{
  /* Thumb: push {..., lr} / push.w / str.w lr, [sp, #-4]! after the end of
   * the code before it, nop padding between. */
  if (pc >= lo + 2 && thumb_saves_lr(NULL, pc, pc + 4)) {
    uintptr_t p = pc - 2;
    for (int pad = 0; pad < 3 && p >= lo + 2 && (rd16(NULL, p) == 0xbf00 || rd16(NULL, p) == 0x46c0); pad++)
      p -= 2;
    if (thumb_ends_before(lo, p))
      return 1;
  }
  /* A32: stmdb sp!, {..., lr} / str lr, [sp, #-4]! after a return or b. */
  if (pc % 4 == 0 && pc >= lo + 4 && a32_saves_lr(rd32(NULL, pc))) {
    uintptr_t p = pc - 4;
    for (int pad = 0; pad < 3 && p >= lo + 4 && (rd32(NULL, p) == 0xe320f000 || rd32(NULL, p) == 0xe1a00000); pad++)
      p -= 4;
    uint32_t w = rd32(NULL, p);
    if (a32_returns(w) || (w & 0xff000000) == 0xea000000)
      return 1;
  }
  return 0;
}
