/* The fast walker's PC → recipe cache: one 64-bit word per entry.
 *
 * A word holds the lookup PC in its upper 47 bits (x86_64 user addresses)
 * and a 17-bit compressed recipe below, so a reader needs a single atomic
 * load to get a key and a value that belong together: no sequence counter,
 * no torn reads, nobody ever waits. Writers simply store; a racing writer
 * may overwrite, which only costs a later miss.
 *
 * Recipes that do not fit 17 bits (a CFA offset above 8 KiB, a return
 * address not at CFA-8) are never cached; the walker finds them by binary
 * search each time.
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

#define PC_CACHE_BITS 14
#define PC_CACHE_SIZE (1u << PC_CACHE_BITS)
#define RECIPE_BITS 17
#define PC_CACHE_MAX_PC (((uint64_t)1 << (64 - RECIPE_BITS)) - 1)

/* Compressed recipe layout (17 bits):
 *   bit 16      1: "other" — bits 0-3 kind, bits 4-7 flags (no offsets)
 *   bit 15      CFA is FP-based (else SP-based)
 *   bit 14      FRAME_FP_SAVED
 *   bits 4-13   CFA offset / 8
 *   bits 0-3    -(FP save offset) / 8
 * The return address is at CFA-8 in every compressed CFA recipe. */
#define RC_OTHER (1u << 16)
#define RC_FP_BASE (1u << 15)
#define RC_FP_SAVED (1u << 14)

static inline int recipe_compress(struct frame_recipe rc, uint32_t *out) {
  if (rc.kind != FRAME_CFA_SP && rc.kind != FRAME_CFA_FP) {
    *out = RC_OTHER | rc.kind | (uint32_t)rc.flags << 4;
    return 1;
  }
  if (rc.ra_offset != -8 || rc.cfa_offset < 0 || rc.cfa_offset % 8 || rc.cfa_offset / 8 > 1023)
    return 0;
  uint32_t bits = (uint32_t)rc.cfa_offset / 8 << 4;
  if (rc.kind == FRAME_CFA_FP)
    bits |= RC_FP_BASE;
  if (rc.flags & FRAME_FP_SAVED) {
    if (rc.fp_offset > -8 || rc.fp_offset % 8 || -rc.fp_offset / 8 > 15)
      return 0;
    bits |= RC_FP_SAVED | (uint32_t)(-rc.fp_offset / 8);
  }
  *out = bits;
  return 1;
}

static inline struct frame_recipe recipe_expand(uint32_t bits) {
  struct frame_recipe rc = {0, 0, 0, 0, 0};
  if (bits & RC_OTHER) {
    rc.kind = bits & 0xf;
    rc.flags = (bits >> 4) & 0xf;
    return rc;
  }
  rc.kind = (bits & RC_FP_BASE) ? FRAME_CFA_FP : FRAME_CFA_SP;
  rc.cfa_offset = (int32_t)((bits >> 4) & 1023) * 8;
  rc.ra_offset = -8;
  if (bits & RC_FP_SAVED) {
    rc.flags = FRAME_FP_SAVED;
    rc.fp_offset = (int16_t)(-(int32_t)(bits & 15) * 8);
  }
  return rc;
}

static inline _Atomic uint64_t *cache_slot(_Atomic uint64_t *cache, uintptr_t pc) {
  /* Two cheap operations instead of a multiply: this sits on the walk's
   * chain of dependent loads. Code addresses spread well in their low bits. */
  return &cache[(pc ^ (pc >> PC_CACHE_BITS)) & (PC_CACHE_SIZE - 1)];
}

/* One load: the entry is ours if its key is pc. */
static inline int cache_get(_Atomic uint64_t *cache, uintptr_t pc, uint32_t *bits) {
  uint64_t e = atomic_load_explicit(cache_slot(cache, pc), memory_order_relaxed);
  *bits = (uint32_t)(e & ((1u << RECIPE_BITS) - 1));
  return (e >> RECIPE_BITS) == pc && pc != 0;
}

/* Store an entry; returns the word stored (0 if pc cannot be cached).
 * The caller then checks that the snapshot its recipe came from is still
 * the current one and, if not, calls cache_retract: a store that the clear
 * of a newer snapshot may have missed must not survive it. */
static inline uint64_t cache_put(_Atomic uint64_t *cache, uintptr_t pc, uint32_t bits) {
  if (pc == 0 || pc > PC_CACHE_MAX_PC)
    return 0;
  uint64_t e = (uint64_t)pc << RECIPE_BITS | bits;
  atomic_store_explicit(cache_slot(cache, pc), e, memory_order_seq_cst);
  return e;
}

static inline void cache_retract(_Atomic uint64_t *cache, uintptr_t pc, uint64_t stored) {
  atomic_compare_exchange_strong(cache_slot(cache, pc), &stored, 0);
}

static inline void cache_clear(_Atomic uint64_t *cache) {
  for (uint32_t i = 0; i < PC_CACHE_SIZE; i++)
    atomic_store_explicit(&cache[i], 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
}

#endif
