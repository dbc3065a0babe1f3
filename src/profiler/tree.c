/* The call tree shared by every counter (design.md §6).
 *
 * A node is one frame of one distinct stack, keyed by (parent, pc). Children
 * hang off their parent in a singly linked list that only ever grows at its
 * head by compare-and-swap, so readers (other pushers, the dump writer) walk
 * it without a lock and a node, once published, never moves or dies.
 * Counters are per node, allocated on the first tick, updated with atomics.
 *
 * The push cost that matters is the per-thread cache: consecutive events in
 * a thread share most of their stack, and the shared outer part is matched
 * against the previous push frame by frame without touching the tree.
 */
#include "internal.h"
#include "walk.h"

struct counter_def {
  const char *name;
  enum igprof_counter_kind kind;
  int leaks;
  igprof_counter_reader reader;
};

static struct counter_def counters[IGPROF_MAX_COUNTERS];
static _Atomic uint64_t node_count;

uint64_t igprof_tree_node_count(void) { return atomic_load_explicit(&node_count, memory_order_relaxed); }
static int counter_count;
static struct igprof_node root;

/* Where each counter lives in a node's counter block. The kinds with a peak
 * (MEM_LIVE) come first: with the memory profiler's three counters the
 * fields an allocation updates (MEM_LIVE's three, MEM_TOTAL's and MEM_MAX's
 * ticks and value) then lie in the block's first 64 bytes, one cache line
 * (blocks start on a line), where the definition order put MEM_LIVE's peak
 * on a second one (MEM_PEAK's entry, written when a node first changes
 * after a new heap maximum, may lie there: heap.h). The dump still numbers
 * counters in definition order. Fixed when the first block is made: later
 * definitions are refused. */
int igprof_counter_slots[IGPROF_MAX_COUNTERS];

static _Atomic int blocks_made;

int igprof_counter_define(const char *name, enum igprof_counter_kind kind, int leaks)
{
  if (counter_count == IGPROF_MAX_COUNTERS || atomic_load(&blocks_made)) return -1;
  counters[counter_count] = (struct counter_def){name, kind, leaks, NULL};
  int slot = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int id = 0; id <= counter_count; ++id)
      if ((counters[id].kind == IGPROF_COUNTER_TICK) == (pass == 0)) igprof_counter_slots[id] = slot++;
  return counter_count++;
}

int igprof_counter_define_snapshot(const char *name, igprof_counter_reader reader)
{
  int id = igprof_counter_define(name, IGPROF_COUNTER_SNAPSHOT, 0);
  if (id >= 0) counters[id].reader = reader;
  return id;
}

igprof_counter_reader igprof_counter_reader_of(int id) { return counters[id].reader; }

int igprof_counter_count(void) { return counter_count; }
const char *igprof_counter_name(int id) { return counters[id].name; }
int igprof_counter_has_leaks(int id) { return counters[id].leaks; }

struct igprof_node *igprof_tree_root(void) { return &root; }

/* ---------------------------------------------------------------- */
/* Per-thread buffers: the walk's and the push cache's               */
/* ---------------------------------------------------------------- */

int igprof_thread_prepare(void)
{
  struct igprof_thread *t = &igprof_tls;
  if (t->ready) return 0;
  int depth = igprof_config.depth;
  int walk = depth + igprof_walk_slack() + 1;
  size_t bytes = sizeof(uintptr_t) * (size_t) walk + (sizeof(uintptr_t) + sizeof(void *)) * (size_t) (depth + 1);
  char *block = igprof_arena_alloc(bytes);
  if (!block) return -1;
  t->walk_pcs = (uintptr_t *) block;
  t->walk_capacity = walk;
  t->cache_pcs = t->walk_pcs + walk;
  t->cache_nodes = (struct igprof_node **) (t->cache_pcs + depth + 1);
  t->cache_depth = 0;
  t->ready = 1;
  return 0;
}

struct igprof_counter_value *igprof_node_counters(struct igprof_node *n)
{
  struct igprof_counter_value *c = atomic_load_explicit(&n->counters, memory_order_acquire);
  if (IGPROF_LIKELY(c)) return c;
  if (IGPROF_UNLIKELY(!atomic_load_explicit(&blocks_made, memory_order_relaxed)))
    atomic_store(&blocks_made, 1);
  /* As many entries as counters: the layout is final once a block exists. */
  struct igprof_counter_value *fresh = igprof_arena_alloc_lines(sizeof *fresh * (size_t) counter_count);
  if (!fresh) return NULL;
  /* Losing the race wastes a little arena, never a count. */
  if (atomic_compare_exchange_strong_explicit(&n->counters, &c, fresh, memory_order_acq_rel,
                                              memory_order_acquire))
    return fresh;
  return c;
}

static void atomic_max(_Atomic int64_t *slot, int64_t v)
{
  int64_t cur = atomic_load_explicit(slot, memory_order_relaxed);
  while (cur < v && !atomic_compare_exchange_weak_explicit(slot, &cur, v, memory_order_relaxed,
                                                           memory_order_relaxed))
    ;
}

/* Single-thread forms (igprof_one_thread): plain loads and stores. */
static inline void plain_add(_Atomic int64_t *slot, int64_t v)
{
  atomic_store_explicit(slot, atomic_load_explicit(slot, memory_order_relaxed) + v, memory_order_relaxed);
}

static inline void plain_max(_Atomic int64_t *slot, int64_t v)
{
  if (atomic_load_explicit(slot, memory_order_relaxed) < v) atomic_store_explicit(slot, v, memory_order_relaxed);
}

void igprof_counter_block_add(struct igprof_counter_value *c, int id, int64_t ticks, int64_t amount)
{
  c += igprof_counter_slots[id];
  if (igprof_one_thread()) {
    plain_add(&c->ticks, ticks);
    switch (counters[id].kind) {
    case IGPROF_COUNTER_MAX: plain_max(&c->value, amount); break;
    case IGPROF_COUNTER_SUM: plain_add(&c->value, amount); break;
    case IGPROF_COUNTER_TICK:
      plain_add(&c->value, amount);
      plain_max(&c->peak, atomic_load_explicit(&c->value, memory_order_relaxed));
      break;
    case IGPROF_COUNTER_SNAPSHOT: break;
    }
    return;
  }
  atomic_fetch_add_explicit(&c->ticks, ticks, memory_order_relaxed);
  switch (counters[id].kind) {
  case IGPROF_COUNTER_MAX:
    atomic_max(&c->value, amount);
    break;
  case IGPROF_COUNTER_SUM:
    atomic_fetch_add_explicit(&c->value, amount, memory_order_relaxed);
    break;
  case IGPROF_COUNTER_TICK: {
    int64_t now = atomic_fetch_add_explicit(&c->value, amount, memory_order_relaxed) + amount;
    atomic_max(&c->peak, now);
    break;
  }
  case IGPROF_COUNTER_SNAPSHOT: break;
  }
}

void igprof_counter_add(struct igprof_node *n, int id, int64_t ticks, int64_t amount)
{
  struct igprof_counter_value *c = igprof_node_counters(n);
  if (c) igprof_counter_block_add(c, id, ticks, amount);
}

int igprof_counter_is_sum(int id) { return counters[id].kind == IGPROF_COUNTER_SUM; }

/* The (parent, pc) -> node index. Sibling lists alone made a lookup scan
 * every child of a busy node (a compiler's allocation sites number in the
 * hundreds under one caller); a hash of lock-free chains keeps it to a few
 * compares. 2^18 buckets of 8 bytes, mmap'd on first use and touched only
 * where nodes land, so a small process pays a few pages. */
#define INDEX_BITS 18

static _Atomic(struct igprof_node *) *_Atomic index_buckets;

static _Atomic(struct igprof_node *) *index_get(void)
{
  _Atomic(struct igprof_node *) *b = atomic_load_explicit(&index_buckets, memory_order_acquire);
  if (IGPROF_LIKELY(b)) return b;
  size_t bytes = sizeof *b << INDEX_BITS;
  _Atomic(struct igprof_node *) *fresh = igprof_pages_alloc(bytes);
  if (!fresh) return NULL;
  if (atomic_compare_exchange_strong(&index_buckets, &b, fresh)) return fresh;
  igprof_pages_free(fresh, bytes);
  return b;
}

static inline size_t index_slot(const struct igprof_node *parent, uintptr_t pc)
{
  uint64_t h = (uint64_t) (uintptr_t) parent * 0x9e3779b97f4a7c15ull ^ (uint64_t) pc * 0xc2b2ae3d27d4eb4full;
  return (size_t) (h >> (64 - INDEX_BITS));
}

/* Find or create parent's child for pc. The index chain decides who
 * creates a node; the winner then links it into the parent's child list
 * (which only the dump and the fork reset walk). */
#define SHORT_LIST 8

static struct igprof_node *child_indexed(struct igprof_node *parent, uintptr_t pc);

static inline __attribute__((always_inline)) struct igprof_node *child(struct igprof_node *parent, uintptr_t pc)
{
  /* Most nodes have a few children, recently touched and in cache: look
   * there first and go to the (cache-missing) index only for a long list
   * or to create. Creation always goes through the index, which is what
   * keeps two threads from adding the same child. */
  int k = 0;
  struct igprof_node *c = atomic_load_explicit(&parent->children, memory_order_acquire);
  for (; c && k < SHORT_LIST; c = c->sibling, ++k)
    if (c->pc == pc) return c;
  return child_indexed(parent, pc);
}

static __attribute__((noinline)) struct igprof_node *child_indexed(struct igprof_node *parent, uintptr_t pc)
{
  struct igprof_node *c;
  _Atomic(struct igprof_node *) *buckets = index_get();
  if (!buckets) return NULL;
  _Atomic(struct igprof_node *) *bucket = &buckets[index_slot(parent, pc)];
  struct igprof_node *head = atomic_load_explicit(bucket, memory_order_acquire);
  for (c = head; c; c = c->hash_next)
    if (c->pc == pc && c->parent == parent) return c;
  struct igprof_node *fresh = igprof_arena_alloc_lines(sizeof *fresh);
  if (!fresh) return NULL;
  fresh->pc = pc;
  fresh->parent = parent;
  for (;;) {
    fresh->hash_next = head;
    if (atomic_compare_exchange_weak_explicit(bucket, &head, fresh, memory_order_release, memory_order_acquire))
      break;
    /* Someone else inserted: only the part ahead of our old head is new. */
    for (struct igprof_node *c = head; c && c != fresh->hash_next; c = c->hash_next)
      if (c->pc == pc && c->parent == parent) return c; /* fresh is abandoned in the arena */
  }
  atomic_fetch_add_explicit(&node_count, 1, memory_order_relaxed); /* before it can be seen */
  struct igprof_node *first = atomic_load_explicit(&parent->children, memory_order_acquire);
  do fresh->sibling = first;
  while (!atomic_compare_exchange_weak_explicit(&parent->children, &first, fresh, memory_order_release,
                                                memory_order_acquire));
  return fresh;
}

struct igprof_node *igprof_tree_push(const uintptr_t *pcs, int n, int truncated)
{
  struct igprof_thread *t = &igprof_tls;
  int total = n + (truncated ? 1 : 0);
  int i = 0;
  struct igprof_node *node = &root;

  /* Frame i counted from the outside: the truncation marker, then pcs[n-1]. */
#define FRAME(i) (truncated ? ((i) == 0 ? IGPROF_PC_TRUNCATED : pcs[n - (i)]) : pcs[n - 1 - (i)])
  /* The part shared with the last stack pushed: a plain compare of two
   * arrays, one read forwards and one backwards (most of a push's work
   * when only the innermost frames differ). */
  int shared = total < t->cache_depth ? total : t->cache_depth;
  if (truncated && shared > 0 && t->cache_pcs[0] != IGPROF_PC_TRUNCATED) shared = 0;
  if (truncated && shared > 0) i = 1;
  {
    const uintptr_t *cached = t->cache_pcs, *frame = pcs + (n - 1) - (i - (truncated ? 1 : 0));
    /* Four frames a step while all four match, then one at a time. */
    while (i + 4 <= shared && ((cached[i] ^ frame[0]) | (cached[i + 1] ^ frame[-1]) |
                               (cached[i + 2] ^ frame[-2]) | (cached[i + 3] ^ frame[-3])) == 0) {
      i += 4;
      frame -= 4;
    }
    while (i < shared && cached[i] == *frame) {
      ++i;
      --frame;
    }
  }
  if (i > 0) node = t->cache_nodes[i - 1];
  if (i == 0 && truncated) {
    node = child(node, IGPROF_PC_TRUNCATED);
    if (!node) {
      t->cache_depth = 0;
      return NULL;
    }
    t->cache_pcs[0] = IGPROF_PC_TRUNCATED;
    t->cache_nodes[0] = node;
    i = 1;
  }
#undef FRAME
  /* The frames not shared, from pcs[n - 1 - (i - truncated)] inwards:
   * no test for the marker per frame. */
  for (const uintptr_t *frame = pcs + (n - 1) - (i - (truncated ? 1 : 0)); i < total; ++i, --frame) {
    uintptr_t pc = *frame;
    node = child(node, pc);
    if (!node) {
      t->cache_depth = i;
      return NULL;
    }
    t->cache_pcs[i] = pc;
    t->cache_nodes[i] = node;
  }
  t->cache_depth = total;
  return node;
}

struct igprof_node *igprof_capture_from_hook(void *caller_ret, const void *frame)
{
  struct igprof_thread *t = &igprof_tls;
  int truncated = 0;
  if (IGPROF_UNLIKELY(!t->ready) && igprof_thread_prepare() != 0) return NULL;
  int n = igprof_walk_from_hook_frame(t->walk_pcs, igprof_config.depth, caller_ret, frame, &truncated);
  return igprof_tree_push(t->walk_pcs, n, truncated);
}

struct igprof_node *igprof_capture_synthetic(uintptr_t pc)
{
  if (IGPROF_UNLIKELY(!igprof_tls.ready) && igprof_thread_prepare() != 0) return NULL;
  return igprof_tree_push(&pc, 1, 0);
}

struct igprof_node *igprof_capture_from_signal(const void *uc)
{
  struct igprof_thread *t = &igprof_tls;
  int truncated = 0;
  if (IGPROF_UNLIKELY(!t->ready)) return NULL; /* buffers are set up outside signal context */
  int n = igprof_walk_from_signal(t->walk_pcs, igprof_config.depth, uc, &truncated);
  return igprof_tree_push(t->walk_pcs, n, truncated);
}

/* Iterative pre-order walk; the tree may be deeper than any C stack. */
void igprof_tree_foreach(void (*fn)(void *arg, struct igprof_node *n), void *arg)
{
  struct igprof_node *n = atomic_load(&root.children);
  while (n) {
    fn(arg, n);
    struct igprof_node *next = atomic_load(&n->children);
    if (!next) {
      while (n && !n->sibling) n = n->parent == &root ? NULL : n->parent;
      next = n ? n->sibling : NULL;
    }
    n = next;
  }
}

static void reset_node(void *arg, struct igprof_node *n)
{
  uint32_t mask = *(const uint32_t *) arg;
  struct igprof_counter_value *c = atomic_load(&n->counters);
  if (c)
    for (int i = 0; i < counter_count; ++i) {
      if (!(mask & (1u << i))) continue;
      atomic_store(&c[igprof_counter_slots[i]].ticks, 0);
      atomic_store(&c[igprof_counter_slots[i]].value, 0);
      atomic_store(&c[igprof_counter_slots[i]].peak, 0);
    }
}

void igprof_tree_reset_counters(uint32_t mask) { igprof_tree_foreach(reset_node, &mask); }
