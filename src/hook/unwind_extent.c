/* Function extents from the unwind tables.
 *
 * Stripped libraries (libc.so.6 here has no .symtab) give no symbol for the
 * implementation an IFUNC selects (__strlen_avx2...), but every function has
 * an .eh_frame FDE whose [pc_begin, pc_begin + pc_range) is exactly its body.
 * The PT_GNU_EH_FRAME segment holds a sorted search table over the FDEs, so
 * the lookup is a binary search in memory the loader already mapped.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "hook_internal.h"

enum {
  PE_OMIT = 0xff,
  PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
  PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
  PE_PCREL = 0x10, PE_DATAREL = 0x30,
};

struct cursor {
  const uint8_t *p, *end;
  int bad;
};

static uint64_t read_uleb(struct cursor *c)
{
  uint64_t v = 0;
  unsigned shift = 0;
  while (c->p < c->end) {
    uint8_t b = *c->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
    if (!(b & 0x80))
      return v;
  }
  c->bad = 1;
  return 0;
}

static int64_t read_sleb(struct cursor *c)
{
  int64_t v = 0;
  unsigned shift = 0;
  uint8_t b = 0;
  while (c->p < c->end) {
    b = *c->p++;
    if (shift < 64)
      v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
    shift += 7;
    if (!(b & 0x80)) {
      if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
      return v;
    }
  }
  c->bad = 1;
  return 0;
}

static uint64_t read_fixed(struct cursor *c, size_t n, int sign)
{
  if ((size_t)(c->end - c->p) < n) {
    c->bad = 1;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, c->p, n);
  if (sign && n < 8 && (v >> (n * 8 - 1)) & 1)
    v |= ~(uint64_t)0 << (n * 8);
  c->p += n;
  return v;
}

/* Read a value in DWARF pointer encoding `enc`; `datarel` is the base for
 * datarel values. The pc-relative base is the value's own address. */
static uint64_t read_encoded(struct cursor *c, uint8_t enc, uintptr_t datarel)
{
  uintptr_t here = (uintptr_t)c->p;
  uint64_t v;
  switch (enc & 0x0f) {
  case PE_ABSPTR: v = read_fixed(c, sizeof(void *), 0); break;
  case PE_ULEB128: v = read_uleb(c); break;
  case PE_UDATA2: v = read_fixed(c, 2, 0); break;
  case PE_UDATA4: v = read_fixed(c, 4, 0); break;
  case PE_UDATA8: v = read_fixed(c, 8, 0); break;
  case PE_SLEB128: v = (uint64_t)read_sleb(c); break;
  case PE_SDATA2: v = read_fixed(c, 2, 1); break;
  case PE_SDATA4: v = read_fixed(c, 4, 1); break;
  case PE_SDATA8: v = read_fixed(c, 8, 1); break;
  default: c->bad = 1; return 0;
  }
  switch (enc & 0x70) {
  case 0: break;
  case PE_PCREL: v += here; break;
  case PE_DATAREL: v += datarel; break;
  default: c->bad = 1; break;
  }
  return v;
}

/* The FDE pointer encoding from a CIE's augmentation ('R'). */
static int cie_fde_encoding(const uint8_t *cie, uint8_t *enc)
{
  struct cursor c = {cie, cie + 4 + 0x10000, 0};
  uint32_t len = (uint32_t)read_fixed(&c, 4, 0);
  if (len == 0 || len == 0xffffffffu)
    return -1;
  c.end = cie + 4 + len;
  if (read_fixed(&c, 4, 0) != 0) /* CIE id */
    return -1;
  uint8_t version = (uint8_t)read_fixed(&c, 1, 0);
  const char *aug = (const char *)c.p;
  size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
  c.p += aug_len + 1;
  *enc = PE_ABSPTR;
  if (aug[0] != 'z')
    return aug[0] == 0 ? 0 : -1;
  read_uleb(&c);                       /* code alignment */
  read_sleb(&c);                       /* data alignment */
  if (version == 1)
    read_fixed(&c, 1, 0);              /* return address register */
  else
    read_uleb(&c);
  read_uleb(&c);                       /* augmentation data length */
  for (size_t i = 1; i < aug_len && !c.bad; i++) {
    switch (aug[i]) {
    case 'R': *enc = (uint8_t)read_fixed(&c, 1, 0); return c.bad ? -1 : 0;
    case 'L': read_fixed(&c, 1, 0); break;
    case 'P': { uint8_t penc = (uint8_t)read_fixed(&c, 1, 0); read_encoded(&c, penc & 0x7f, 0); break; }
    case 'S': case 'B': break;
    default: return -1;
    }
  }
  return c.bad ? -1 : 0;
}

/* The search table of one module's PT_GNU_EH_FRAME segment. */
struct fde_table {
  const uint8_t *hdr;
  const int32_t *entries;   /* count pairs (initial location, FDE), datarel sdata4 */
  uint64_t count;
};

static int open_table(const uint8_t *hdr, struct fde_table *t)
{
  if (hdr[0] != 1)
    return -1;
  uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  /* The linker always writes a datarel sdata4 table; other layouts have no
   * fixed-size entries to bisect. */
  if (table_enc != (PE_DATAREL | PE_SDATA4) || count_enc == PE_OMIT)
    return -1;
  struct cursor c = {hdr + 4, hdr + 4 + 32, 0};
  read_encoded(&c, ptr_enc, (uintptr_t)hdr);
  t->count = read_encoded(&c, count_enc, (uintptr_t)hdr);
  if (c.bad || t->count == 0)
    return -1;
  t->hdr = hdr;
  t->entries = (const int32_t *)c.p;
  return 0;
}

static uintptr_t entry_location(const struct fde_table *t, uint64_t i)
{
  return (uintptr_t)t->hdr + (intptr_t)t->entries[2 * i];
}

/* Index of the last entry starting at or below addr (0 if none). */
static uint64_t entry_below(const struct fde_table *t, uintptr_t addr)
{
  uint64_t lo = 0, hi = t->count;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (entry_location(t, mid) <= addr)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* [begin, begin+range) of entry i's FDE. */
static int entry_extent(const struct fde_table *t, uint64_t i, uintptr_t *begin, size_t *range)
{
  const uint8_t *fde = t->hdr + t->entries[2 * i + 1];
  struct cursor f = {fde, fde + 12 + 64, 0};
  uint32_t len = (uint32_t)read_fixed(&f, 4, 0);
  if (len == 0 || len == 0xffffffffu)
    return -1;
  const uint8_t *cie_ptr_field = f.p;
  uint32_t cie_off = (uint32_t)read_fixed(&f, 4, 0);
  uint8_t enc;
  if (cie_fde_encoding(cie_ptr_field - cie_off, &enc) != 0)
    return -1;
  *begin = (uintptr_t)read_encoded(&f, enc, (uintptr_t)t->hdr);
  *range = (size_t)read_encoded(&f, enc & 0x0f, 0);
  return f.bad ? -1 : 0;
}

struct table_query {
  uintptr_t addr;
  struct fde_table table;
  int found;
};

static int find_module_table(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct table_query *q = arg;
  const ElfW(Phdr) *eh = NULL;
  int contains = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && q->addr >= start && q->addr < start + ph->p_memsz)
      contains = 1;
    if (ph->p_type == PT_GNU_EH_FRAME)
      eh = ph;
  }
  if (!contains)
    return 0;
  q->found = eh && open_table((const uint8_t *)(info->dlpi_addr + eh->p_vaddr), &q->table) == 0;
  return 1;
}

/* The unwind search table of the module containing addr. The table lives in
 * the module's mapped image, so it stays valid while the module is loaded. */
static int module_table(uintptr_t addr, struct fde_table *t)
{
  struct table_query q = {addr, {0}, 0};
  dl_iterate_phdr(find_module_table, &q);
  if (!q.found)
    return -1;
  *t = q.table;
  return 0;
}

int hook_unwind_extent(uintptr_t addr, uintptr_t *start, size_t *size)
{
  struct fde_table t;
  uintptr_t begin;
  size_t range;
  if (module_table(addr, &t) != 0 || entry_extent(&t, entry_below(&t, addr), &begin, &range) != 0 ||
      addr < begin || addr >= begin + range)
    return -1;
  *start = begin;
  *size = range;
  return 0;
}

int hook_unwind_each(uintptr_t anchor, uintptr_t lo, uintptr_t hi,
                     int (*fn)(uintptr_t start, size_t size, void *arg), void *arg)
{
  struct fde_table t;
  if (module_table(anchor, &t) != 0)
    return -1;
  for (uint64_t i = entry_below(&t, lo); i < t.count && entry_location(&t, i) < hi; i++) {
    uintptr_t begin;
    size_t range;
    if (entry_extent(&t, i, &begin, &range) == 0 && begin + range > lo) {
      int r = fn(begin, range, arg);
      if (r)
        return r;
    }
  }
  return 0;
}
