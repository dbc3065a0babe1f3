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
  int counting;
};

static int collect_symbol(const struct elf_symbol *sym, void *arg)
{
  struct collect *c = arg;
  if (sym->type != STT_FUNC && sym->type != STT_GNU_IFUNC) return 0;
  if (!sym->name || !sym->name[0] || !sym->address) return 0;
  if (c->counting) { c->cap++; return 0; }
  if (c->m->nsyms < c->cap)
    c->m->syms[c->m->nsyms++] = (struct sym){sym->address, sym->size, sym->name};
  return 0;
}

/* Heap sort by start address; ties keep the sized symbol last so the
 * lookup (which scans back from the last candidate) prefers it. */
static int sym_less(const struct sym *a, const struct sym *b)
{
  return a->start < b->start || (a->start == b->start && a->size < b->size);
}

static void sift(struct sym *v, size_t i, size_t n)
{
  for (;;) {
    size_t l = 2 * i + 1, big = i;
    if (l < n && sym_less(&v[big], &v[l])) big = l;
    if (l + 1 < n && sym_less(&v[big], &v[l + 1])) big = l + 1;
    if (big == i) return;
    struct sym t = v[i]; v[i] = v[big]; v[big] = t;
    i = big;
  }
}

static void sort_syms(struct sym *v, size_t n)
{
  if (n < 2) return;
  for (size_t i = n / 2; i-- > 0;) sift(v, i, n);
  for (size_t end = n - 1; end > 0; --end) {
    struct sym t = v[0]; v[0] = v[end]; v[end] = t;
    sift(v, 0, end);
  }
}

static void load_module(struct symbols *s, struct module *m)
{
  m->state = -1;
  if (!m->path[0] || elf_symbols_open(&m->elf, m->path, m->bias) != 0) return;
  struct collect c = {s, m, 0, 1};
  elf_symbols_each(&m->elf, ELF_SYMBOLS_DYNAMIC | ELF_SYMBOLS_STATIC, collect_symbol, &c);
  m->syms = c.cap ? igprof_scratch_alloc(s->scratch, sizeof *m->syms * c.cap) : NULL;
  if (c.cap && !m->syms) return;
  c.counting = 0;
  elf_symbols_each(&m->elf, ELF_SYMBOLS_DYNAMIC | ELF_SYMBOLS_STATIC, collect_symbol, &c);
  sort_syms(m->syms, m->nsyms);
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
