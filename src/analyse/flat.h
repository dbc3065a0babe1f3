/* The flat profile: one entry per reported symbol with self and cumulative
 * [value, ticks, paths], and caller->callee edges, built from a call tree the
 * way IgProf's gprof-style report defines them. A symbol met again below
 * itself on one path is reported as name'2, name'3, ... */
#ifndef IGPROF_ANALYSE_FLAT_H
#define IGPROF_ANALYSE_FLAT_H

#include <stdint.h>

#include "profile.h"
#include "util.h"

struct flat_entry {
  uint32_t sym;             /* report symbol */
  uint32_t depth;           /* shallowest depth seen (root = 1) */
  uint32_t rank;            /* 1-based, after flat_rank */
  int64_t self[3], cum[3];  /* value, ticks, paths */
};

struct flat_edge {
  uint32_t caller, callee;  /* entry indices */
  int64_t vals[3];          /* cumulative value, ticks, paths through this edge */
};

struct flat_profile {
  struct flat_entry *entries; size_t count, cap;
  struct flat_edge *edges; size_t nedges, edges_cap;
  struct idmap edge_map;    /* (caller << 32 | callee) -> edge; only while building */
  /* After flat_build the edges are sorted by (caller, callee): entry e's
   * callees are edges[out_off[e] .. out_off[e+1]), its callers the edges
   * in_list[in_off[e] .. in_off[e+1]). */
  uint32_t *out_off, *in_off, *in_list;
  uint32_t *by_sym; size_t by_sym_cap;   /* sym -> entry + 1 */
  uint32_t *order;          /* entries in rank order */
  uint32_t *node_sym;       /* tree node -> report symbol (name'k under recursion) */
  int64_t totals, totfreq;  /* the root's cumulative value and ticks */
  int is_max;
};

/* Requires tree_accumulate(t) first. */
void flat_build(struct flat_profile *fp, const struct call_tree *t, struct symtab *st);
/* Rank by |cumulative| (descending unless ascending), then depth, then name. */
void flat_rank(struct flat_profile *fp, struct symtab *st, int ascending);
void flat_free(struct flat_profile *fp);
/* Entry index for sym or UINT32_MAX. */
uint32_t flat_find(const struct flat_profile *fp, uint32_t sym);
/* Edge caller->callee (entry indices) or NULL. */
const struct flat_edge *flat_edge_find(const struct flat_profile *fp, uint32_t caller, uint32_t callee);

#endif
