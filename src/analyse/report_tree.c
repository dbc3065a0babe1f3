/* Tree-shaped outputs read straight from the call tree: collapsed stacks
 * for flame graphs, the massif-style tree (--tree) and the top N stacks. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* ---- collapsed stacks: "root;...;leaf value" per node with a self value ---- */

/* ';' separates frames and newlines separate stacks: replace both. */
static void put_frame(FILE *out, const char *s)
{
  for (; *s; ++s) {
    unsigned char c = (unsigned char) *s;
    fputc(c == ';' ? ':' : (c < 0x20 || c == 0x7f) ? '?' : c, out);
  }
}

/* Children of node n as an array (sorted by the caller's comparator). */
static size_t children(const struct call_tree *t, uint32_t n, uint32_t **out, size_t *cap)
{
  size_t k = 0;
  for (uint32_t c = t->nodes[n].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) {
    GROW(*out, *cap, k + 1);
    (*out)[k++] = c;
  }
  return k;
}

void report_flame(const struct report *r)
{
  const struct call_tree *t = r->tree;
  uint32_t *path = xmalloc(64 * sizeof(*path));
  size_t path_cap = 64;
  /* Pre-order walk by node id is not enough (siblings interleave), so build
   * the path from each node upwards; fine for output-sized work. */
  for (uint32_t id = 1; id < t->count; ++id) {
    const struct tree_node *n = &t->nodes[id];
    if (!n->cnt) continue;
    size_t depth = 0;
    for (uint32_t p = id; p != 0; p = t->nodes[p].parent) {
      GROW(path, path_cap, depth + 1);
      path[depth++] = p;
    }
    while (depth--) {
      put_frame(r->out, symtab_display(r->st, t->nodes[path[depth]].sym));
      fputc(depth ? ';' : ' ', r->out);
    }
    fprintf(r->out, "%" PRId64 "\n", n->cnt);
  }
  free(path);
}

/* ---- --tree ---- */

static const struct call_tree *sort_tree;

static int by_cum_desc(const void *pa, const void *pb)
{
  const struct tree_node *a = &sort_tree->nodes[*(const uint32_t *) pa];
  const struct tree_node *b = &sort_tree->nodes[*(const uint32_t *) pb];
  if (a->ccnt != b->ccnt) return a->ccnt > b->ccnt ? -1 : 1;
  return *(const uint32_t *) pa < *(const uint32_t *) pb ? -1 : 1;
}

static double pct_of(int64_t v, int64_t total) { return total ? (double) v / (double) total * 100. : 0.; }

/* Children shown: >= 1% of the total, or >= 0.1% under a parent that is
 * itself below 1% -- IgProf's massif rule. */
static size_t kept_children(const struct report *r, uint32_t n, uint32_t **kids, size_t *cap)
{
  const struct call_tree *t = r->tree;
  int64_t total = t->nodes[0].ccnt;
  double pct = pct_of(t->nodes[n].ccnt, total);
  size_t k = children(t, n, kids, cap), kept = 0;
  sort_tree = t;
  if (k > 1) qsort(*kids, k, sizeof(**kids), by_cum_desc);
  for (size_t i = 0; i < k; ++i) {
    double c = pct_of(t->nodes[(*kids)[i]].ccnt, total);
    if ((c < 1. && pct < 1.) || c < 0.1) continue;
    (*kids)[kept++] = (*kids)[i];
  }
  return kept;
}

struct tree_frame { uint32_t *kids; size_t nkids, next, cap; };

void report_tree(const struct report *r)
{
  const struct call_tree *t = r->tree;
  struct tree_frame *stack = NULL;
  size_t depth = 0, cap = 0;
  int64_t total = t->nodes[0].ccnt;
  uint32_t node = 0;
  for (;;) {
    /* print node at `depth`: one column per ancestor, '|' while that
     * ancestor still has children to print */
    for (size_t i = 0; i < depth; ++i)
      fputs(stack[i].next < stack[i].nkids || i + 1 == depth ? " |" : "  ", r->out);
    /* As IgProf: the percentage is shown for nodes with a self value. */
    if (t->nodes[node].cnt) fprintf(r->out, "->(%.2f) ", pct_of(t->nodes[node].ccnt, total));
    fprintf(r->out, "%s\n", symtab_display(r->st, r->flat->node_sym[node]));
    GROW(stack, cap, depth + 1);
    struct tree_frame *f = &stack[depth];
    f->nkids = kept_children(r, node, &f->kids, &f->cap);
    f->next = 0;
    depth++;
    while (depth && stack[depth - 1].next == stack[depth - 1].nkids) depth--;
    if (!depth) break;
    node = stack[depth - 1].kids[stack[depth - 1].next++];
  }
  for (size_t i = 0; i < cap; ++i) free(stack[i].kids);
  free(stack);
}

/* ---- --top N ---- */

static int by_self_desc(const void *pa, const void *pb)
{
  const struct tree_node *a = &sort_tree->nodes[*(const uint32_t *) pa];
  const struct tree_node *b = &sort_tree->nodes[*(const uint32_t *) pb];
  if (a->cnt != b->cnt) return a->cnt > b->cnt ? -1 : 1;
  return *(const uint32_t *) pa < *(const uint32_t *) pb ? -1 : 1;
}

void report_top(const struct report *r, size_t n)
{
  const struct call_tree *t = r->tree;
  uint32_t *ids = xmalloc(t->count * sizeof(*ids));
  size_t k = 0;
  for (uint32_t id = 0; id < t->count; ++id) if (t->nodes[id].cnt > 0) ids[k++] = id;
  sort_tree = t;
  if (k > 1) qsort(ids, k, sizeof(*ids), by_self_desc);
  const char *unit = r->is_time ? "seconds" : strncmp(r->key, "MEM_", 4) == 0 ? "bytes" : "counts";
  for (size_t i = 0; i < k && i < n; ++i) {
    char v[64];
    if (r->is_time) format_thousands_2dp(v, sizeof(v), (double) t->nodes[ids[i]].cnt * r->tick_period);
    else format_thousands(v, sizeof(v), t->nodes[ids[i]].cnt);
    fprintf(r->out, "## Entry %zu (%s %s)\n", i + 1, v, unit);
    int j = 0;
    for (uint32_t p = ids[i];; p = t->nodes[p].parent) {
      fprintf(r->out, "#%d %s\n", j++, symtab_display(r->st, r->flat->node_sym[p]));
      if (p == 0) break;
    }
    fputc('\n', r->out);
  }
  free(ids);
}
