#include "profile.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "symbols.h"

/* Allocator entry points whose frames are folded into their caller for MEM_*
 * reports: the caller is where the allocation decision was made. */
static const char *const allocator_names[] = {
  "malloc", "calloc", "realloc", "free", "memalign", "posix_memalign", "aligned_alloc",
  "valloc", "pvalloc", "reallocarray", "__libc_malloc", "__libc_calloc", "__libc_realloc",
  "__libc_free", "__libc_memalign", "__libc_valloc", "__libc_pvalloc",
  "operator new", "operator new[]", "operator delete", "operator delete[]",
};

static int is_allocator_name(const char *name)
{
  /* Every mangled operator new/new[]/delete/delete[] variant (plain, nothrow,
   * aligned, sized; 32- and 64-bit size types) starts with one of these. */
  if (!strncmp(name, "_Znw", 4) || !strncmp(name, "_Zna", 4)
      || !strncmp(name, "_Zdl", 4) || !strncmp(name, "_Zda", 4))
    return 1;
  for (size_t i = 0; i < sizeof(allocator_names) / sizeof(allocator_names[0]); ++i) {
    size_t n = strlen(allocator_names[i]);
    /* Demangled operator names carry their signature: "operator new(unsigned long)". */
    if (!strncmp(name, allocator_names[i], n) && (name[n] == 0 || (n > 8 && name[n] == '(')))
      return 1;
  }
  return 0;
}

static void symtab_grow(struct symtab *st, size_t need)
{
  size_t cap = st->cap;
  GROW(st->file_of, cap, need);
  cap = st->cap; GROW(st->flags, cap, need);
  cap = st->cap; GROW(st->display, cap, need);
  cap = st->cap; GROW(st->function_of, cap, need);
  cap = st->cap; GROW(st->source_of, cap, need);
  cap = st->cap; GROW(st->line_of, cap, need);
  cap = st->cap; GROW(st->offset_of, cap, need);
  st->cap = cap;
}

void symtab_init(struct symtab *st, int demangle)
{
  memset(st, 0, sizeof(*st));
  strpool_init(&st->names);
  strpool_init(&st->files);
  strpool_init(&st->functions);
  idmap_init(&st->recursion);
  st->demangle = demangle;
  symtab_file(st, "", 0);
  st->spontaneous = symtab_symbol(st, "<spontaneous>", 13, 0);
}

void symtab_free(struct symtab *st)
{
  if (st->demangle)
    for (size_t i = 0; i < st->names.count; ++i)
      if (st->display[i] && st->display[i] != strpool_get(&st->names, (uint32_t) i)) free((char *) st->display[i]);
  strpool_free(&st->names);
  strpool_free(&st->files);
  strpool_free(&st->functions);
  idmap_free(&st->recursion);
  free(st->file_of); free(st->flags); free(st->display);
  free(st->function_of); free(st->source_of); free(st->line_of); free(st->offset_of);
  memset(st, 0, sizeof(*st));
}

uint32_t symtab_file(struct symtab *st, const char *path, size_t len)
{
  return strpool_intern(&st->files, path, len);
}

static void symtab_new_symbol(struct symtab *st, uint32_t id, uint32_t file, uint8_t flags)
{
  symtab_grow(st, (size_t) id + 1);
  st->file_of[id] = file;
  st->flags[id] = flags;
  st->display[id] = NULL;
  st->function_of[id] = 0;
  st->source_of[id] = 0;
  st->line_of[id] = 0;
  st->offset_of[id] = UINT64_MAX;
}

void symtab_set_source(struct symtab *st, uint32_t sym, const char *function, const char *source, int line)
{
  if (st->function_of[sym]) return;
  st->function_of[sym] = strpool_intern(&st->functions, function, strlen(function)) + 1;
  if (source && *source) {
    st->source_of[sym] = symtab_file(st, source, strlen(source));
    st->line_of[sym] = line > 0 ? (uint32_t) line : 0;
  }
}

const char *symtab_function(struct symtab *st, uint32_t sym)
{
  uint32_t f = st->function_of[sym];
  return f ? strpool_get(&st->functions, f - 1) : symtab_display(st, sym);
}

uint32_t symtab_symbol(struct symtab *st, const char *name, size_t len, uint32_t file)
{
  size_t before = st->names.count;
  uint32_t id = strpool_intern(&st->names, name, len);
  if (st->names.count != before)
    symtab_new_symbol(st, id, file, is_allocator_name(strpool_get(&st->names, id)) ? SYM_ALLOCATOR : 0);
  return id;
}

uint32_t symtab_recursion(struct symtab *st, uint32_t sym, uint32_t k)
{
  uint64_t key = ((uint64_t) sym << 32) | k;
  uint32_t id;
  if (idmap_get(&st->recursion, key, &id)) return id;
  const char *name = symtab_name(st, sym);
  size_t n = strlen(name);
  char *buf = xmalloc(n + 16);
  int len = snprintf(buf, n + 16, "%s'%u", name, k);
  id = strpool_add(&st->names, buf, (size_t) len);
  free(buf);
  symtab_new_symbol(st, id, st->file_of[sym], 0);
  idmap_put(&st->recursion, key, id);
  st->offset_of[id] = st->offset_of[sym];
  if (st->function_of[sym]) {
    /* name'k of a resolved function: its function is function'k, at the same place */
    const char *fn = symtab_function(st, sym);
    n = strlen(fn);
    buf = xmalloc(n + 16);
    snprintf(buf, n + 16, "%s'%u", fn, k);
    symtab_set_source(st, id, buf, symtab_file_name(st, st->source_of[sym]), (int) st->line_of[sym]);
    free(buf);
  }
  return id;
}

/* Demangled name; a recursion suffix (name'2) is kept after the demangled part. */
static const char *demangle_with_suffix(const char *name)
{
  const char *tick = strrchr(name, '\'');
  if (!tick || !tick[1] || strspn(tick + 1, "0123456789") != strlen(tick + 1)) return demangle_name(name);
  size_t n = (size_t) (tick - name);
  char *base = xmalloc(n + 1);
  memcpy(base, name, n);
  base[n] = 0;
  const char *d = demangle_name(base);
  if (d == base) { free(base); return name; }
  char *out = xmalloc(strlen(d) + strlen(tick) + 1);
  strcpy(out, d);
  strcat(out, tick);
  free(base);
  free((char *) d);
  return out;
}

const char *symtab_display(struct symtab *st, uint32_t sym)
{
  if (!st->demangle) return symtab_name(st, sym);
  if (!st->display[sym]) st->display[sym] = demangle_with_suffix(symtab_name(st, sym));
  return st->display[sym];
}

const char *symtab_file_display(const struct symtab *st, uint32_t sym)
{
  const char *f = symtab_file_name(st, st->file_of[sym]);
  return *f ? f : "<dynamically generated>";
}

/* ---- call tree ---- */

static uint64_t node_key_hash(uint32_t parent, uint32_t sym)
{
  return hash_u64(((uint64_t) parent << 32) | sym);
}

static struct tree_slot *slots_new(size_t n)
{
  struct tree_slot *s = xmalloc(n * sizeof(*s));
  for (size_t i = 0; i < n; ++i) s[i].node = NO_NODE;
  return s;
}

static uint32_t tree_new_node(struct call_tree *t, uint32_t parent, uint32_t sym)
{
  if (t->count >= UINT32_MAX - 1) fatal("call tree too large");
  GROW(t->nodes, t->cap, t->count + 1);
  uint32_t id = (uint32_t) t->count++;
  struct tree_node *n = &t->nodes[id];
  memset(n, 0, sizeof(*n));
  n->parent = parent;
  n->sym = sym;
  n->first_child = NO_NODE;
  n->next_sibling = NO_NODE;
  if (parent != NO_NODE) {
    n->depth = t->nodes[parent].depth + 1;
    n->next_sibling = t->nodes[parent].first_child;
    t->nodes[parent].first_child = id;
  }
  return id;
}

void tree_init(struct call_tree *t, uint32_t root_sym, int is_max)
{
  memset(t, 0, sizeof(*t));
  t->is_max = is_max;
  t->nslots = 1024;
  t->slots = slots_new(t->nslots);
  tree_new_node(t, NO_NODE, root_sym);
}

void tree_free(struct call_tree *t)
{
  for (size_t c = 0; c < t->ncolumns; ++c) free(t->columns[c].vals);
  free(t->columns);
  free(t->nodes);
  free(t->slots);
  memset(t, 0, sizeof(*t));
}

static void tree_rehash(struct call_tree *t)
{
  size_t n = t->nslots * 2;
  struct tree_slot *slots = slots_new(n);
  for (size_t i = 0; i < t->nslots; ++i) {
    if (t->slots[i].node == NO_NODE) continue;
    size_t j = node_key_hash(t->slots[i].parent, t->slots[i].sym) & (n - 1);
    while (slots[j].node != NO_NODE) j = (j + 1) & (n - 1);
    slots[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = n;
}

uint32_t tree_child(struct call_tree *t, uint32_t parent, uint32_t sym)
{
  assert(t->slots);
  size_t mask = t->nslots - 1, i = node_key_hash(parent, sym) & mask;
  for (; t->slots[i].node != NO_NODE; i = (i + 1) & mask)
    if (t->slots[i].parent == parent && t->slots[i].sym == sym) return t->slots[i].node;
  uint32_t id = tree_new_node(t, parent, sym);
  t->slots[i] = (struct tree_slot) { parent, sym, id };
  if (t->count * 2 > t->nslots) tree_rehash(t);
  return id;
}

void tree_freeze(struct call_tree *t)
{
  free(t->slots);
  t->slots = NULL;
  t->nslots = 0;
}

int tree_add(struct call_tree *t, uint32_t node, int64_t value, int64_t ticks)
{
  struct tree_node *n = &t->nodes[node];
  int64_t cnt = n->cnt, freq;
  if (t->is_max) {
    if (value > cnt) cnt = value;
  } else if (!value_add(cnt, value, &cnt)) {
    return 0;
  }
  if (!value_add(n->freq, ticks, &freq)) return 0;
  n->cnt = cnt;
  n->freq = freq;
  return 1;
}

int tree_add_column(struct call_tree *t, uint32_t node, uint32_t c, int64_t value, int64_t ticks)
{
  if (c >= t->ncolumns) {
    t->columns = xrealloc(t->columns, ((size_t) c + 1) * sizeof(*t->columns));
    memset(t->columns + t->ncolumns, 0, ((size_t) c + 1 - t->ncolumns) * sizeof(*t->columns));
    t->ncolumns = (size_t) c + 1;
  }
  struct tree_column *col = &t->columns[c];
  GROW(col->vals, col->cap, 2 * (size_t) node + 2);
  int64_t *v = &col->vals[2 * (size_t) node], sum, calls;
  if (!value_add(v[0], value, &sum) || !value_add(v[1], ticks, &calls)) return 0;
  v[0] = sum;
  v[1] = calls;
  return 1;
}

/* The message for an overflow at node `id`: what overflowed (`what`: the
 * "value" or "call count", `diff`: the difference from the baseline) and
 * the function it belongs to. */
static _Noreturn void node_overflow(const struct call_tree *t, const struct symtab *st, uint32_t id, const char *what, int diff)
{
  char msg[512];
  const char *pre = diff ? "" : "cumulative ", *post = diff ? " difference from the baseline" : "";
  if (id == 0) snprintf(msg, sizeof(msg), "the profile's total %s%s", what, post);
  else snprintf(msg, sizeof(msg), "the %s%s%s of '%.300s' on one of its stacks", pre, what, post, symtab_name(st, t->nodes[id].sym));
  fatal_overflow(msg);
}

void tree_accumulate(struct call_tree *t, const struct symtab *st)
{
  for (size_t i = 0; i < t->count; ++i) {
    t->nodes[i].ccnt = t->nodes[i].cnt;
    t->nodes[i].cfreq = t->nodes[i].freq;
  }
  /* Children always have larger ids than their parent. */
  for (size_t i = t->count; i-- > 1;) {
    struct tree_node *n = &t->nodes[i];
    struct tree_node *p = &t->nodes[n->parent];
    if (t->is_max) {
      if (n->ccnt > p->ccnt) p->ccnt = n->ccnt;
    } else if (!value_add(p->ccnt, n->ccnt, &p->ccnt)) {
      node_overflow(t, st, n->parent, "value", 0);
    }
    if (!value_add(p->cfreq, n->cfreq, &p->cfreq)) node_overflow(t, st, n->parent, "call count", 0);
  }
}

void tree_subtract(struct call_tree *t, const struct call_tree *base, const struct symtab *st)
{
  /* Map each baseline node onto the same path in t; ids grow parent-first. */
  uint32_t *map = xmalloc(base->count * sizeof(*map));
  map[0] = 0;
  for (size_t i = 1; i < base->count; ++i) {
    const struct tree_node *b = &base->nodes[i];
    map[i] = tree_child(t, map[b->parent], b->sym);
  }
  for (size_t i = 0; i < base->count; ++i) {
    struct tree_node *n = &t->nodes[map[i]];
    if (!value_sub(n->cnt, base->nodes[i].cnt, &n->cnt)) node_overflow(t, st, map[i], "value", 1);
    if (!value_sub(n->freq, base->nodes[i].freq, &n->freq)) node_overflow(t, st, map[i], "call count", 1);
  }
  free(map);
}
