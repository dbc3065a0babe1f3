/* Offline symbolisation for -g: ELF symbol tables (with sizes), separate debug
 * files found by .gnu_debuglink or build-id, and with --lines the source line
 * and inline frames from DWARF. All of it through elfutils' libdwfl; no child
 * processes. */
#ifndef IGPROF_ANALYSE_SYMBOLS_H
#define IGPROF_ANALYSE_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#define RESOLVE_MAX_FRAMES 32

struct resolver;

/* One frame found for an address. Strings are owned by the resolver. */
struct resolved_frame {
  const char *name;       /* as reports show it: with lines "function at file.c:42" */
  const char *function;   /* the function alone (demangled if asked) */
  const char *source;     /* with lines: the source file's path from DWARF, or NULL */
  int line;               /* with lines: its line, 0 when unknown */
};

/* with_lines: append " at FILE:LINE" and expand inline frames.
 * demangle: return demangled names. sysroot (or NULL): a directory where
 * each ELF file named in the dump, and the debug files of /usr/lib/debug,
 * are looked for first (a dump made on another machine). */
struct resolver *resolver_new(int with_lines, int demangle, const char *sysroot);
void resolver_free(struct resolver *r);

/* Resolve `offset` (address minus the library's load base, as the dump
 * records it) inside the ELF file `path`. On success returns the number of
 * frames (outermost first; more than one only for inlined code) and fills
 * frames[0..n) with strings valid until the next call. Returns 0 when the
 * file cannot be read or no symbol covers the address. */
size_t resolver_lookup(struct resolver *r, const char *path, uint64_t offset,
                       struct resolved_frame *frames);

/* The GNU build id of the ELF file `path` (read as resolver_lookup reads
 * it: under the sysroot first) as lower-case hex in buf; returns 0 when the
 * file cannot be read or has no build id. */
int resolver_build_id(struct resolver *r, const char *path, char *buf, size_t cap);

/* Demangled form of a C++ name in a new string, or `name` itself when it is
 * not a mangled name (never NULL; result lives as long as the program). */
const char *demangle_name(const char *name);

#endif
