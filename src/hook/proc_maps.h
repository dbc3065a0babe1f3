/* Reading /proc/self/maps without allocating (internal to the hook engine).
 * Used to find free address space near a target for trampolines and to learn
 * a code page's protection so it can be restored exactly after patching. */
#ifndef IGPROF_HOOK_PROC_MAPS_H
#define IGPROF_HOOK_PROC_MAPS_H

#include <stddef.h>
#include <stdint.h>

struct maps_entry {
  uintptr_t start, end;  /* [start, end) */
  int prot;              /* PROT_READ | PROT_WRITE | PROT_EXEC */
  const char *path;      /* "" for anonymous mappings; valid during the callback only */
};

/* Calls fn for each mapping in address order until it returns non-zero.
 * Returns that value, 0 when all were visited, or -1 if the file cannot be read. */
int proc_maps_for_each(int (*fn)(const struct maps_entry *entry, void *arg), void *arg);

/* Protection of the mapping containing addr, or -1 if it is not mapped. If
 * path_cap is non-zero the mapping's path ("" if anonymous) is copied to path. */
int proc_maps_protection(uintptr_t addr, char *path, size_t path_cap);

/* The same, and the mapping's bounds [*start, *end) when it is mapped. */
int proc_maps_region(uintptr_t addr, uintptr_t *start, uintptr_t *end, char *path, size_t path_cap);

/* Whether proc_maps_protection() may ask the kernel for one mapping
 * (PROCMAP_QUERY, Linux 6.11) instead of reading the whole file; on by
 * default, and it turns itself off where the kernel lacks it. Returns the
 * previous setting (for tests). */
int proc_maps_use_query(int use);

#endif
