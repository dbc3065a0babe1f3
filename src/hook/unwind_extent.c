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

#include "eh_frame_hdr.h"
#include "hook_internal.h"

/* The FDE pointer encoding from a CIE's augmentation ('R'). */
static int cie_fde_encoding(const uint8_t *cie, uint8_t *enc)
{
  struct ehdr_reader c = {cie, cie + 4 + 0x10000, 0};
  uint32_t len = (uint32_t)ehdr_read_fixed(&c, 4, 0);
  if (len == 0 || len == 0xffffffffu)
    return -1;
  c.end = cie + 4 + len;
  if (ehdr_read_fixed(&c, 4, 0) != 0) /* CIE id */
    return -1;
  uint8_t version = (uint8_t)ehdr_read_fixed(&c, 1, 0);
  const char *aug = (const char *)c.p;
  size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
  c.p += aug_len + 1;
  *enc = PE_absptr;
  if (aug[0] != 'z')
    return aug[0] == 0 ? 0 : -1;
  ehdr_read_uleb(&c);                       /* code alignment */
  ehdr_read_sleb(&c);                       /* data alignment */
  if (version == 1)
    ehdr_read_fixed(&c, 1, 0);              /* return address register */
  else
    ehdr_read_uleb(&c);
  ehdr_read_uleb(&c);                       /* augmentation data length */
  for (size_t i = 1; i < aug_len && !c.bad; i++) {
    switch (aug[i]) {
    case 'R': *enc = (uint8_t)ehdr_read_fixed(&c, 1, 0); return c.bad ? -1 : 0;
    case 'L': ehdr_read_fixed(&c, 1, 0); break;
    case 'P': { uint8_t penc = (uint8_t)ehdr_read_fixed(&c, 1, 0); ehdr_read_encoded(&c, penc & 0x7f, 0); break; }
    case 'S': case 'B': break;
    default: return -1;
    }
  }
  return c.bad ? -1 : 0;
}

/* [begin, begin+range) of the FDE at `fde`; `hdr` is the .eh_frame_hdr
 * start (the base of datarel pointers). */
static int fde_extent(const uint8_t *fde, uintptr_t hdr, uintptr_t *begin, size_t *range)
{
  struct ehdr_reader f = {fde, fde + 12 + 64, 0};
  uint32_t len = (uint32_t)ehdr_read_fixed(&f, 4, 0);
  if (len == 0 || len == 0xffffffffu)
    return -1;
  const uint8_t *cie_ptr_field = f.p;
  uint32_t cie_off = (uint32_t)ehdr_read_fixed(&f, 4, 0);
  uint8_t enc;
  if (cie_fde_encoding(cie_ptr_field - cie_off, &enc) != 0)
    return -1;
  *begin = ehdr_read_encoded(&f, enc, hdr);
  *range = (size_t)ehdr_read_encoded(&f, enc & 0x0f, 0);
  return f.bad ? -1 : 0;
}

/* [begin, begin+range) of entry i's FDE. */
static int entry_extent(const struct ehdr_table *t, uint64_t i, uintptr_t *begin, size_t *range)
{
  uintptr_t location, fde;
  if (ehdr_entry(t, i, &location, &fde) != 0)
    return -1;
  return fde_extent((const uint8_t *)fde, t->hdr, begin, range);
}

struct table_query {
  uintptr_t addr;
  struct ehdr_table table;
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
  if (eh) {
    const uint8_t *hdr = (const uint8_t *)(info->dlpi_addr + eh->p_vaddr);
    q->found = ehdr_open(hdr, hdr + eh->p_memsz, &q->table) == EHDR_OK &&
               ehdr_searchable(&q->table) && q->table.count > 0;
  }
  return 1;
}

/* The unwind search table of the module containing addr. The table lives in
 * the module's mapped image, so it stays valid while the module is loaded. */
static int module_table(uintptr_t addr, struct ehdr_table *t)
{
  struct table_query q = {.addr = addr};
  dl_iterate_phdr(find_module_table, &q);
  if (!q.found)
    return -1;
  *t = q.table;
  return 0;
}

int hook_unwind_extent(uintptr_t addr, uintptr_t *start, size_t *size)
{
  struct ehdr_table t;
  uintptr_t begin;
  size_t range;
  if (module_table(addr, &t) != 0 || entry_extent(&t, ehdr_below(&t, addr), &begin, &range) != 0 ||
      addr < begin || addr >= begin + range)
    return -1;
  *start = begin;
  *size = range;
  return 0;
}

int hook_unwind_each(uintptr_t anchor, uintptr_t lo, uintptr_t hi,
                     int (*fn)(uintptr_t start, size_t size, void *arg), void *arg)
{
  struct ehdr_table t;
  if (module_table(anchor, &t) != 0)
    return -1;
  uintptr_t location, fde;
  for (uint64_t i = ehdr_below(&t, lo);
       i < t.count && ehdr_entry(&t, i, &location, &fde) == 0 && location < hi; i++) {
    uintptr_t begin;
    size_t range;
    if (fde_extent((const uint8_t *)fde, t.hdr, &begin, &range) == 0 && begin + range > lo) {
      int r = fn(begin, range, arg);
      if (r)
        return r;
    }
  }
  return 0;
}
