/* Compile a loaded module's .eh_frame into frame recipes.
 *
 * Input is the in-memory PT_GNU_EH_FRAME section (.eh_frame_hdr) of a module
 * the dynamic loader has mapped: its sorted search table names every FDE.
 * eh_frame_compile runs each FDE's call-frame program once, and every
 * address range where the frame shape stays the same becomes one row:
 * (start offset from the module's load bias, recipe). eh_frame_find gives
 * the recipe of a single address, by the same rules, from one FDE: that is
 * what the walker uses (its PC cache keeps the results); the compiled table
 * serves statistics and tests.
 *
 * Rows cover the module's code densely: an address between FDEs has a
 * FRAME_NO_INFO row, an address whose shape needs DWARF expressions, a signal
 * frame or registers other than SP/FP has a FRAME_COMPLEX row.
 *
 * Everything here allocates with mmap only (the profiler never calls malloc)
 * and reads only inside the readable segments it is given.
 */
#ifndef IGPROF_EH_FRAME_H
#define IGPROF_EH_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "../arch/frame.h"

enum eh_frame_status {
  EH_FRAME_OK = 0,
  EH_FRAME_NO_TABLE,    /* .eh_frame_hdr has no binary-search table */
  EH_FRAME_BAD_HEADER,  /* unknown version or pointer encoding in .eh_frame_hdr */
  EH_FRAME_OUT_OF_BOUNDS, /* a pointer leads outside the module's readable segments */
  EH_FRAME_BAD_CIE,     /* malformed CIE (version, augmentation, lengths) */
  EH_FRAME_BAD_FDE,     /* malformed FDE or call-frame instruction */
  EH_FRAME_NO_MEMORY,   /* mmap failed */
};

const char *eh_frame_status_str(enum eh_frame_status status);

/* One readable address range of the module, from its PT_LOAD headers. */
struct eh_frame_segment {
  uintptr_t start, end;
};

/* Rows of one module, immutable once compiled: readers in signal handlers
 * may use a table for as long as it is reachable from the module table. */
struct eh_frame_table {
  uint32_t count;
  const uint32_t *starts;  /* ascending offsets from the load bias */
  const struct frame_recipe *recipes; /* the recipe of each row */
  void *map;               /* one mapping holds both arrays */
  size_t map_size;
  uint32_t fde_count;      /* FDEs compiled (for statistics and tests) */
  uint32_t complex_rows;   /* rows the walker must hand to libunwind */
  uint32_t bad_fdes;       /* FDEs skipped as unreadable (their code falls back) */
};

/* Compile the module whose .eh_frame_hdr is at `hdr`, loaded with bias
 * `bias`; every byte read must lie in one of `segs`. On failure *out is
 * empty and the status names the reason. */
enum eh_frame_status eh_frame_compile(const void *hdr, uintptr_t bias,
                                      const struct eh_frame_segment *segs, int nsegs,
                                      struct eh_frame_table *out);

void eh_frame_table_release(struct eh_frame_table *table);

/* The recipe of one address, without compiling the module: what
 * eh_frame_lookup() on the compiled table would give for `pc` (FRAME_NO_INFO
 * where no FDE covers it; an FDE without rows — empty, malformed — leaves
 * its range to the FDE before it, as in the table). Binary-searches the
 * header's table, parses one FDE and its CIE, and runs their call-frame
 * instructions up to `pc` only. Async-signal-safe: no allocation, no lock,
 * no library call, fixed-size state on the stack, and every byte read is
 * checked against `segs`, as in eh_frame_compile. The status says why a
 * FRAME_NO_INFO result is not plain "no FDE" (for tests and statistics);
 * unlike compiling, instructions after `pc` are not read, so a defect there
 * goes unnoticed. */
enum eh_frame_status eh_frame_find(const void *hdr, uintptr_t bias,
                                   const struct eh_frame_segment *segs, int nsegs, uintptr_t pc,
                                   struct frame_recipe *out);

/* Recipe for module offset `off`: the row with the greatest start <= off.
 * Signal-safe: reads only the immutable table. */
static inline struct frame_recipe eh_frame_lookup(const struct eh_frame_table *t, uintptr_t off)
{
  struct frame_recipe none = {0, 0, 0, FRAME_NO_INFO, 0};
  if (t->count == 0 || off < t->starts[0] || off > UINT32_MAX)
    return none;
  uint32_t lo = 0, n = t->count;
  while (n > 1) { /* branch-light lower-bound search */
    uint32_t half = n / 2;
    if (t->starts[lo + half] <= off)
      lo += half;
    n -= half;
  }
  return t->recipes[lo];
}

#endif
