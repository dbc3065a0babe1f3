/* --massif FILE: the heap timeline in valgrind massif's massif.out format,
 * which ms_print and massif-visualizer read. Every timeline sample is a
 * snapshot (time in ms); the peak sample is the "peak" snapshot, with the
 * MEM_PEAK tree turned upside down as massif draws it: the allocation sites
 * under the root, their callers under them, each node the bytes live at the
 * peak through it. ms_print strips '#' comments: names carry '?' instead. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "util.h"

/* A tree (MEM_PEAK's, a snapshot's) inverted: for each node with bytes of
 * its own, its path from it up to the root, each step adding those bytes. */
static void invert(const struct report *r, const struct call_tree *t, struct call_tree *inv)
{
  tree_init(inv, r->st->spontaneous, 0);
  for (size_t i = 1; i < t->count; ++i) {
    const struct tree_node *n = &t->nodes[i];
    if (n->cnt <= 0) continue;
    uint32_t at = 0;
    for (uint32_t x = (uint32_t) i; x != 0; x = t->nodes[x].parent) {
      at = tree_child(inv, at, t->nodes[x].sym);
      tree_add(inv, at, n->cnt, n->freq);
    }
    tree_add(inv, 0, n->cnt, n->freq);
  }
}

static int by_bytes(const void *a, const void *b, void *arg)
{
  const struct call_tree *t = arg;
  int64_t x = t->nodes[*(const uint32_t *) a].cnt, y = t->nodes[*(const uint32_t *) b].cnt;
  return x < y ? 1 : x > y ? -1 : (*(const uint32_t *) a > *(const uint32_t *) b) - (*(const uint32_t *) a < *(const uint32_t *) b);
}

struct visit { uint32_t *kids; size_t n, next; };

static uint32_t *children(const struct call_tree *t, uint32_t node, size_t *n)
{
  size_t count = 0;
  for (uint32_t c = t->nodes[node].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) ++count;
  uint32_t *kids = xmalloc(sizeof(*kids) * (count ? count : 1));
  count = 0;
  for (uint32_t c = t->nodes[node].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) kids[count++] = c;
  qsort_r(kids, count, sizeof(*kids), by_bytes, (void *) t);
  *n = count;
  return kids;
}

static void node_line(FILE *out, const struct report *r, const struct call_tree *inv, uint32_t node, size_t depth,
                      size_t nkids)
{
  for (size_t i = 0; i < depth; ++i) fputc(' ', out);
  fprintf(out, "n%zu: %" PRId64 " ", nkids, inv->nodes[node].cnt);
  if (!depth) {
    fputs("(heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n", out);
    return;
  }
  uint32_t sym = inv->nodes[node].sym;
  const char *file = symtab_file_display(r->st, sym), *base = strrchr(file, '/');
  fputs("0x0: ", out);
  for (const char *p = symtab_display(r->st, sym); *p; ++p) fputc(*p == '#' ? '?' : *p, out);
  fputs(" (in ", out);
  for (const char *p = base ? base + 1 : file; *p; ++p) fputc(*p == '#' ? '?' : *p, out);
  fputs(")\n", out);
}

/* Depth first, children by bytes, with a stack of its own (trees may be
 * deeper than the C stack allows recursion). */
static void write_tree(FILE *out, const struct report *r, const struct call_tree *inv)
{
  size_t cap = 64, top = 0;
  struct visit *stack = xmalloc(sizeof(*stack) * cap);
  stack[top].kids = children(inv, 0, &stack[top].n);
  stack[top].next = 0;
  node_line(out, r, inv, 0, 0, stack[top].n);
  ++top;
  while (top) {
    struct visit *v = &stack[top - 1];
    if (v->next == v->n) { free(v->kids); --top; continue; }
    uint32_t node = v->kids[v->next++];
    size_t n;
    uint32_t *kids = children(inv, node, &n);
    node_line(out, r, inv, node, top, n);
    if (top == cap) stack = xrealloc(stack, sizeof(*stack) * (cap *= 2));
    stack[top++] = (struct visit) { kids, n, 0 };
  }
  free(stack);
}

/* The detailed snapshot of sample i, or NULL. */
static const struct call_tree *snapshot_of(const struct heap_timeline *tl, size_t i)
{
  for (size_t k = 0; k < tl->nsnapshots; ++k)
    if (tl->snapshots[k].sample == i) return &tl->snapshots[k].tree;
  return NULL;
}

void report_massif(FILE *out, const struct heap_timeline *tl, const struct report *r)
{
  struct call_tree inv;
  invert(r, r->tree, &inv);
  size_t peak = heap_timeline_peak(tl);
  if (inv.nodes[0].cnt != tl->samples[peak].bytes)
    warn("%s: MEM_PEAK adds up to %" PRId64 " bytes, the timeline's peak is %" PRId64, tl->path, inv.nodes[0].cnt,
         tl->samples[peak].bytes);
  fprintf(out, "desc: igprof -mp --timeline, %s\ncmd: ", tl->path);
  for (const char *p = tl->program; *p; ++p) fputc(*p == '#' ? '?' : *p, out);
  fputs("\ntime_unit: ms\n", out);
  for (size_t i = 0; i < tl->count; ++i) {
    const struct heap_sample *s = &tl->samples[i];
    const struct call_tree *detailed = i == peak ? NULL : snapshot_of(tl, i);
    fprintf(out, "#-----------\nsnapshot=%zu\n#-----------\ntime=%" PRId64 "\nmem_heap_B=%" PRId64
                 "\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=%s\n",
            i, s->us / 1000, s->bytes, i == peak ? "peak" : detailed ? "detailed" : "empty");
    if (i == peak) {
      write_tree(out, r, &inv);
    } else if (detailed) {
      struct call_tree snap;
      invert(r, detailed, &snap);
      if (snap.nodes[0].cnt != s->bytes)
        warn("%s: snapshot %zu adds up to %" PRId64 " bytes, its sample to %" PRId64, tl->path, i, snap.nodes[0].cnt,
             s->bytes);
      write_tree(out, r, &snap);
      tree_free(&snap);
    }
  }
  tree_free(&inv);
}
