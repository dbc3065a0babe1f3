/* Dump-time symbolisation (symbols.h). */
#define _GNU_SOURCE
#include "symbols.h"

#include <elf.h>
#include <link.h>
#include <string.h>

#include "elf_symbols.h"

struct sym {
  uintptr_t start;
  size_t size;
  const char *name;
};

struct module {
  uintptr_t lo, hi; /* lowest and highest address of its PT_LOAD segments */
  uintptr_t bias, base;
  const char *path;
  int state; /* 0 not loaded, 1 loaded, -1 unreadable */
  struct elf_symbols elf;
  struct sym *syms;
  size_t nsyms;
};

struct symbols {
  struct igprof_scratch *scratch;
  struct module *modules;
  int count, cap;
};

static char *scratch_strdup(struct igprof_scratch *s, const char *str)
{
  size_t n = strlen(str);
  char *p = igprof_scratch_alloc(s, n + 1);
  if (p) memcpy(p, str, n + 1);
  return p;
}

/* The address range [*lo, *hi) a loaded module's PT_LOAD segments cover
 * (*lo >= *hi when it has none). */
void igprof_module_span(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
  *lo = UINTPTR_MAX;
  *hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < *lo) *lo = a;
    if (a + ph->p_memsz > *hi) *hi = a + ph->p_memsz;
  }
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  struct symbols *s = arg;
  if (s->count == s->cap) {
    int cap = s->cap ? s->cap * 2 : 64;
    struct module *m = igprof_scratch_alloc(s->scratch, sizeof *m * (size_t) cap);
    if (!m) return 1;
    if (s->count) memcpy(m, s->modules, sizeof *m * (size_t) s->count);
    s->modules = m;
    s->cap = cap;
  }
  uintptr_t lo, hi;
  igprof_module_span(info, &lo, &hi);
  if (lo >= hi) return 0;
  struct module *m = &s->modules[s->count];
  memset(m, 0, sizeof *m);
  m->lo = lo;
  m->hi = hi;
  m->bias = info->dlpi_addr;
  m->base = lo & ~(uintptr_t) 4095;
  const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name
                     : s->count == 0 ? igprof_state.exe : "";
  m->path = scratch_strdup(s->scratch, name);
  if (!m->path) return 1;
  s->count++;
  return 0;
}

struct symbols *symbols_snapshot(struct igprof_scratch *scratch)
{
  struct symbols *s = igprof_scratch_alloc(scratch, sizeof *s);
  if (!s) return NULL;
  s->scratch = scratch;
  dl_iterate_phdr(add_module, s);
  return s;
}

struct collect {
  struct symbols *s;
  struct module *m;
  size_t cap;
};

static int collect_symbol(const struct elf_symbol *sym, void *arg)
{
  struct collect *c = arg;
  if (sym->type != STT_FUNC && sym->type != STT_GNU_IFUNC) return 0;
  if (!sym->name || !sym->name[0] || !sym->address) return 0;
  uintptr_t start = sym->address;
#if defined(__arm__)
  /* A Thumb function's symbol value has bit 0 set; its code starts at the
   * even address below. Kept, it made the function's first instruction
   * (frame 0 of a sample there, frequent under qemu-user, which delivers
   * signals at the start of translated blocks) the last byte of the
   * function before it. */
  start &= ~(uintptr_t) 1;
#endif
  if (c->m->nsyms < c->cap)
    c->m->syms[c->m->nsyms++] = (struct sym){start, sym->size, sym->name};
  return 0;
}

/* Sort by start address, ties by size, so that among symbols at one address
 * the sized one comes last and the lookup (which scans back from the last
 * candidate) prefers it. A compiler's symbol table has tens of thousands of
 * entries and every profiled process that ran it sorts them at its dump:
 * a radix sort on the start address (stable, 11 bits a pass, only as many
 * passes as the module's address span needs) with `tmp` as the second
 * buffer, then insertion sort of each run of equal starts by size. */
#define RADIX_BITS 11
#define RADIX (1u << RADIX_BITS)

static void sort_syms(struct sym *v, size_t n, struct sym *tmp, uint32_t *count)
{
  if (n < 2) return;
  uintptr_t lo = v[0].start, hi = v[0].start;
  for (size_t i = 1; i < n; ++i) {
    if (v[i].start < lo) lo = v[i].start;
    if (v[i].start > hi) hi = v[i].start;
  }
  struct sym *src = v, *dst = tmp;
  for (unsigned shift = 0; shift < 64 && ((hi - lo) >> shift) != 0; shift += RADIX_BITS) {
    memset(count, 0, sizeof *count * RADIX);
    for (size_t i = 0; i < n; ++i) count[((src[i].start - lo) >> shift) & (RADIX - 1)]++;
    uint32_t sum = 0;
    for (unsigned d = 0; d < RADIX; ++d) {
      uint32_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; ++i) dst[count[((src[i].start - lo) >> shift) & (RADIX - 1)]++] = src[i];
    struct sym *t = src;
    src = dst;
    dst = t;
  }
  if (src != v) memcpy(v, src, sizeof *v * n);
  for (size_t i = 1; i < n; ++i) {
    if (v[i].start != v[i - 1].start || v[i].size >= v[i - 1].size) continue;
    struct sym x = v[i];
    size_t j = i;
    for (; j > 0 && v[j - 1].start == x.start && v[j - 1].size > x.size; --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

static void load_module(struct symbols *s, struct module *m)
{
  m->state = -1;
  if (!m->path[0] || elf_symbols_open(&m->elf, m->path, m->bias) != 0) return;
  /* One pass, into room for every entry of both tables (the functions
   * among them are most of a program's symbols). */
  struct collect c = {s, m, m->elf.ndynsym + m->elf.nsymtab};
  m->syms = c.cap ? igprof_scratch_alloc(s->scratch, sizeof *m->syms * c.cap) : NULL;
  if (c.cap && !m->syms) return;
  elf_symbols_each(&m->elf, ELF_SYMBOLS_DYNAMIC | ELF_SYMBOLS_STATIC | ELF_SYMBOLS_NO_VERSIONS,
                   collect_symbol, &c);
  struct sym *tmp = m->nsyms > 1 ? igprof_scratch_alloc(s->scratch, sizeof *tmp * m->nsyms) : NULL;
  uint32_t *count = m->nsyms > 1 ? igprof_scratch_alloc(s->scratch, sizeof *count * RADIX) : NULL;
  if (m->nsyms > 1 && (!tmp || !count)) return;
  sort_syms(m->syms, m->nsyms, tmp, count);
  m->state = 1;
}

int symbols_count(const struct symbols *s) { return s ? s->count : 0; }

void symbols_lookup(struct symbols *s, uintptr_t addr, struct symbol_info *out)
{
  memset(out, 0, sizeof *out);
  out->module = -1;
  out->path = "";
  for (int i = 0; s && i < s->count; ++i) {
    struct module *m = &s->modules[i];
    if (addr < m->lo || addr >= m->hi) continue;
    out->module = i;
    out->path = m->path;
    out->module_base = m->base;
    if (m->state == 0) load_module(s, m);
    if (m->state != 1 || !m->nsyms) return;
    /* Last symbol starting at or below addr, then back over equal starts
     * and nested/zero-sized ones until one covers addr. */
    size_t lo = 0, hi = m->nsyms;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (m->syms[mid].start <= addr) lo = mid + 1;
      else hi = mid;
    }
    for (size_t k = lo; k-- > 0 && lo - k <= 8;) {
      const struct sym *y = &m->syms[k];
      if (addr < y->start + (y->size ? y->size : 1)) {
        out->name = y->name;
        out->symbol_start = y->start;
        return;
      }
    }
    return;
  }
}

void symbols_close(struct symbols *s)
{
  for (int i = 0; s && i < s->count; ++i)
    if (s->modules[i].state == 1 || s->modules[i].elf.image) elf_symbols_close(&s->modules[i].elf);
}

struct span {
  uintptr_t addr, lo, hi;
};

static int find_span(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  struct span *s = arg;
  uintptr_t lo, hi;
  igprof_module_span(info, &lo, &hi);
  if (s->addr < lo || s->addr >= hi) return 0;
  s->lo = lo;
  s->hi = hi;
  return 1;
}

/* Takes the loader lock (dl_iterate_phdr): never in a signal handler. */
void igprof_module_span_at(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
  struct span s = {addr, 0, 0};
  if (addr) dl_iterate_phdr(find_span, &s);
  *lo = s.lo;
  *hi = s.hi;
}
