#include "flat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct walk_item {
  uint32_t node;
  uint32_t entry;           /* UINT32_MAX on the way down */
  uint32_t saved_k;         /* on the way up: the raw symbol's depth count to restore */
};

struct flat_builder {
  struct flat_profile *fp;
  struct symtab *st;
  /* raw symbol -> how many frames of it the current path holds; the next
   * one is reported as name'(k+1). One lookup per node, whatever the depth. */
  uint32_t *on_path; size_t on_path_cap;
};

static uint32_t entry_for(struct flat_builder *b, uint32_t sym, uint32_t depth)
{
  struct flat_profile *fp = b->fp;
  GROW(fp->by_sym, fp->by_sym_cap, (size_t) sym + 1);
  uint32_t e = fp->by_sym[sym];
  if (!e) {
    GROW(fp->entries, fp->cap, fp->count + 1);
    struct flat_entry *en = &fp->entries[fp->count];
    memset(en, 0, sizeof(*en));
    en->sym = sym;
    en->depth = depth;
    fp->by_sym[sym] = e = (uint32_t) ++fp->count;
  }
  if (fp->entries[e - 1].depth > depth) fp->entries[e - 1].depth = depth;
  return e - 1;
}

/* Add one node's (value, ticks) to v[0..2]. The overflow message names the
 * sum: `what` is "self", "cumulative" or "through-call". */
static void accumulate(const struct flat_builder *b, int64_t *v, int64_t value, int64_t ticks, uint32_t sym, const char *what)
{
  const char *failed = NULL;
  if (b->fp->is_max) { if (v[0] < value) v[0] = value; }
  else if (!value_add(v[0], value, &v[0])) failed = "value";
  if (!failed && !value_add(v[1], ticks, &v[1])) failed = "call count";
  if (failed) {
    char msg[512];
    if (strcmp(what, "through-call") == 0)
      snprintf(msg, sizeof(msg), "the %s of the calls to '%.300s'", failed, symtab_name(b->st, sym));
    else
      snprintf(msg, sizeof(msg), "the %s %s of '%.300s'", what, failed, symtab_name(b->st, sym));
    fatal_overflow(msg);
  }
  v[2]++;
}

static struct flat_edge *edge_for(struct flat_profile *fp, uint32_t caller, uint32_t callee)
{
  uint64_t key = ((uint64_t) caller << 32) | callee;
  uint32_t id;
  if (idmap_get(&fp->edge_map, key, &id)) return &fp->edges[id];
  GROW(fp->edges, fp->edges_cap, fp->nedges + 1);
  id = (uint32_t) fp->nedges++;
  struct flat_edge *e = &fp->edges[id];
  memset(e, 0, sizeof(*e));
  e->caller = caller;
  e->callee = callee;
  idmap_put(&fp->edge_map, key, id);
  return e;
}

static int compare_edge_callee(const void *a, const void *b)
{
  uint32_t x = ((const struct flat_edge *) a)->callee, y = ((const struct flat_edge *) b)->callee;
  return x < y ? -1 : x > y;
}

/* Counting sort of the edges by caller (then callee within a caller), and
 * an index by callee: the reports walk both lists of every entry, and
 * contiguous ranges are far cheaper than hash lookups or linked lists. */
static void index_edges(struct flat_profile *fp)
{
  size_t n = fp->count, m = fp->nedges;
  idmap_free(&fp->edge_map);
  uint32_t *out_off = xcalloc(n + 1, sizeof(*out_off)), *in_off = xcalloc(n + 1, sizeof(*in_off));
  for (size_t i = 0; i < m; ++i) { out_off[fp->edges[i].caller + 1]++; in_off[fp->edges[i].callee + 1]++; }
  for (size_t e = 0; e < n; ++e) { out_off[e + 1] += out_off[e]; in_off[e + 1] += in_off[e]; }
  struct flat_edge *sorted = xmalloc((m ? m : 1) * sizeof(*sorted));
  uint32_t *fill = xmalloc((n + 1) * sizeof(*fill));
  memcpy(fill, out_off, (n + 1) * sizeof(*fill));
  for (size_t i = 0; i < m; ++i) sorted[fill[fp->edges[i].caller]++] = fp->edges[i];
  for (size_t e = 0; e < n; ++e)
    if (out_off[e + 1] - out_off[e] > 1)
      qsort(sorted + out_off[e], out_off[e + 1] - out_off[e], sizeof(*sorted), compare_edge_callee);
  uint32_t *in_list = xmalloc((m ? m : 1) * sizeof(*in_list));
  memcpy(fill, in_off, (n + 1) * sizeof(*fill));
  for (size_t i = 0; i < m; ++i) in_list[fill[sorted[i].callee]++] = (uint32_t) i;
  free(fill);
  free(fp->edges);
  fp->edges = sorted;
  fp->edges_cap = m;
  fp->out_off = out_off;
  fp->in_off = in_off;
  fp->in_list = in_list;
}

void flat_build(struct flat_profile *fp, const struct call_tree *t, struct symtab *st)
{
  struct flat_builder b = { .fp = fp, .st = st };
  struct walk_item *stack = NULL;
  size_t depth = 0, cap = 0;
  memset(fp, 0, sizeof(*fp));
  fp->is_max = t->is_max;
  fp->node_sym = xmalloc(t->count * sizeof(*fp->node_sym));
  idmap_init(&fp->edge_map);
  GROW(b.on_path, b.on_path_cap, st->names.count);

  GROW(stack, cap, 1);
  stack[depth++] = (struct walk_item) { 0, UINT32_MAX, 0 };
  uint32_t *entry_stack = NULL;   /* entry of each node on the current path */
  size_t entry_cap = 0;
  while (depth) {
    struct walk_item it = stack[--depth];
    const struct tree_node *n = &t->nodes[it.node];
    if (it.entry != UINT32_MAX) {          /* leaving the node */
      b.on_path[n->sym] = it.saved_k;
      continue;
    }
    /* A function met again below itself is reported as name'k, k the
     * number of its frames on the path down to here. */
    uint32_t k = b.on_path[n->sym] + 1;
    uint32_t rsym = k == 1 ? n->sym : symtab_recursion(st, n->sym, k);
    fp->node_sym[it.node] = rsym;
    uint32_t e = entry_for(&b, rsym, n->depth + 1);
    GROW(entry_stack, entry_cap, (size_t) n->depth + 1);
    entry_stack[n->depth] = e;
    if (n->parent != NO_NODE) {
      struct flat_edge *edge = edge_for(fp, entry_stack[n->depth - 1], e);
      accumulate(&b, edge->vals, n->ccnt, n->cfreq, rsym, "through-call");
    }
    accumulate(&b, fp->entries[e].self, n->cnt, n->freq, rsym, "self");
    accumulate(&b, fp->entries[e].cum, n->ccnt, n->cfreq, rsym, "cumulative");
    GROW(stack, cap, depth + 1);
    stack[depth++] = (struct walk_item) { it.node, e, k - 1 };
    b.on_path[n->sym] = k;
    for (uint32_t c = n->first_child; c != NO_NODE; c = t->nodes[c].next_sibling) {
      GROW(stack, cap, depth + 1);
      stack[depth++] = (struct walk_item) { c, UINT32_MAX, 0 };
    }
  }
  index_edges(fp);
  fp->totals = fp->entries[0].cum[0];
  fp->totfreq = fp->entries[0].cum[1];
  free(stack);
  free(entry_stack);
  free(b.on_path);
}

/* qsort has no context argument; ranking runs once, single-threaded. */
static const struct flat_profile *sort_profile;
static struct symtab *sort_symtab;
static int sort_ascending;

static int compare_rank(const void *pa, const void *pb)
{
  const struct flat_entry *a = &sort_profile->entries[*(const uint32_t *) pa];
  const struct flat_entry *b = &sort_profile->entries[*(const uint32_t *) pb];
  int64_t va = llabs(a->cum[0]), vb = llabs(b->cum[0]);
  if (va != vb) return (va > vb) == !sort_ascending ? -1 : 1;
  if (a->depth != b->depth) return a->depth < b->depth ? -1 : 1;
  return strcmp(symtab_name(sort_symtab, a->sym), symtab_name(sort_symtab, b->sym));
}

void flat_rank(struct flat_profile *fp, struct symtab *st, int ascending)
{
  fp->order = xmalloc((fp->count ? fp->count : 1) * sizeof(*fp->order));
  for (size_t i = 0; i < fp->count; ++i) fp->order[i] = (uint32_t) i;
  sort_profile = fp;
  sort_symtab = st;
  sort_ascending = ascending;
  if (fp->count > 1) qsort(fp->order, fp->count, sizeof(*fp->order), compare_rank);
  for (size_t i = 0; i < fp->count; ++i) fp->entries[fp->order[i]].rank = (uint32_t) i + 1;
}

void flat_free(struct flat_profile *fp)
{
  free(fp->entries); free(fp->edges); free(fp->by_sym); free(fp->order); free(fp->node_sym);
  free(fp->out_off); free(fp->in_off); free(fp->in_list);
  memset(fp, 0, sizeof(*fp));
}

uint32_t flat_find(const struct flat_profile *fp, uint32_t sym)
{
  if (sym >= fp->by_sym_cap || !fp->by_sym[sym]) return UINT32_MAX;
  return fp->by_sym[sym] - 1;
}

const struct flat_edge *flat_edge_find(const struct flat_profile *fp, uint32_t caller, uint32_t callee)
{
  uint32_t lo = fp->out_off[caller], hi = fp->out_off[caller + 1];
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (fp->edges[mid].callee < callee) lo = mid + 1;
    else hi = mid;
  }
  return lo < fp->out_off[caller + 1] && fp->edges[lo].callee == callee ? &fp->edges[lo] : NULL;
}
