/* The one reader of .eh_frame_hdr (the PT_GNU_EH_FRAME segment) and of the
 * DWARF pointer encodings its fields and the FDEs use.
 *
 * Two parts of the project look things up in a loaded module's unwind
 * search table: the hook engine (a function's extent from its FDE,
 * unwind_extent.c) and the fast stack walker (the FDE of a PC,
 * src/walk/eh_frame.c). Both read it through this header.
 *
 * Every read is bounded: a cursor carries the end of the memory it may read
 * and sets `bad` instead of reading past it. Nothing here allocates, locks
 * or calls a library function (memcpy aside): async-signal-safe. Values are
 * read in the host's byte order (the module is loaded in this process).
 */
#ifndef IGPROF_EH_FRAME_HDR_H
#define IGPROF_EH_FRAME_HDR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Pointer encodings (LSB "Linux Standard Base Core", DWARF extensions). */
enum {
  PE_absptr = 0x00, PE_uleb128 = 0x01, PE_udata2 = 0x02, PE_udata4 = 0x03, PE_udata8 = 0x04,
  PE_sleb128 = 0x09, PE_sdata2 = 0x0a, PE_sdata4 = 0x0b, PE_sdata8 = 0x0c,
  PE_pcrel = 0x10, PE_datarel = 0x30, PE_indirect = 0x80, PE_omit = 0xff,
};

/* A read position with the end it must stay before. */
struct ehdr_reader {
  const uint8_t *p, *end;
  int bad;
};

static inline int ehdr_has(struct ehdr_reader *r, size_t n)
{
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    return 0;
  }
  return 1;
}

/* An n-byte (n <= 8) unsigned or, with `sign`, sign-extended value. */
static inline uint64_t ehdr_read_fixed(struct ehdr_reader *r, size_t n, int sign)
{
  uint64_t v = 0;
  if (!ehdr_has(r, n))
    return 0;
  memcpy(&v, r->p, n);
  if (sign && n < 8 && (v >> (n * 8 - 1)) & 1)
    v |= ~(uint64_t)0 << (n * 8);
  r->p += n;
  return v;
}

static inline uint64_t ehdr_read_uleb(struct ehdr_reader *r)
{
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    uint8_t b = (uint8_t)ehdr_read_fixed(r, 1, 0);
    if (r->bad)
      return 0;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return v;
  }
}

static inline int64_t ehdr_read_sleb(struct ehdr_reader *r)
{
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = (uint8_t)ehdr_read_fixed(r, 1, 0);
    if (r->bad)
      return 0;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40))
    v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

/* Read a pointer in encoding `enc` (PE_omit: nothing, 0). `datarel` is the
 * base of PE_datarel values (the .eh_frame_hdr start); the PC-relative base
 * is the field's own address. Indirect pointers are returned
 * undereferenced: no user needs their targets. */
static inline uintptr_t ehdr_read_encoded(struct ehdr_reader *r, uint8_t enc, uintptr_t datarel)
{
  uintptr_t field = (uintptr_t)r->p;
  uint64_t v;
  if (enc == PE_omit)
    return 0;
  switch (enc & 0x0f) {
  case PE_absptr: v = ehdr_read_fixed(r, sizeof(void *), 0); break;
  case PE_uleb128: v = ehdr_read_uleb(r); break;
  case PE_udata2: v = ehdr_read_fixed(r, 2, 0); break;
  case PE_udata4: v = ehdr_read_fixed(r, 4, 0); break;
  case PE_udata8: v = ehdr_read_fixed(r, 8, 0); break;
  case PE_sleb128: v = (uint64_t)ehdr_read_sleb(r); break;
  case PE_sdata2: v = ehdr_read_fixed(r, 2, 1); break;
  case PE_sdata4: v = ehdr_read_fixed(r, 4, 1); break;
  case PE_sdata8: v = ehdr_read_fixed(r, 8, 1); break;
  default: r->bad = 1; return 0;
  }
  switch (enc & 0x70) {
  case 0: break;
  case PE_pcrel: v += field; break;
  case PE_datarel: v += datarel; break;
  default: r->bad = 1; return 0; /* textrel/funcrel/aligned: not produced on our targets */
  }
  return (uintptr_t)v;
}

/* The header's binary-search table: `count` pairs (initial location, FDE
 * address) sorted by location, each field in encoding `enc`. */
struct ehdr_table {
  uintptr_t hdr;                /* base of PE_datarel fields */
  struct ehdr_reader entries;   /* positioned at the first pair */
  uint8_t enc;
  uint64_t count;
};

enum ehdr_status {
  EHDR_OK = 0,
  EHDR_TRUNCATED,   /* the header does not fit before `end` */
  EHDR_BAD_VERSION, /* not version 1 */
  EHDR_NO_TABLE,    /* no search table (omitted count or table encoding) */
  EHDR_BAD_COUNT,   /* the entry count cannot be read */
};

/* Parse the header at `hdr`, which may be read up to `end`. */
static inline enum ehdr_status ehdr_open(const void *hdr, const void *end, struct ehdr_table *t)
{
  struct ehdr_reader r = {hdr, end, 0};
  uintptr_t datarel = (uintptr_t)hdr;
  uint8_t version = (uint8_t)ehdr_read_fixed(&r, 1, 0);
  uint8_t frame_enc = (uint8_t)ehdr_read_fixed(&r, 1, 0);
  uint8_t count_enc = (uint8_t)ehdr_read_fixed(&r, 1, 0);
  uint8_t table_enc = (uint8_t)ehdr_read_fixed(&r, 1, 0);
  if (r.bad)
    return EHDR_TRUNCATED;
  if (version != 1)
    return EHDR_BAD_VERSION;
  (void)ehdr_read_encoded(&r, frame_enc, datarel); /* .eh_frame start: FDEs come from the table */
  if (count_enc == PE_omit || table_enc == PE_omit)
    return EHDR_NO_TABLE;
  t->count = ehdr_read_encoded(&r, count_enc, datarel);
  if (r.bad)
    return EHDR_BAD_COUNT;
  t->hdr = datarel;
  t->enc = table_enc;
  t->entries = r;
  return EHDR_OK;
}

/* Size of one field of the search table; 0 for a variable-size encoding,
 * which cannot be binary-searched (no linker writes one). */
static inline size_t ehdr_field_size(uint8_t enc)
{
  switch (enc & 0x0f) {
  case PE_udata2: case PE_sdata2: return 2;
  case PE_udata4: case PE_sdata4: return 4;
  case PE_udata8: case PE_sdata8: return 8;
  case PE_absptr: return sizeof(void *);
  default: return 0;
  }
}

/* Whether the table can be searched: fixed-size fields, and every entry
 * before the reader's end. */
static inline int ehdr_searchable(const struct ehdr_table *t)
{
  size_t field = ehdr_field_size(t->enc);
  return field != 0 && t->count <= (uint64_t)(t->entries.end - t->entries.p) / (2 * field);
}

/* Entry i of a searchable table: its initial location and FDE address.
 * Returns 0, or -1 when the entry cannot be read. */
static inline int ehdr_entry(const struct ehdr_table *t, uint64_t i, uintptr_t *location,
                             uintptr_t *fde)
{
  size_t field = ehdr_field_size(t->enc);
  struct ehdr_reader e = {t->entries.p + i * 2 * field, t->entries.end, 0};
  *location = ehdr_read_encoded(&e, t->enc, t->hdr);
  *fde = ehdr_read_encoded(&e, t->enc, t->hdr);
  return e.bad ? -1 : 0;
}

/* Index of the last entry of a searchable, non-empty table whose initial
 * location is <= addr (0 if none is). */
static inline uint64_t ehdr_below(const struct ehdr_table *t, uintptr_t addr)
{
  size_t field = ehdr_field_size(t->enc);
  uint64_t lo = 0, hi = t->count;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    struct ehdr_reader e = {t->entries.p + mid * 2 * field, t->entries.end, 0};
    if (ehdr_read_encoded(&e, t->enc, t->hdr) <= addr)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

#endif
