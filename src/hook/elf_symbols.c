#define _GNU_SOURCE
#include "elf_symbols.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef ElfW(Ehdr) Ehdr;
typedef ElfW(Shdr) Shdr;
typedef ElfW(Sym) Sym;

static int in_image(const struct elf_symbols *es, uint64_t off, uint64_t len)
{
  return off <= es->image_size && len <= es->image_size - off;
}

static const Shdr *section(const struct elf_symbols *es, size_t index)
{
  const Ehdr *eh = (const Ehdr *)es->image;
  if (index == 0 || index >= eh->e_shnum)
    return NULL;
  return (const Shdr *)(es->image + eh->e_shoff + index * sizeof(Shdr));
}

/* A symbol table and its string table, bounds-checked. */
static int load_table(struct elf_symbols *es, const Shdr *sh, const void **syms, size_t *nsyms,
                      const char **str, size_t *str_size, int *str_ends)
{
  const Shdr *strsh = section(es, sh->sh_link);
  if (!strsh || sh->sh_entsize != sizeof(Sym) || !in_image(es, sh->sh_offset, sh->sh_size) ||
      !in_image(es, strsh->sh_offset, strsh->sh_size) || strsh->sh_size == 0)
    return -1;
  *syms = es->image + sh->sh_offset;
  *nsyms = sh->sh_size / sizeof(Sym);
  *str = (const char *)es->image + strsh->sh_offset;
  *str_size = strsh->sh_size;
  *str_ends = (*str)[*str_size - 1] == '\0';
  return 0;
}

static int parse(struct elf_symbols *es)
{
  const Ehdr *eh = (const Ehdr *)es->image;
  if (es->image_size < sizeof(Ehdr) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh->e_shentsize != sizeof(Shdr) ||
      !in_image(es, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Shdr)))
    return -1;
  const Shdr *dynsym = NULL;
  const Shdr *names = section(es, eh->e_shstrndx);
  if (names && !in_image(es, names->sh_offset, names->sh_size))
    names = NULL;
  size_t nplt = 0;
  for (size_t i = 1; i < eh->e_shnum; i++) {
    const Shdr *sh = section(es, i);
    if (names && sh->sh_name < names->sh_size && sh->sh_type == SHT_PROGBITS && nplt < 3) {
      const char *name = (const char *)es->image + names->sh_offset + sh->sh_name;
      size_t left = names->sh_size - sh->sh_name;
      if (!strncmp(name, ".plt", left) || !strncmp(name, ".plt.sec", left) ||
          !strncmp(name, ".plt.got", left)) {
        es->plt[nplt].start = sh->sh_addr;
        es->plt[nplt].end = sh->sh_addr + sh->sh_size;
        nplt++;
      }
    }
    switch (sh->sh_type) {
    case SHT_SYMTAB:
      load_table(es, sh, &es->symtab, &es->nsymtab, &es->strtab, &es->strtab_size, &es->strtab_ends);
      break;
    case SHT_DYNSYM:
      if (load_table(es, sh, &es->dynsym, &es->ndynsym, &es->dynstr, &es->dynstr_size,
                     &es->dynstr_ends) == 0)
        dynsym = sh;
      break;
    case SHT_GNU_versym:
      if (in_image(es, sh->sh_offset, sh->sh_size))
        es->versym = (const uint16_t *)(es->image + sh->sh_offset);
      break;
    case SHT_GNU_verdef:
      if (in_image(es, sh->sh_offset, sh->sh_size)) {
        es->verdef = es->image + sh->sh_offset;
        es->verdef_size = sh->sh_size;
      }
      break;
    }
  }
  if (!dynsym)
    es->versym = NULL;
  return 0;
}

int elf_symbols_open(struct elf_symbols *es, const char *path, uintptr_t bias)
{
  memset(es, 0, sizeof *es);
  int fd;
  do
    fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Ehdr)) {
    close(fd);
    errno = ENOEXEC;
    return -1;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int saved = errno;
  close(fd);
  if (p == MAP_FAILED) {
    errno = saved;
    return -1;
  }
  es->image = p;
  es->image_size = (size_t)st.st_size;
  es->bias = bias;
  if (parse(es) != 0) {
    elf_symbols_close(es);
    errno = ENOEXEC;
    return -1;
  }
  return 0;
}

void elf_symbols_close(struct elf_symbols *es)
{
  if (es->image)
    munmap((void *)es->image, es->image_size);
  memset(es, 0, sizeof *es);
}

/* The name of GNU version index `ndx` from .gnu.version_d, or NULL. */
static const char *version_name(const struct elf_symbols *es, unsigned ndx)
{
  size_t off = 0;
  while (es->verdef && off + sizeof(ElfW(Verdef)) <= es->verdef_size) {
    const ElfW(Verdef) *vd = (const ElfW(Verdef) *)(es->verdef + off);
    if (vd->vd_ndx == ndx && !(vd->vd_flags & VER_FLG_BASE)) {
      size_t aux = off + vd->vd_aux;
      if (aux + sizeof(ElfW(Verdaux)) > es->verdef_size)
        return NULL;
      const ElfW(Verdaux) *va = (const ElfW(Verdaux) *)(es->verdef + aux);
      return va->vda_name < es->dynstr_size ? es->dynstr + va->vda_name : NULL;
    }
    if (vd->vd_next == 0)
      break;
    off += vd->vd_next;
  }
  return NULL;
}

static int fill(const struct elf_symbols *es, int dynamic, size_t index, int versions,
                struct elf_symbol *out)
{
  const Sym *s = (const Sym *)(dynamic ? es->dynsym : es->symtab) + index;
  const char *str = dynamic ? es->dynstr : es->strtab;
  size_t str_size = dynamic ? es->dynstr_size : es->strtab_size;
  if (s->st_shndx == SHN_UNDEF || s->st_name >= str_size || ELF64_ST_TYPE(s->st_info) == STT_TLS)
    return -1;
  /* names must be terminated inside the string table */
  if (!(dynamic ? es->dynstr_ends : es->strtab_ends) && !memchr(str + s->st_name, 0, str_size - s->st_name))
    return -1;
  out->name = str + s->st_name;
  out->address = s->st_shndx == SHN_ABS ? s->st_value : es->bias + s->st_value;
  out->size = s->st_size;
  out->type = ELF64_ST_TYPE(s->st_info);
  out->bind = ELF64_ST_BIND(s->st_info);
  out->dynamic = dynamic;
  out->version = NULL;
  out->version_hidden = 0;
  if (dynamic && es->versym && versions) {
    uint16_t v = es->versym[index];
    out->version = version_name(es, v & 0x7fff);
    out->version_hidden = (v & 0x8000) != 0;
  }
  return 0;
}

/* Map the pages of [p, p + len) of the image in one call (the kernel fills
 * the page table from the page cache) rather than one fault per page: a
 * compiler's symbol and string tables span hundreds of pages. Only a
 * hint: older kernels refuse it, and the reads then fault as usual. */
static void populate(const void *p, size_t len)
{
#ifdef MADV_POPULATE_READ
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = (uintptr_t)p & ~(page - 1), hi = (uintptr_t)p + len;
  if (len)
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
#else
  (void)p, (void)len;
#endif
}

int elf_symbols_each(const struct elf_symbols *es, unsigned tables,
                     int (*fn)(const struct elf_symbol *sym, void *arg), void *arg)
{
  for (int dynamic = 0; dynamic <= 1; dynamic++) {
    if (!(tables & (dynamic ? ELF_SYMBOLS_DYNAMIC : ELF_SYMBOLS_STATIC)))
      continue;
    size_t n = dynamic ? es->ndynsym : es->nsymtab;
    if (n > 1) {
      populate(dynamic ? es->dynsym : es->symtab, n * sizeof(Sym));
      populate(dynamic ? es->dynstr : es->strtab, dynamic ? es->dynstr_size : es->strtab_size);
    }
    for (size_t i = 1; i < n; i++) {
      struct elf_symbol sym;
      int r;
      if (fill(es, dynamic, i, !(tables & ELF_SYMBOLS_NO_VERSIONS), &sym) == 0 &&
          (r = fn(&sym, arg)) != 0)
        return r;
    }
  }
  return 0;
}

static int is_function(const struct elf_symbol *s)
{
  return s->type == STT_FUNC || s->type == STT_GNU_IFUNC;
}

int elf_symbols_in_plt(const struct elf_symbols *es, uintptr_t addr)
{
  uintptr_t link_addr = addr - es->bias;
  for (size_t i = 0; i < 3; i++)
    if (link_addr >= es->plt[i].start && link_addr < es->plt[i].end)
      return 1;
  return 0;
}

struct name_query {
  const char *name;
  struct elf_symbol *out;
};

static int match_name(const struct elf_symbol *s, void *arg)
{
  struct name_query *q = arg;
  if (!is_function(s) || s->version_hidden || strcmp(s->name, q->name) != 0)
    return 0;
  *q->out = *s;
  return 1;
}

int elf_symbols_find(const struct elf_symbols *es, const char *name, struct elf_symbol *out)
{
  struct name_query q = {name, out};
  return elf_symbols_each(es, ELF_SYMBOLS_STATIC | ELF_SYMBOLS_DYNAMIC, match_name, &q) ? 0 : -1;
}

struct address_query {
  uintptr_t addr;
  int found;             /* 2 = containing, 1 = starts at addr with size 0 */
  struct elf_symbol *out;
};

static int match_address(const struct elf_symbol *s, void *arg)
{
  struct address_query *q = arg;
  if (!is_function(s) || s->address > q->addr)
    return 0;
  if (q->addr < s->address + s->size) {
    *q->out = *s;
    q->found = 2;
    return 1;
  }
  if (s->address == q->addr && !q->found) {
    *q->out = *s;
    q->found = 1;
  }
  return 0;
}

int elf_symbols_find_address(const struct elf_symbols *es, uintptr_t addr,
                             struct elf_symbol *out)
{
  struct address_query q = {addr, 0, out};
  elf_symbols_each(es, ELF_SYMBOLS_STATIC | ELF_SYMBOLS_DYNAMIC, match_address, &q);
  return q.found ? 0 : -1;
}

struct module_query {
  uintptr_t addr;
  char *path;
  size_t cap;
  uintptr_t bias;
  int found;
};

static void copy_path(char *dst, size_t cap, const char *src)
{
  size_t n = strlen(src);
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

static int visit_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct module_query *q = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type != PT_LOAD || q->addr < start || q->addr >= start + ph->p_memsz)
      continue;
    q->bias = info->dlpi_addr;
    if (info->dlpi_name && info->dlpi_name[0]) {
      copy_path(q->path, q->cap, info->dlpi_name);
    } else {
      ssize_t n = readlink("/proc/self/exe", q->path, q->cap - 1);
      if (n < 0)
        return 1;
      q->path[n] = 0;
    }
    q->found = 1;
    return 1;
  }
  return 0;
}

int elf_module_find(uintptr_t addr, char *path, size_t path_cap, uintptr_t *bias)
{
  struct module_query q = {addr, path, path_cap, 0, 0};
  if (path_cap < 2)
    return -1;
  dl_iterate_phdr(visit_module, &q);
  if (!q.found)
    return -1;
  *bias = q.bias;
  return 0;
}
