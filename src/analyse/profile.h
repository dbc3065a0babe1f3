/* The analyser's model: a symbol table shared by every tree, and call trees
 * whose nodes are keyed by (parent node, symbol).
 *
 * Symbols are identified by their final name (after -g resolution and the
 * -ml/-mr/-ma renames), as IgProf does: every call site inside one function
 * collapses into one symbol. A symbol remembers the file it was first seen in. */
#ifndef IGPROF_ANALYSE_PROFILE_H
#define IGPROF_ANALYSE_PROFILE_H

#include <stdint.h>

#include "util.h"

#define NO_NODE UINT32_MAX

enum symbol_flags {
  SYM_PROFILER = 1,   /* a frame of the profiler itself (file contains "libigprof") */
  SYM_ALLOCATOR = 2,  /* a malloc-family or operator new/delete entry point */
};

struct symtab {
  struct strpool names;   /* symbol id == name id */
  struct strpool files;   /* file id == path id; id 0 is "" */
  uint32_t *file_of;      /* symbol -> file */
  uint8_t *flags;         /* symbol -> enum symbol_flags */
  const char **display;   /* symbol -> demangled name (lazy, NULL = not computed) */
  /* Where a symbol's code is, when -g found it (callgrind, pprof): */
  uint32_t *function_of;  /* symbol -> its function's name in `functions` + 1; 0: the symbol's name */
  uint32_t *source_of;    /* symbol -> its source file's id in `files` (0: unknown; --lines) */
  uint32_t *line_of;      /* symbol -> its source line (0: unknown; --lines) */
  uint64_t *offset_of;    /* symbol -> the first call site's offset in its file (UINT64_MAX: none) */
  struct strpool functions;
  size_t cap;
  int demangle;           /* -d: show demangled names */
  uint32_t spontaneous;   /* the synthetic root symbol */
  struct idmap recursion; /* (sym << 32 | k) -> the symbol name'k */
};

void symtab_init(struct symtab *st, int demangle);
void symtab_free(struct symtab *st);
/* The symbol named name[0..len), created with `file` if new. */
uint32_t symtab_symbol(struct symtab *st, const char *name, size_t len, uint32_t file);
uint32_t symtab_file(struct symtab *st, const char *path, size_t len);
static inline const char *symtab_name(const struct symtab *st, uint32_t sym) { return strpool_get(&st->names, sym); }
static inline const char *symtab_file_name(const struct symtab *st, uint32_t file) { return strpool_get(&st->files, file); }
/* The symbol for the k-th (k >= 2) frame of `sym` on one stack, named
 * name'k. It is its own symbol even if the dump also has a function of that
 * name, and the same for every tree built on this table (-b needs that). */
uint32_t symtab_recursion(struct symtab *st, uint32_t sym, uint32_t k);
/* The name shown in reports: demangled with -d, raw otherwise. */
const char *symtab_display(struct symtab *st, uint32_t sym);
/* Record what -g found for `sym` (the first record wins): its function's
 * bare name and, with --lines, source file and line. */
void symtab_set_source(struct symtab *st, uint32_t sym, const char *function, const char *source, int line);
/* Record the offset in its file where `sym` was first seen. */
static inline void symtab_set_offset(struct symtab *st, uint32_t sym, uint64_t offset)
{
  if (st->offset_of[sym] == UINT64_MAX) st->offset_of[sym] = offset;
}
/* The function of `sym` as callgrind and pprof name it: without " at
 * file:line" (symtab_display otherwise). */
const char *symtab_function(struct symtab *st, uint32_t sym);
/* Library path of a symbol as shown by -l and the databases. */
const char *symtab_file_display(const struct symtab *st, uint32_t sym);

struct tree_node {
  uint32_t parent, first_child, next_sibling;
  uint32_t sym;
  uint32_t depth;          /* root = 0 */
  int64_t cnt, freq;       /* self value and ticks of the report counter */
  int64_t ccnt, cfreq;     /* cumulative, filled by tree_accumulate */
};

struct tree_slot { uint32_t parent, sym, node; };   /* node == NO_NODE: empty */

/* One more counter's self value and ticks per node, vals[2 * node] and
 * vals[2 * node + 1] (0 past cap), when the reader keeps every counter. */
struct tree_column { int64_t *vals; size_t cap; };

struct call_tree {
  struct tree_node *nodes;
  size_t count, cap;
  struct tree_slot *slots; /* open addressing (parent, sym) -> node: one cache miss per lookup */
  size_t nslots;
  int is_max;              /* values combine with max instead of + (*_MAX counters) */
  struct tree_column *columns; size_t ncolumns;   /* read_options.all_counters */
};

void tree_init(struct call_tree *t, uint32_t root_sym, int is_max);
void tree_free(struct call_tree *t);
/* The child of `parent` for `sym`, created if missing. */
uint32_t tree_child(struct call_tree *t, uint32_t parent, uint32_t sym);
/* Drop the lookup table once no more nodes will be added (saves memory for
 * the report phase); tree_child must not be called afterwards. */
void tree_freeze(struct call_tree *t);
/* Add a value/ticks pair to a node's self counts. Returns 0, changing
 * nothing, when a sum would leave the range of counter values (util.h). */
int tree_add(struct call_tree *t, uint32_t node, int64_t value, int64_t ticks);
/* Add to column `c`'s self value and ticks at `node` (summed, whatever the
 * counter). Returns 0, changing nothing, when a sum would leave the range. */
int tree_add_column(struct call_tree *t, uint32_t node, uint32_t c, int64_t value, int64_t ticks);
/* Column c's self value (k = 0) or ticks (k = 1) at node. */
static inline int64_t tree_column(const struct call_tree *t, uint32_t c, uint32_t node, int k)
{
  const struct tree_column *col = c < t->ncolumns ? &t->columns[c] : NULL;
  return col && 2 * (size_t) node < col->cap ? col->vals[2 * (size_t) node + (size_t) k] : 0;
}
/* Fill ccnt/cfreq bottom-up; exits with a message if a sum overflows. */
void tree_accumulate(struct call_tree *t, const struct symtab *st);
/* Subtract every count of `base` (built on the same symtab) from `t`;
 * exits with a message if a difference overflows. */
void tree_subtract(struct call_tree *t, const struct call_tree *base, const struct symtab *st);

#endif
