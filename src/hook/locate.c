/* Finding a function to hook: the dynamic linker first, then the symbol
 * tables of the files of loaded modules (for functions that are not exported,
 * e.g. an allocator linked statically into the executable). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "hook_internal.h"
#include "message.h"

struct scan_query {
  const char *function;
  const char *only_path;    /* restrict to this module's file, or NULL */
  void *address;
};

static int scan_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct scan_query *q = arg;
  char exe[4096];
  const char *path = info->dlpi_name;
  if (!path || !path[0]) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
      return 0;
    exe[n] = 0;
    path = exe;
  }
  if (q->only_path && strcmp(q->only_path, info->dlpi_name ? info->dlpi_name : "") != 0)
    return 0;
  struct elf_symbols es;
  if (elf_symbols_open(&es, path, info->dlpi_addr) != 0)
    return 0;
  struct elf_symbol sym;
  /* An IFUNC found only here would need its resolver run; leave those to dlsym. */
  if (elf_symbols_find(&es, q->function, &sym) == 0 && sym.type == STT_FUNC)
    q->address = (void *)sym.address;
  elf_symbols_close(&es);
  return q->address != NULL;
}

/* A non-PIE executable that takes a function's address exports an undefined
 * symbol whose value is its PLT entry (the "canonical PLT"), and global
 * lookups return that stub. Patching it would catch only the executable's own
 * calls. Non-zero if addr is such an entry. */
static int in_first_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  uintptr_t *addr = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && *addr >= start && *addr < start + ph->p_memsz)
      return 1;
  }
  return -1; /* the first module is the executable: stop after it */
}

static int is_canonical_plt(void *addr)
{
  /* Only the executable has canonical PLT entries (a library's undefined
   * symbols have no value): reading the file of every other module, libc
   * for nearly every hook, would cost an open and a mapping per install. */
  uintptr_t a = (uintptr_t)addr;
  if (dl_iterate_phdr(in_first_module, &a) != 1)
    return 0;
  char path[4096];
  uintptr_t bias;
  struct elf_symbols es;
  if (elf_module_find((uintptr_t)addr, path, sizeof path, &bias) != 0 ||
      elf_symbols_open(&es, path, bias) != 0)
    return 0;
  int plt = elf_symbols_in_plt(&es, (uintptr_t)addr);
  elf_symbols_close(&es);
  return plt;
}

/* The definition a canonical PLT entry stands for: the first loaded library,
 * in search order after the executable, that defines the name. */
static void *definition_after_executable(const char *function, const char *version)
{
  void *main_handle = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
  struct link_map *lm = NULL;
  void *found = NULL;
  if (!main_handle || dlinfo(main_handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
    return NULL;
  for (lm = lm->l_next; lm && !found; lm = lm->l_next) {
    if (!lm->l_name || !lm->l_name[0])
      continue;
    void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
      continue;
    void *addr = version ? dlvsym(h, function, version) : dlsym(h, function);
    if (addr && !is_canonical_plt(addr))
      found = addr;
    dlclose(h);
  }
  dlclose(main_handle);
  return found;
}

/* ---- is a name in any loaded module's dynamic symbol table? ----------------
 *
 * A dlsym that fails allocates its error message and replaces the
 * application's pending dlerror() text. Asking the loaded modules' own hash
 * tables first (in memory, nothing allocated) lets the engine call dlsym only
 * for names that exist. */

static uint32_t gnu_hash(const char *s)
{
  uint32_t h = 5381;
  for (; *s; s++)
    h = h * 33 + (unsigned char)*s;
  return h;
}

static uint32_t sysv_hash(const char *s)
{
  uint32_t h = 0;
  for (; *s; s++) {
    h = (h << 4) + (unsigned char)*s;
    uint32_t g = h & 0xf0000000u;
    h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

static int symbol_matches(const ElfW(Sym) *sym, const char *strtab, const char *name)
{
  /* an undefined symbol with a value is a canonical PLT entry: dlsym finds it */
  return (sym->st_shndx != SHN_UNDEF || sym->st_value != 0) &&
         strcmp(strtab + sym->st_name, name) == 0;
}

struct exists_query {
  const char *name;
  const char *only_path;  /* only the module loaded from this path, or NULL */
  int found;
  uintptr_t address;  /* the first definition found: where, how long, a function? */
  size_t size;
  int function;
};

static int found_symbol(struct exists_query *q, const ElfW(Sym) *sym, uintptr_t bias)
{
  q->address = bias + sym->st_value;
  q->size = sym->st_size;
  q->function = ELF64_ST_TYPE(sym->st_info) == STT_FUNC;
  return q->found = 1;
}

static int module_defines(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  struct exists_query *q = arg;
  if (q->only_path && strcmp(q->only_path, info->dlpi_name ? info->dlpi_name : "") != 0)
    return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn)
    return 0;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnu = NULL, *sysv = NULL;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    /* the loader relocates these in place, except in the vDSO */
    uintptr_t p = dyn->d_un.d_ptr;
    if (p < info->dlpi_addr)
      p += info->dlpi_addr;
    switch (dyn->d_tag) {
    case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
    case DT_STRTAB: strtab = (const char *)p; break;
    case DT_GNU_HASH: gnu = (const uint32_t *)p; break;
    case DT_HASH: sysv = (const uint32_t *)p; break;
    }
  }
  if (!symtab || !strtab)
    return 0;
  if (gnu) {
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = gnu_hash(q->name);
    uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;
    if (i < symoffset)
      return 0;
    for (;; i++) {
      uint32_t ch = chain[i - symoffset];
      if ((ch | 1) == (h | 1) && symbol_matches(&symtab[i], strtab, q->name))
        return found_symbol(q, &symtab[i], info->dlpi_addr);
      if (ch & 1)
        return 0;
    }
  }
  if (sysv) {
    uint32_t nbucket = sysv[0];
    const uint32_t *bucket = sysv + 2, *chain = bucket + nbucket;
    for (uint32_t i = nbucket ? bucket[sysv_hash(q->name) % nbucket] : 0; i; i = chain[i])
      if (symbol_matches(&symtab[i], strtab, q->name))
        return found_symbol(q, &symtab[i], info->dlpi_addr);
  }
  return 0;
}

static int dynamically_defined(const char *name, const char *only_path, struct exists_query *q)
{
  *q = (struct exists_query){name, only_path, 0, 0, 0, 0};
  dl_iterate_phdr(module_defines, q);
  return q->found;
}

void *hook_lookup_exported(const char *function, const char *module, size_t *size)
{
  struct exists_query q;
  if (!function || !dynamically_defined(function, module, &q) || !q.function)
    return NULL;
  if (size)
    *size = q.size;
  return (void *)q.address;
}

enum hook_status hook_locate(const char *function, const char *version, const char *library,
                             void **address, size_t *size, char *detail, size_t detail_cap)
{
  struct message m = message_start(detail, detail_cap);
  void *handle = RTLD_DEFAULT;
  const char *only_path = NULL;
  *address = NULL;
  *size = 0;
  if (library) {
    handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
      handle = dlopen(library, RTLD_LAZY);
    if (!handle) {
      message_str(message_str(message_str(&m, "library "), library), " cannot be loaded");
      return HOOK_ERR_LIBRARY_NOT_FOUND;
    }
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm)
      only_path = lm->l_name;
  }
  void *addr = NULL;
  struct exists_query defined;
  if (dynamically_defined(function, NULL, &defined))
    addr = version ? dlvsym(handle, function, version) : dlsym(handle, function);
  if (addr && !library && is_canonical_plt(addr))
    addr = definition_after_executable(function, version);
  if (!addr && !version) {
    struct scan_query q = {function, only_path, NULL};
    dl_iterate_phdr(scan_module, &q);
    addr = q.address;
  }
  if (!addr) {
    message_str(&m, function);
    if (version)
      message_str(message_char(&m, '@'), version);
    message_str(&m, library ? " is not defined in " : " is not defined in any loaded module");
    if (library)
      message_str(&m, library);
    return HOOK_ERR_SYMBOL_NOT_FOUND;
  }
  *address = addr;
  /* The dynamic symbol the hash lookup already found, when it is the one the
   * loader chose, gives the size without dladdr (a walk over the whole
   * .dynsym of the module). */
  if (defined.found && defined.function && defined.size && defined.address == (uintptr_t)addr)
    *size = defined.size;
  else
    *size = hook_function_size((uintptr_t)addr);
  return HOOK_OK;
}

size_t hook_function_size(uintptr_t addr)
{
  /* dladdr1 answers from .dynsym without opening the file. An IFUNC's
   * selected implementation has no dynamic symbol of its own: then the
   * nearest one does not start at addr and we look further. */
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  if (dladdr1((void *)addr, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
      (uintptr_t)info.dli_saddr == addr && ELF64_ST_TYPE(sym->st_info) == STT_FUNC &&
      sym->st_size)
    return sym->st_size;

  char path[4096];
  uintptr_t bias;
  if (elf_module_find(addr, path, sizeof path, &bias) == 0) {
    struct elf_symbols es;
    if (elf_symbols_open(&es, path, bias) == 0) {
      struct elf_symbol found;
      size_t size = 0;
      if (elf_symbols_find_address(&es, addr, &found) == 0 && found.address == addr &&
          found.type == STT_FUNC)
        size = found.size;
      elf_symbols_close(&es);
      if (size)
        return size;
    }
  }
  uintptr_t start;
  size_t extent;
  if (hook_unwind_extent(addr, &start, &extent) == 0 && start == addr)
    return extent;
  return 0;
}
