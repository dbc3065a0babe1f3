/* Address -> (module, symbol) at dump time, without dladdr and without
 * holding any lock a malloc path could need: one dl_iterate_phdr snapshot of
 * the loaded modules, then each module's ELF symbol table (read from its
 * file by src/hook/elf_symbols.h) sorted once into a binary-search index. */
#ifndef IGPROF_SYMBOLS_H
#define IGPROF_SYMBOLS_H

#include <stdint.h>

#include "internal.h"

struct symbols;

struct symbol_info {
  int module;            /* index into the snapshot, -1 if no module holds the address */
  const char *path;      /* module file ("" if none) */
  uintptr_t module_base; /* the module's mapping start, as dladdr's dli_fbase */
  const char *name;      /* symbol name, NULL if unresolved */
  uintptr_t symbol_start;
};

/* Take the module snapshot; everything is allocated from `scratch`. */
struct symbols *symbols_snapshot(struct igprof_scratch *scratch);
/* Number of modules in the snapshot (0 for NULL). */
int symbols_count(const struct symbols *s);
void symbols_lookup(struct symbols *s, uintptr_t addr, struct symbol_info *out);
/* Unmap the symbol tables opened by lookups. */
void symbols_close(struct symbols *s);

#endif
