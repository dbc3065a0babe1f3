/* Symbol tables of loaded ELF modules, read from their files without
 * allocating.
 *
 * The file is mmap'ed read-only; .symtab and .dynsym are read in place, with
 * GNU symbol versions for .dynsym. Symbol addresses are given as run-time
 * addresses (load bias + st_value). Safe to use from any thread, not from a
 * signal handler (open/mmap). The hook engine uses it to find non-exported
 * functions and symbol sizes; the runtime can use it for address -> name at
 * dump time.
 */
#ifndef IGPROF_HOOK_ELF_SYMBOLS_H
#define IGPROF_HOOK_ELF_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

struct elf_symbols {
  const unsigned char *image;   /* the mapped file */
  size_t image_size;
  uintptr_t bias;               /* run-time address = bias + st_value */
  const void *dynsym, *symtab;  /* ElfW(Sym) arrays, NULL if absent */
  size_t ndynsym, nsymtab;
  const char *dynstr, *strtab;
  size_t dynstr_size, strtab_size;
  int dynstr_ends, strtab_ends;  /* the string table ends with a NUL: every name in it is terminated */
  const uint16_t *versym;       /* one entry per .dynsym symbol, or NULL */
  const unsigned char *verdef;  /* .gnu.version_d, or NULL */
  size_t verdef_size;
  struct {                      /* .plt, .plt.sec, .plt.got (link-time addresses) */
    uintptr_t start, end;
  } plt[3];
};

/* Which tables elf_symbols_each visits. */
#define ELF_SYMBOLS_DYNAMIC 1u
#define ELF_SYMBOLS_STATIC 2u
/* With either: leave version and version_hidden unset (NULL, 0), which
 * saves a search of the version definitions per dynamic symbol. */
#define ELF_SYMBOLS_NO_VERSIONS 4u

struct elf_symbol {
  const char *name;
  const char *version;          /* GNU version name for .dynsym symbols, or NULL */
  int version_hidden;           /* a non-default version (name@VER rather than name@@VER) */
  uintptr_t address;            /* run-time address */
  size_t size;                  /* st_size */
  unsigned char type;           /* STT_FUNC, STT_GNU_IFUNC, STT_OBJECT... */
  unsigned char bind;           /* STB_GLOBAL, STB_WEAK, STB_LOCAL */
  int dynamic;                  /* found in .dynsym (else .symtab) */
};

/* Map `path` and locate its tables. `bias` is the module's load bias
 * (dl_phdr_info.dlpi_addr). Returns 0, or -1 with errno set (ENOEXEC for a
 * file that is not a well-formed ELF object of this machine's class). */
int elf_symbols_open(struct elf_symbols *es, const char *path, uintptr_t bias);
void elf_symbols_close(struct elf_symbols *es);

/* Visit the defined symbols (st_shndx != SHN_UNDEF) of the chosen tables,
 * .symtab first, until fn returns non-zero; returns that value or 0. */
int elf_symbols_each(const struct elf_symbols *es, unsigned tables,
                     int (*fn)(const struct elf_symbol *sym, void *arg), void *arg);

/* The defined function (STT_FUNC or STT_GNU_IFUNC) named `name`, preferring
 * .symtab, then the default version in .dynsym. Returns 0 or -1. */
int elf_symbols_find(const struct elf_symbols *es, const char *name, struct elf_symbol *out);

/* The function symbol containing run-time address `addr` (start <= addr <
 * start + size), or, if none, one starting exactly at `addr`. Returns 0 or -1. */
int elf_symbols_find_address(const struct elf_symbols *es, uintptr_t addr,
                             struct elf_symbol *out);

/* Non-zero if run-time address addr lies in one of the module's PLT
 * sections: a stub that jumps to a definition elsewhere, not a function. */
int elf_symbols_in_plt(const struct elf_symbols *es, uintptr_t addr);

/* The loaded module containing `addr`: its file path (the main program's is
 * read from /proc/self/exe) and load bias. Takes the loader lock
 * (dl_iterate_phdr): not for signal handlers. Returns 0 or -1. */
int elf_module_find(uintptr_t addr, char *path, size_t path_cap, uintptr_t *bias);

#endif
