/* A whole module's .eh_frame as rows (eh_frame_compile, see eh_frame.h):
 * every FDE's program run once through the interpreter of eh_frame.c, each
 * range of one frame shape a row. For statistics and tests; the walker
 * itself derives one address's recipe at a time (eh_frame_find).
 */
#define _GNU_SOURCE
#include "eh_frame.h"
#include "eh_frame_cfi.h"

#include "../common/page_alloc.h"

#include <string.h>
#include <sys/mman.h>

/* ---- row builder ---------------------------------------------------------- */

struct row {
  uint32_t start;
  struct frame_recipe recipe;
};

struct row_builder {
  struct row *rows;
  size_t count, capacity; /* capacity in rows; the buffer is mmap'd */
  int failed;
};

static int builder_grow(struct row_builder *b)
{
  size_t cap = b->capacity ? b->capacity * 2 : 4096;
  struct row *rows = igprof_pages_alloc(cap * sizeof *rows);
  if (!rows) {
    b->failed = 1;
    return 0;
  }
  if (b->rows) {
    memcpy(rows, b->rows, b->count * sizeof *rows);
    igprof_pages_free(b->rows, b->capacity * sizeof *rows);
  }
  b->rows = rows;
  b->capacity = cap;
  return 1;
}

/* Append (start, recipe). A row at the same start replaces the previous one
 * (a zero-length range); a row equal to its predecessor is redundant; an FDE
 * overlapping the previous one wins from its start. */
static void builder_add(struct row_builder *b, uint32_t start, struct frame_recipe rc)
{
  while (b->count && b->rows[b->count - 1].start >= start)
    b->count--;
  if (b->count && frame_recipe_same(b->rows[b->count - 1].recipe, rc))
    return;
  if (b->count == b->capacity && !builder_grow(b))
    return;
  b->rows[b->count++] = (struct row){start, rc};
}

/* The interpreter's row callback while compiling. */
static void builder_row(void *ctx, uint32_t start, struct frame_recipe recipe)
{
  builder_add(ctx, start, recipe);
}

/* Compile the FDE at `fde` into rows. */
static enum eh_frame_status compile_fde(const struct module_view *m, uintptr_t fde,
                                        uintptr_t bias, struct row_builder *b)
{
  struct fde f;
  struct cfi_run run;
  enum eh_frame_status st = eh_frame_parse_fde(m, fde, &f);
  if (st != EH_FRAME_OK || !eh_frame_fde_usable(&f, bias))
    return st;
  if ((st = eh_frame_cfi_start(&run, &f, bias)) != EH_FRAME_OK)
    return st;
  /* A dry run first: a malformed program must leave no rows behind, and
   * the rows of an earlier FDE that this one overlaps, which the builder
   * drops as rows are added, could not be put back. */
  struct cfi_run dry = run;
  struct ehdr_reader insns = f.insns;
  if (!eh_frame_run_insns(&dry, &insns, bias))
    return EH_FRAME_BAD_FDE;
  run.row = builder_row;
  run.row_ctx = b;
  if (!eh_frame_run_insns(&run, &f.insns, bias))
    return EH_FRAME_BAD_FDE;
  if (run.loc < f.pc_end)
    eh_frame_advance(&run, bias, f.pc_end);
  struct frame_recipe none = {0, 0, 0, FRAME_NO_INFO, 0};
  builder_add(b, (uint32_t)(f.pc_end - bias), none);
  return EH_FRAME_OK;
}

/* ---- module -------------------------------------------------------------- */

static enum eh_frame_status finish_table(struct row_builder *b, struct eh_frame_table *out)
{
  size_t n = b->count;
  size_t starts_bytes = (n * sizeof(uint32_t) + 7) & ~(size_t)7;
  size_t bytes = starts_bytes + n * sizeof(struct frame_recipe);
  if (n == 0)
    return EH_FRAME_OK;
  uint8_t *map = igprof_pages_alloc(bytes);
  if (!map)
    return EH_FRAME_NO_MEMORY;
  uint32_t *starts = (uint32_t *)map;
  struct frame_recipe *recipes = (struct frame_recipe *)(map + starts_bytes);
  for (size_t i = 0; i < n; i++) {
    starts[i] = b->rows[i].start;
    recipes[i] = b->rows[i].recipe;
    if (recipes[i].kind == FRAME_COMPLEX)
      out->complex_rows++;
  }
  mprotect(map, bytes, PROT_READ); /* immutable from here on */
  out->count = (uint32_t)n;
  out->starts = starts;
  out->recipes = recipes;
  out->map = map;
  out->map_size = bytes;
  return EH_FRAME_OK;
}

enum eh_frame_status eh_frame_compile(const void *hdr, uintptr_t bias,
                                      const struct eh_frame_segment *segs, int nsegs,
                                      struct eh_frame_table *out)
{
  struct module_view m = {segs, nsegs};
  *out = (struct eh_frame_table){0};
  struct ehdr_table t;
  enum eh_frame_status st = eh_frame_parse_hdr(&m, hdr, &t);
  if (st != EH_FRAME_OK)
    return st;
  struct ehdr_reader r = t.entries;
  uintptr_t datarel = (uintptr_t)hdr;
  uint8_t table_enc = t.enc;
  uint64_t count = t.count;
  struct row_builder b = {0};
  uint64_t done = 0;
  for (uint64_t i = 0; i < count && st == EH_FRAME_OK && !b.failed; i++) {
    (void)ehdr_read_encoded(&r, table_enc, datarel); /* initial location */
    uintptr_t fde = ehdr_read_encoded(&r, table_enc, datarel);
    if (r.bad) {
      st = EH_FRAME_OUT_OF_BOUNDS;
      break;
    }
    /* One unreadable FDE leaves its range to libunwind; the rest still count. */
    size_t rows_before = b.count;
    if (compile_fde(&m, fde, bias, &b) == EH_FRAME_OK)
      done++;
    else if (++out->bad_fdes, b.count > rows_before)
      b.count = rows_before;
  }
  if (b.failed)
    st = EH_FRAME_NO_MEMORY;
  if (st == EH_FRAME_OK)
    st = finish_table(&b, out);
  out->fde_count = st == EH_FRAME_OK ? (uint32_t)done : 0;
  if (b.rows)
    igprof_pages_free(b.rows, b.capacity * sizeof *b.rows);
  if (st != EH_FRAME_OK)
    eh_frame_table_release(out);
  return st;
}

void eh_frame_table_release(struct eh_frame_table *table)
{
  if (table->map)
    igprof_pages_free(table->map, table->map_size);
  *table = (struct eh_frame_table){0};
}

