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

/* Children of node n appended to (*out)[at...], newest first (the order of
 * the sibling list); returns how many. */
static size_t children(const struct call_tree *t, uint32_t n, uint32_t **out, size_t *cap, size_t at)
{
  size_t k = 0;
  for (uint32_t c = t->nodes[n].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) {
    GROW(*out, *cap, at + k + 1);
    (*out)[at + k++] = c;
  }
  return k;
}

static void put_stack_line(const struct report *r, const uint32_t *path, size_t n, const char *marker, int64_t value)
{
  for (size_t i = 0; i < n; ++i) {
    put_frame(r->out, symtab_display(r->st, r->tree->nodes[path[i]].sym));
    fputc(i + 1 < n || marker ? ';' : ' ', r->out);
  }
  if (marker) fprintf(r->out, "%s ", marker);
  fprintf(r->out, "%" PRId64 "\n", value);
}

/* Depth-first, so each line's frames are the path walked down to its node:
 * no line costs more than REPORT_STACK_FRAMES frames. Nodes below that depth
 * add up into one line per node at the limit, ending in a marker frame. */
void report_flame(const struct report *r)
{
  const struct call_tree *t = r->tree;
  uint32_t *todo = NULL, *path = NULL;   /* nodes still to visit; the current path (depth 1..) */
  size_t ntodo = 0, todo_cap = 0, path_cap = 0;
  int64_t deeper = 0;                   /* values below the limit under path[limit - 1] */
  int have_deeper = 0;
  ntodo = children(t, 0, &todo, &todo_cap, 0);
  GROW(path, path_cap, REPORT_STACK_FRAMES + 1);
  while (ntodo) {
    uint32_t id = todo[--ntodo];
    const struct tree_node *n = &t->nodes[id];
    if (n->depth > REPORT_STACK_FRAMES) {
      int ok = 1;
      if (t->is_max) { if (!have_deeper || n->cnt > deeper) deeper = n->cnt; }
      else ok = value_add(deeper, n->cnt, &deeper);
      if (!ok) fatal_overflow("the value of the frames under one --flame line");
      have_deeper |= n->cnt != 0;
    } else {
      path[n->depth - 1] = id;
      if (n->cnt) put_stack_line(r, path, n->depth, NULL, n->cnt);
    }
    /* Newest child first on the stack: the oldest is visited first, so a
     * single dump's stacks come out in the dump's order. */
    ntodo += children(t, id, &todo, &todo_cap, ntodo);
    /* path[limit - 1]'s subtree is a contiguous run of the walk: when the
     * next node is not in it, its total is complete. */
    int leaving = have_deeper && (ntodo == 0 || t->nodes[todo[ntodo - 1]].depth <= REPORT_STACK_FRAMES);
    if (leaving) {
      if (deeper) put_stack_line(r, path, REPORT_STACK_FRAMES, REPORT_DEEPER_MARKER, deeper);
      deeper = 0;
      have_deeper = 0;
    }
  }
  free(todo);
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

/* Children shown, appended to (*kids)[at...]: >= 1% of the total, or >= 0.1%
 * under a parent that is itself below 1% -- IgProf's massif rule. */
static size_t kept_children(const struct report *r, uint32_t n, uint32_t **kids, size_t *cap, size_t at)
{
  const struct call_tree *t = r->tree;
  int64_t total = t->nodes[0].ccnt;
  double pct = pct_of(t->nodes[n].ccnt, total);
  size_t k = children(t, n, kids, cap, at), kept = 0;
  uint32_t *list = *kids + at;
  sort_tree = t;
  if (k > 1) qsort(list, k, sizeof(*list), by_cum_desc);
  for (size_t i = 0; i < k; ++i) {
    double c = pct_of(t->nodes[list[i]].ccnt, total);
    if ((c < 1. && pct < 1.) || c < 0.1) continue;
    list[kept++] = list[i];
  }
  return kept;
}

/* A tree level: its node's shown children are pending[begin..end), the next
 * to print at `next`. */
struct tree_level { size_t begin, next, end; };

/* The columns in front of a node at `depth`: one per ancestor, '|' while that
 * ancestor still has children to print. Past TREE_INDENT_LEVELS columns the
 * rest is written as "[+K]" (K more levels), so a line never grows with the
 * depth and a path of depth D is D lines of bounded length. */
static void put_indent(const struct report *r, const struct tree_level *levels, size_t depth)
{
  size_t shown = depth < TREE_INDENT_LEVELS ? depth : TREE_INDENT_LEVELS;
  for (size_t i = 0; i < shown; ++i)
    fputs(levels[i].next < levels[i].end || i + 1 == depth ? " |" : "  ", r->out);
  if (depth > shown) fprintf(r->out, "[+%zu]", depth - shown);
}

void report_tree(const struct report *r)
{
  const struct call_tree *t = r->tree;
  struct tree_level *levels = NULL;
  uint32_t *pending = NULL;
  size_t depth = 0, levels_cap = 0, npending = 0, pending_cap = 0;
  int64_t total = t->nodes[0].ccnt;
  uint32_t node = 0;
  for (;;) {
    put_indent(r, levels, depth);
    /* As IgProf: the percentage is shown for nodes with a self value. */
    if (t->nodes[node].cnt) fprintf(r->out, "->(%.2f) ", pct_of(t->nodes[node].ccnt, total));
    fputs(symtab_display(r->st, r->flat->node_sym[node]), r->out);
    fputc('\n', r->out);
    GROW(levels, levels_cap, depth + 1);
    size_t k = kept_children(r, node, &pending, &pending_cap, npending);
    levels[depth] = (struct tree_level) { npending, npending, npending + k };
    npending += k;
    depth++;
    while (depth && levels[depth - 1].next == levels[depth - 1].end) npending = levels[--depth].begin;
    if (!depth) break;
    node = pending[levels[depth - 1].next++];
  }
  free(levels);
  free(pending);
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
  const char *unit = counter_unit(r->key, r->is_time);
  char note[160];
  if (report_sampling_note(r, note, sizeof(note))) fprintf(r->out, "# %s\n", note);
  for (size_t i = 0; i < k && i < n; ++i) {
    char v[64];
    if (r->is_time) format_thousands_2dp(v, sizeof(v), (double) t->nodes[ids[i]].cnt * r->tick_period);
    else format_thousands(v, sizeof(v), t->nodes[ids[i]].cnt);
    fprintf(r->out, "## Entry %zu (%s %s)\n", i + 1, v, unit);
    /* The innermost REPORT_STACK_FRAMES frames; the rest is counted. */
    uint32_t p = ids[i], j = 0;
    for (; j < REPORT_STACK_FRAMES; ++j, p = t->nodes[p].parent) {
      fprintf(r->out, "#%u %s\n", j, symtab_display(r->st, r->flat->node_sym[p]));
      if (p == 0) break;
    }
    if (j == REPORT_STACK_FRAMES)
      fprintf(r->out, "#%u [%u outer frames not shown]\n", j, t->nodes[p].depth + 1);
    fputc('\n', r->out);
  }
  free(ids);
}
