/* Shared between the files of the hook engine; not part of its API. */
#ifndef IGPROF_HOOK_INTERNAL_H
#define IGPROF_HOOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hook.h"

/* Locate a function as hook_lookup() does, but say why it failed:
 * HOOK_OK, HOOK_ERR_LIBRARY_NOT_FOUND or HOOK_ERR_SYMBOL_NOT_FOUND (with a
 * message in detail[detail_cap]). */
enum hook_status hook_locate(const char *function, const char *version, const char *library,
                             void **address, size_t *size, char *detail, size_t detail_cap);

/* The size of the function starting at addr: its ELF symbol (.symtab or
 * .dynsym of its module) if one starts exactly there, else the extent of its
 * unwind-table entry, else 0 (unknown). */
size_t hook_function_size(uintptr_t addr);

/* [start, start+size) of the .eh_frame FDE covering addr, from the module's
 * PT_GNU_EH_FRAME search table. Returns 0 or -1. */
int hook_unwind_extent(uintptr_t addr, uintptr_t *start, size_t *size);

/* Calls fn for every function the unwind table of anchor's module describes
 * that overlaps [lo, hi), in address order, until fn returns non-zero (that
 * value is returned). A module without a search table (ARM EABI: .ARM.exidx)
 * gives its dynamic function symbols instead, in table order. Returns -1 if
 * the module has neither. */
int hook_unwind_each(uintptr_t anchor, uintptr_t lo, uintptr_t hi,
                     int (*fn)(uintptr_t start, size_t size, void *arg), void *arg);

/* Log the bytes at [at, at+len) (`at` as a call uses it: ARM32 with its
 * Thumb bit) before a patch overwrites them
 * (hook_original_code reads the log). */
void hook_patch_log_add(uintptr_t at, size_t len);

#endif
