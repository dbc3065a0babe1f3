/* The fast walker's PC → recipe cache: one 64-bit word per entry.
 *
 * A word holds the lookup PC's bits above PC_CACHE_BITS (32 bits of a
 * 48-bit user address, 16 of a 32-bit one: the slot index gives back the
 * low bits, see cache_slot) and a 32-bit compressed recipe below, so a reader needs a
 * single atomic load to get a key and a value that belong together: no
 * sequence counter, no torn reads, nobody ever waits. Writers simply store;
 * a racing writer may overwrite, which only costs a later miss.
 *
 * Recipes that do not fit (a CFA offset of 2^20 words or more, save slots
 * the forms below cannot place) are never cached; the walker derives them each
 * time.
 *
 * Entries are never made stale by a module change: the table is cleared
 * when a new module snapshot is published, and a writer that computed its
 * recipe from an older snapshot erases its own store (see cache_put).
 */
#ifndef IGPROF_WALK_FAST_CACHE_H
#define IGPROF_WALK_FAST_CACHE_H

#include <stdatomic.h>
#include <stdint.h>

#include "../arch/frame.h"

#define PC_CACHE_BITS 16
#define PC_CACHE_SIZE (1u << PC_CACHE_BITS)
#define RECIPE_BITS 32
#define RECIPE_MASK ((((uint64_t)1) << RECIPE_BITS) - 1)
#define PC_CACHE_MAX_PC (((uint64_t)1 << (64 - RECIPE_BITS + PC_CACHE_BITS)) - 1)
_Static_assert(PC_CACHE_MAX_PC >= ((uint64_t)1 << 48) - 1, "keys must hold a user address");

/* Compressed recipe layout (32 bits), offsets in words of RC_UNIT bytes
 * (stack slots are word-aligned: 8 bytes on 64-bit targets, 4 on 32-bit):
 *   bits 30-31  form (below)
 *   bit 29      CFA is FP-based (else SP-based)
 *   bit 28      FRAME_FP_SAVED
 *   bits 8-27   CFA offset / RC_UNIT
 *   bits 0-7    a save slot / RC_UNIT, as the form says
 * Forms:
 *   CALL   the return address at CFA + FRAME_CALL_RA_OFFSET, where a call
 *          that pushes it leaves it (x86: every frame); the FP saved at
 *          CFA - slot * RC_UNIT.
 *   BASE   the return address at base + slot * RC_UNIT, base being the register
 *          the CFA is computed from, and the FP, if saved, just below it:
 *          an AArch64 frame record [x29, x30] wherever the prologue put it
 *          (at the bottom of the frame, slot 1, as GCC does), or x30 saved
 *          alone.
 *   LR     the return address still in the link register (FRAME_RA_IN_LR),
 *          the FP unchanged; no slot.
 *   OTHER  bits 0-3 kind, bits 4-7 flags: no CFA, or FRAME_CFA_DEREF's
 *          with the return address at CFA + FRAME_CALL_RA_OFFSET: bits
 *          8-15 -cfa_offset / RC_UNIT, bits 16-23 fp_offset / RC_UNIT. */
#define RC_FORM_SHIFT 30
#define RC_FORM_CALL (0u << RC_FORM_SHIFT)
#define RC_FORM_BASE (1u << RC_FORM_SHIFT)
#define RC_FORM_LR (2u << RC_FORM_SHIFT)
#define RC_FORM_OTHER (3u << RC_FORM_SHIFT)
#define RC_FORM_MASK (3u << RC_FORM_SHIFT)
#define RC_FP_BASE (1u << 29)
#define RC_FP_SAVED (1u << 28)
#define RC_CFA_SHIFT 8
#ifdef FRAME_EHABI_TABLES
/* ARM32: r11 saved just below the return address (FRAME_R11_SAVED); CFA
 * offsets below 2 MiB. */
#define RC_R11_SAVED (1u << 27)
#define RC_CFA_MAX ((1u << 19) - 1) /* in units of RC_UNIT bytes */
#else
#define RC_CFA_MAX ((1u << 20) - 1) /* in units of RC_UNIT bytes */
#endif
#define RC_SLOT_MAX 255u            /* in units of RC_UNIT bytes */
#define RC_UNIT ((uint32_t)sizeof(uintptr_t))

static inline uint32_t recipe_form(uint32_t bits) { return bits & RC_FORM_MASK; }

/* CFA offset and save slot (in bytes, as the form reads it) of a
 * compressed CFA recipe. */
static inline uint32_t recipe_cfa_bytes(uint32_t bits)
{
  return ((bits >> RC_CFA_SHIFT) & RC_CFA_MAX) * RC_UNIT;
}
static inline uint32_t recipe_slot_bytes(uint32_t bits) { return (bits & RC_SLOT_MAX) * RC_UNIT; }

/* Whether `off` is a multiple of RC_UNIT between 0 and max * RC_UNIT. */
static inline int recipe_fits(int64_t off, uint32_t max)
{
  return off >= 0 && off % RC_UNIT == 0 && off / RC_UNIT <= (int64_t)max;
}

static inline int recipe_compress(struct frame_recipe rc, uint32_t *out)
{
  if (rc.kind == FRAME_CFA_DEREF) {
    int fp_saved = (rc.flags & FRAME_FP_SAVED) != 0;
    if (rc.ra_offset != FRAME_CALL_RA_OFFSET || !recipe_fits(-(int64_t)rc.cfa_offset, 255) ||
        (fp_saved && !recipe_fits(rc.fp_offset, 255)) || (!fp_saved && rc.fp_offset != 0))
      return 0;
    *out = RC_FORM_OTHER | rc.kind | (uint32_t)rc.flags << 4 |
           (uint32_t)(-(int64_t)rc.cfa_offset / RC_UNIT) << 8 |
           (uint32_t)(rc.fp_offset / (int32_t)RC_UNIT) << 16;
    return 1;
  }
  if (rc.kind != FRAME_CFA_SP && rc.kind != FRAME_CFA_FP) {
    *out = RC_FORM_OTHER | rc.kind | (uint32_t)rc.flags << 4;
    return 1;
  }
  if (!recipe_fits(rc.cfa_offset, RC_CFA_MAX))
    return 0;
  uint32_t bits = (uint32_t)rc.cfa_offset / RC_UNIT << RC_CFA_SHIFT;
  if (rc.kind == FRAME_CFA_FP)
    bits |= RC_FP_BASE;
#ifdef FRAME_EHABI_TABLES
  if (rc.flags & FRAME_R11_SAVED)
    bits |= RC_R11_SAVED;
#endif
  int fp_saved = (rc.flags & FRAME_FP_SAVED) != 0;
  if (rc.flags & FRAME_RA_IN_LR) {
    if (fp_saved)
      return 0;
    *out = bits | RC_FORM_LR;
    return 1;
  }
  if (rc.ra_offset == FRAME_CALL_RA_OFFSET &&
      (!fp_saved || (rc.fp_offset < 0 && recipe_fits(-(int64_t)rc.fp_offset, RC_SLOT_MAX)))) {
    if (fp_saved)
      bits |= RC_FP_SAVED | (uint32_t)-rc.fp_offset / RC_UNIT;
    *out = bits | RC_FORM_CALL;
    return 1;
  }
  int64_t ra_from_base = (int64_t)rc.cfa_offset + rc.ra_offset;
  if (!recipe_fits(ra_from_base, RC_SLOT_MAX) ||
      (fp_saved && rc.fp_offset != rc.ra_offset - (int32_t)sizeof(uintptr_t)))
    return 0;
  if (fp_saved)
    bits |= RC_FP_SAVED;
  *out = bits | RC_FORM_BASE | (uint32_t)(ra_from_base / RC_UNIT);
  return 1;
}

static inline struct frame_recipe recipe_expand(uint32_t bits)
{
  struct frame_recipe rc = {0, 0, 0, 0, 0};
  uint32_t form = recipe_form(bits);
  if (form == RC_FORM_OTHER) {
    rc.kind = bits & 0xf;
    rc.flags = (bits >> 4) & 0xf;
    if (rc.kind == FRAME_CFA_DEREF) {
      rc.cfa_offset = -(int32_t)(((bits >> 8) & 0xff) * RC_UNIT);
      rc.fp_offset = (int32_t)(((bits >> 16) & 0xff) * RC_UNIT);
      rc.ra_offset = FRAME_CALL_RA_OFFSET;
    }
    return rc;
  }
  rc.kind = (bits & RC_FP_BASE) ? FRAME_CFA_FP : FRAME_CFA_SP;
  rc.cfa_offset = (int32_t)recipe_cfa_bytes(bits);
#ifdef FRAME_EHABI_TABLES
  uint8_t r11_flag = (bits & RC_R11_SAVED) ? FRAME_R11_SAVED : 0;
#else
  const uint8_t r11_flag = 0;
#endif
  if (form == RC_FORM_LR) {
    rc.flags = FRAME_RA_IN_LR | r11_flag;
    return rc;
  }
  if (form == RC_FORM_CALL) {
    rc.ra_offset = FRAME_CALL_RA_OFFSET;
    if (bits & RC_FP_SAVED)
      rc.fp_offset = -(int32_t)recipe_slot_bytes(bits);
  } else {
    rc.ra_offset = (int32_t)recipe_slot_bytes(bits) - rc.cfa_offset;
    if (bits & RC_FP_SAVED)
      rc.fp_offset = rc.ra_offset - (int32_t)sizeof(uintptr_t);
  }
  rc.flags = r11_flag;
  if (bits & RC_FP_SAVED)
    rc.flags |= FRAME_FP_SAVED;
  return rc;
}

/* The slot of pc is its low bits mixed with the next ones; the entry keeps
 * pc >> PC_CACHE_BITS, from which and the slot's index the low bits follow
 * (low = index ^ (key & mask)): so a key match means the same pc. */
static inline _Atomic uint64_t *cache_slot(_Atomic uint64_t *cache, uintptr_t pc)
{
  /* Two cheap operations instead of a multiply: this sits on the walk's
   * chain of dependent loads. Code addresses spread well in their low bits. */
  return &cache[(pc ^ (pc >> PC_CACHE_BITS)) & (PC_CACHE_SIZE - 1)];
}

/* One load: the entry is ours if its key is pc's high part. An empty entry
 * (0) matches no pc, as none below 1 << PC_CACHE_BITS is ever looked up
 * or stored (page zero and the low pages are never mapped). */
static inline int cache_get(_Atomic uint64_t *cache, uintptr_t pc, uint32_t *bits)
{
  uint64_t e = atomic_load_explicit(cache_slot(cache, pc), memory_order_relaxed);
  uintptr_t key = pc >> PC_CACHE_BITS;
  *bits = (uint32_t)(e & RECIPE_MASK);
  return (e >> RECIPE_BITS) == key && key != 0;
}

/* Store an entry; returns the word stored (0 if pc cannot be cached).
 * The caller then checks that the snapshot its recipe came from is still
 * the current one and, if not, calls cache_retract: a store that the clear
 * of a newer snapshot may have missed must not survive it. */
static inline uint64_t cache_put(_Atomic uint64_t *cache, uintptr_t pc, uint32_t bits)
{
  uint64_t wide = pc; /* (a 32-bit pc always fits) */
  if ((pc >> PC_CACHE_BITS) == 0 || wide > PC_CACHE_MAX_PC)
    return 0;
  uint64_t e = (uint64_t)(pc >> PC_CACHE_BITS) << RECIPE_BITS | bits;
  atomic_store_explicit(cache_slot(cache, pc), e, memory_order_seq_cst);
  return e;
}

static inline void cache_retract(_Atomic uint64_t *cache, uintptr_t pc, uint64_t stored)
{
  atomic_compare_exchange_strong(cache_slot(cache, pc), &stored, 0);
}

static inline void cache_clear(_Atomic uint64_t *cache)
{
  for (uint32_t i = 0; i < PC_CACHE_SIZE; i++)
    atomic_store_explicit(&cache[i], 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
}

#endif
