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

/* Does the module of info map addr? Its program header of type `type` (or
 * NULL) into *found. */
static int module_maps(const struct dl_phdr_info *info, uintptr_t addr, ElfW(Word) type,
                       const ElfW(Phdr) **found)
{
  int contains = 0;
  *found = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && addr >= start && addr < start + ph->p_memsz)
      contains = 1;
    if (ph->p_type == type)
      *found = ph;
  }
  return contains;
}

static int find_module_table(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct table_query *q = arg;
  const ElfW(Phdr) *eh;
  if (!module_maps(info, q->addr, PT_GNU_EH_FRAME, &eh))
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

/* ---- modules without a search table: their dynamic symbols ---------------
 *
 * ARM EABI modules describe their unwinding in .ARM.exidx, which has no
 * entries for hand-written functions (glibc's stpcpy, which jumps to
 * strcpy + 2): there the neighbours are the module's exported functions,
 * read from the .dynsym the loader mapped. A Thumb function's symbol value
 * carries the Thumb bit, as the decoder wants its pc. */

struct dynsym_query {
  uintptr_t addr;
  const ElfW(Sym) *sym;
  size_t count;
  uintptr_t bias;
  int found;
};

/* A d_ptr as a run-time address: the loader relocates .dynamic in place on
 * most targets, not on all. */
static uintptr_t dyn_address(const struct dl_phdr_info *info, uintptr_t v)
{
  return v < info->dlpi_addr ? v + info->dlpi_addr : v;
}

/* The number of .dynsym entries: DT_HASH's nchain, or past the last chain
 * of DT_GNU_HASH. */
static size_t dynsym_count(const uint32_t *hash, const uint32_t *gnu)
{
  if (hash)
    return hash[1];
  if (!gnu)
    return 0;
  uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
  const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < nbuckets; i++)
    if (buckets[i] > last)
      last = buckets[i];
  if (last < symoffset)
    return symoffset;
  while (!(chain[last - symoffset] & 1))
    last++;
  return (size_t)last + 1;
}

static int find_module_dynsym(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct dynsym_query *q = arg;
  const ElfW(Phdr) *dyn;
  if (!module_maps(info, q->addr, PT_DYNAMIC, &dyn))
    return 0;
  const uint32_t *hash = NULL, *gnu = NULL;
  for (const ElfW(Dyn) *d = dyn ? (const ElfW(Dyn) *)(info->dlpi_addr + dyn->p_vaddr) : NULL;
       d && d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_SYMTAB)
      q->sym = (const ElfW(Sym) *)dyn_address(info, d->d_un.d_ptr);
    else if (d->d_tag == DT_HASH)
      hash = (const uint32_t *)dyn_address(info, d->d_un.d_ptr);
    else if (d->d_tag == DT_GNU_HASH)
      gnu = (const uint32_t *)dyn_address(info, d->d_un.d_ptr);
  }
  q->count = q->sym ? dynsym_count(hash, gnu) : 0;
  q->bias = info->dlpi_addr;
  q->found = q->count > 0;
  return 1;
}

static int dynsym_each(uintptr_t anchor, uintptr_t lo, uintptr_t hi,
                       int (*fn)(uintptr_t start, size_t size, void *arg), void *arg)
{
  struct dynsym_query q = {.addr = anchor};
  dl_iterate_phdr(find_module_dynsym, &q);
  if (!q.found)
    return -1;
  for (size_t i = 1; i < q.count; i++) {
    const ElfW(Sym) *s = &q.sym[i];
    unsigned type = ELF64_ST_TYPE(s->st_info);
    if (s->st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) || !s->st_size)
      continue;
    uintptr_t start = q.bias + s->st_value;
    if (start < hi && start + s->st_size > lo) {
      int r = fn(start, s->st_size, arg);
      if (r)
        return r;
    }
  }
  return 0;
}

int hook_unwind_each(uintptr_t anchor, uintptr_t lo, uintptr_t hi,
                     int (*fn)(uintptr_t start, size_t size, void *arg), void *arg)
{
  struct ehdr_table t;
  if (module_table(anchor, &t) != 0)
    return dynsym_each(anchor, lo, hi, fn, arg);
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
