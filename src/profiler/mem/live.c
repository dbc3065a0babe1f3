/* The live table: address -> (node, size) for every block still allocated,
 * the source of MEM_LIVE's frees and of the ;LK leak lists.
 *
 * Split into 256 shards by address hash, each an open-addressed table with
 * linear probing and backward-shift deletion (no tombstones, so lookups stay
 * short however many blocks come and go) behind its own spinlock. A malloc
 * and a free on different threads meet on one shard only if their addresses
 * hash together; growing doubles one shard under its own lock while the
 * other 255 carry on, so there is never a stop-the-world rehash.
 */
#include "internal.h"
#include "spinlock.h"

#include <string.h>

#define SHARD_BITS 8
#define SHARD_COUNT (1u << SHARD_BITS)
#define SHARD_INITIAL 64u

/* An entry is two words, not three: the node and the size share one. A
 * program with millions of small live blocks (python3 with
 * PYTHONMALLOC=malloc: 2.5 million at its peak) spends most of the
 * profiler's memory here. Nodes are cache-line aligned (arena.c) and lie
 * below 2^48: the node's address over 64 takes the low NODE_BITS bits, the
 * size the others. A record that does not fit (a block of SIZE_WIDE bytes
 * or more, a node elsewhere: the tree's root) keeps SIZE_WIDE as its size
 * and lives in full in the wide table below. */
#if UINTPTR_MAX > 0xffffffffu
#define NODE_BITS 42
#else
#define NODE_BITS 26
#endif
#define NODE_ALIGN_BITS 6
_Static_assert(IGPROF_CACHE_LINE == 1 << NODE_ALIGN_BITS, "nodes are cache-line aligned");
#define SIZE_WIDE ((UINT64_C(1) << (64 - NODE_BITS)) - 1)

struct live_entry {
  uintptr_t addr; /* 0 = empty */
  uint64_t word;  /* packed (node, size) */
};

static inline int packable(const struct igprof_node *node, uint64_t size)
{
  uint64_t n = (uint64_t) (uintptr_t) node;
  return size < SIZE_WIDE && (n & ((1u << NODE_ALIGN_BITS) - 1)) == 0 && n >> (NODE_BITS + NODE_ALIGN_BITS) == 0;
}

static inline uint64_t pack(const struct igprof_node *node, uint64_t size)
{
  return (uint64_t) (uintptr_t) node >> NODE_ALIGN_BITS | size << NODE_BITS;
}

static inline uint64_t word_size(uint64_t word) { return word >> NODE_BITS; }

static inline struct igprof_node *word_node(uint64_t word)
{
  return (struct igprof_node *) (uintptr_t) ((word & ((UINT64_C(1) << NODE_BITS) - 1)) << NODE_ALIGN_BITS);
}

#define WORD_WIDE (SIZE_WIDE << NODE_BITS)

/* The wide table: the full records of the few blocks whose entry says
 * SIZE_WIDE (blocks of 4 MiB and more on 64-bit machines). One table behind
 * one lock, always taken with the block's shard held (shard, then wide).
 * Open addressing, linear probing, backward-shift deletion, as the shards. */
struct wide_entry {
  uintptr_t addr; /* 0 = empty */
  struct igprof_node *node;
  uint64_t size;
};

static struct {
  atomic_flag lock;
  uint32_t mask, count; /* mask: capacity - 1, 0 before the first insert */
  struct wide_entry *slots;
} wide;

#define WIDE_INITIAL 16u

/* Backward-shift deletion: the entry at j, whose home slot is `home`, moves
 * into the hole unless its home lies cyclically within (hole, j]. */
static inline int shift_movable(uint32_t hole, uint32_t j, uint32_t home)
{
  return hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
}

static inline uint32_t wide_home(uintptr_t addr, uint32_t mask)
{
  return (uint32_t) (((uint64_t) addr * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

static inline int wide_lock(void)
{
  if (igprof_one_thread()) return 0;
  igprof_spin_lock(&wide.lock);
  return 1;
}

static inline void wide_unlock(int locked)
{
  if (locked) igprof_spin_unlock(&wide.lock);
}

/* The slot of addr, or of the empty slot that ends its probe run. */
static uint32_t wide_slot(const struct wide_entry *slots, uint32_t mask, uintptr_t addr)
{
  uint32_t i = wide_home(addr, mask);
  while (slots[i].addr && slots[i].addr != addr) i = (i + 1) & mask;
  return i;
}

static int wide_grow(void)
{
  uint32_t cap = wide.mask ? (wide.mask + 1) * 2 : WIDE_INITIAL;
  struct wide_entry *fresh = igprof_pages_alloc(sizeof *fresh * cap);
  if (!fresh) return -1;
  for (uint32_t i = 0; wide.mask && i <= wide.mask; ++i)
    if (wide.slots[i].addr) fresh[wide_slot(fresh, cap - 1, wide.slots[i].addr)] = wide.slots[i];
  if (wide.slots) igprof_pages_free(wide.slots, sizeof *wide.slots * (wide.mask + 1));
  wide.slots = fresh;
  wide.mask = cap - 1;
  return 0;
}

/* Record (or replace) addr's full record. Returns -1 if no memory. */
static int wide_put(uintptr_t addr, struct igprof_node *node, uint64_t size)
{
  int locked = wide_lock(), rc = 0;
  if ((wide.count + 1) * 2 > wide.mask + 1 && wide_grow() != 0) {
    rc = -1;
  } else {
    uint32_t i = wide_slot(wide.slots, wide.mask, addr);
    if (!wide.slots[i].addr) wide.count++;
    wide.slots[i] = (struct wide_entry){addr, node, size};
  }
  wide_unlock(locked);
  return rc;
}

/* addr's full record, taken out of the table if `take`. */
static int wide_get(uintptr_t addr, struct igprof_node **node, uint64_t *size, int take)
{
  int locked = wide_lock(), found = 0;
  if (wide.mask) {
    struct wide_entry *slots = wide.slots;
    uint32_t mask = wide.mask, hole = wide_slot(slots, mask, addr);
    if (slots[hole].addr) {
      found = 1;
      *node = slots[hole].node;
      *size = slots[hole].size;
    }
    if (found && take) {
      for (uint32_t j = hole;;) {
        j = (j + 1) & mask;
        if (!slots[j].addr) break;
        uint32_t home = wide_home(slots[j].addr, mask);
        if (shift_movable(hole, j, home)) {
          slots[hole] = slots[j];
          hole = j;
        }
      }
      slots[hole].addr = 0;
      wide.count--;
    }
  }
  wide_unlock(locked);
  return found;
}

/* The record an entry stands for (its shard held). */
static inline void entry_record(const struct live_entry *e, struct igprof_node **node, uint64_t *size, int take)
{
  if (IGPROF_LIKELY(e->word != WORD_WIDE)) {
    *node = word_node(e->word);
    *size = word_size(e->word);
  } else if (!wide_get(e->addr, node, size, take)) {
    *node = NULL; /* not reached: a wide entry's record is put first */
    *size = 0;
  }
}

/* With --lifetimes each block's allocation time sits in `births`, beside
 * `slots` (same index): without it, entries stay three words, so the
 * probes of plain -mp read as few cache lines as before. */
struct live_shard {
  atomic_flag lock;
  uint32_t mask;   /* capacity - 1, 0 before the first insert */
  uint32_t count;
  struct live_entry *slots;
  int64_t *births; /* NULL without igprof_live_keep_births */
} __attribute__((aligned(64)));

static int keep_births;

void igprof_live_keep_births(void) { keep_births = 1; }

static struct live_shard shards[SHARD_COUNT];

/* Blocks allocated one after the other sit next to each other, and with
 * millions of live blocks every random probe into the shards is a cache
 * miss. So the hash keeps locality inside a 4 KiB page: the page picks
 * the shard and a pseudo-random base slot, the offset in the page is
 * added to it, and neighbouring blocks land in neighbouring slots (the same
 * cache lines). Pages, not bigger regions: a run of densely packed blocks is
 * then at most 256 slots, which bounds what a removal shifts.
 * h = mixed page bits, with the 8-bit offset in the page in the low bits. */
static inline uint64_t hash_addr(uintptr_t addr)
{
  uint64_t region = (uint64_t) (addr >> 12) * 0x9e3779b97f4a7c15ull;
  return (region & ~(uint64_t) 0xff) | ((addr >> 4) & 0xff);
}

static inline struct live_shard *shard_of(uint64_t h) { return &shards[h >> (64 - SHARD_BITS)]; }

/* With one thread (igprof_one_thread) nobody else can hold or want a shard:
 * the lock's locked exchange is skipped. fork's prepare/child/parent and the
 * dump lock unconditionally (lock_always). */
static void lock_always(struct live_shard *s) { igprof_spin_lock(&s->lock); }

static void unlock_always(struct live_shard *s) { igprof_spin_unlock(&s->lock); }

/* Returns whether it locked: pass that to shard_unlock. */
static inline int shard_lock(struct live_shard *s)
{
  if (igprof_one_thread()) return 0;
  lock_always(s);
  return 1;
}

static inline void shard_unlock(struct live_shard *s, int locked)
{
  if (locked) unlock_always(s);
}

static inline uint32_t slot_of(uint64_t h, uint32_t mask)
{
  return ((uint32_t) (h >> 24) + (uint32_t) (h & 0xff)) & mask;
}

static void place(struct live_entry *slots, int64_t *births, uint32_t mask, const struct live_entry *e, int64_t birth)
{
  uint32_t i = slot_of(hash_addr(e->addr), mask);
  while (slots[i].addr) i = (i + 1) & mask;
  slots[i] = *e;
  if (births) births[i] = birth;
}

/* The shards' first tables, SHARD_INITIAL entries each, side by side in
 * one mapping made on the first insert: one mmap for all of them, not one
 * per shard (a short process touches most shards with a few blocks each),
 * and a process with few live blocks has a small table to list at dump
 * time. Bigger tables are mappings of their own. The births' first arrays
 * alike. */
static void *_Atomic initial_tables, *_Atomic initial_births;

static void *initial_part(void *_Atomic *all_of, size_t entry, const struct live_shard *s)
{
  char *all = atomic_load_explicit(all_of, memory_order_acquire);
  if (!all) {
    size_t bytes = entry * SHARD_INITIAL * SHARD_COUNT;
    void *fresh = igprof_pages_alloc(bytes);
    if (!fresh) return NULL;
    void *expected = NULL;
    if (atomic_compare_exchange_strong(all_of, &expected, fresh)) all = fresh;
    else { igprof_pages_free(fresh, bytes); all = expected; }
  }
  char *t = all + (size_t) (s - shards) * SHARD_INITIAL * entry;
  memset(t, 0, entry * SHARD_INITIAL); /* a forked child's may hold the parent's blocks */
  return t;
}

static void *table_alloc(void *_Atomic *initial, size_t entry, uint32_t cap, const struct live_shard *s)
{
  return cap == SHARD_INITIAL ? initial_part(initial, entry, s) : igprof_pages_alloc(entry * cap);
}

static void free_table(struct live_shard *s)
{
  uint32_t cap = s->mask + 1;
  if (s->slots && cap != SHARD_INITIAL) igprof_pages_free(s->slots, sizeof *s->slots * cap);
  if (s->births && cap != SHARD_INITIAL) igprof_pages_free(s->births, sizeof *s->births * cap);
}

/* Double the shard (or create it). Returns -1 if no memory: the block then
 * goes unrecorded rather than the application failing. */
static int shard_grow(struct live_shard *s)
{
  uint32_t cap = s->mask ? (s->mask + 1) * 2 : SHARD_INITIAL;
  struct live_entry *fresh = table_alloc(&initial_tables, sizeof *fresh, cap, s);
  int64_t *births = keep_births ? table_alloc(&initial_births, sizeof *births, cap, s) : NULL;
  if (!fresh || (keep_births && !births)) {
    if (fresh && cap != SHARD_INITIAL) igprof_pages_free(fresh, sizeof *fresh * cap);
    return -1;
  }
  if (s->mask)
    for (uint32_t i = 0; i <= s->mask; ++i)
      if (s->slots[i].addr) place(fresh, births, cap - 1, &s->slots[i], s->births ? s->births[i] : 0);
  free_table(s);
  s->slots = fresh;
  s->births = births;
  s->mask = cap - 1;
  return 0;
}

/* The slot a block's insert will probe first, asked for ahead of it: the
 * memory hooks call this before the stack walk, so the cache miss on the
 * table (one per insert: blocks land all over it) overlaps the walk. Only
 * a hint: it reads the shard without its lock (a racing grow may leave it
 * pointing at old slots, which a prefetch cannot fault on). */
void igprof_live_prefetch(uintptr_t addr)
{
  uint64_t h = hash_addr(addr);
  struct live_shard *s = shard_of(h);
  struct live_entry *slots = __atomic_load_n(&s->slots, __ATOMIC_RELAXED);
  uint32_t mask = __atomic_load_n(&s->mask, __ATOMIC_RELAXED);
  if (slots) __builtin_prefetch(&slots[slot_of(h, mask)], 1);
}

/* Insert and remove, with or without the births (a constant in each of
 * the functions below: plain -mp pays no test for them). */
static inline __attribute__((always_inline)) void insert(uintptr_t addr, struct igprof_node *node, uint64_t size,
                                                         int64_t birth, const int born)
{
  uint64_t h = hash_addr(addr);
  struct live_shard *s = shard_of(h);
  int locked = shard_lock(s);
  if ((s->count + 1) * 4 > (s->mask + 1) * 3 || !s->mask) {
    if (shard_grow(s) != 0) { shard_unlock(s, locked); return; }
  }
  uint32_t i = slot_of(h, s->mask), probes = 0;
  while (s->slots[i].addr && s->slots[i].addr != addr) {
    i = (i + 1) & s->mask;
    /* Locality means runs: a run this long in a table that is not nearly
     * empty means regions overlap too much, and doubling spreads them
     * apart (one page's own blocks make a run of at most 256 however
     * big the table: hence the load condition, so it cannot grow on and on). */
    if (++probes == 512 && s->count * 8 > s->mask + 1 && shard_grow(s) == 0) {
      i = slot_of(h, s->mask);
      probes = 0;
    }
  }
  /* An address already present means its free was never seen (e.g. freed
   * through a path we do not hook): the newer block replaces it. */
  uint64_t word;
  if (IGPROF_LIKELY(packable(node, size))) {
    word = pack(node, size);
    if (IGPROF_UNLIKELY(s->slots[i].addr && s->slots[i].word == WORD_WIDE)) {
      struct igprof_node *old_node;
      uint64_t old_size;
      wide_get(addr, &old_node, &old_size, 1);
    }
  } else {
    word = WORD_WIDE;
    if (wide_put(addr, node, size) != 0) { shard_unlock(s, locked); return; }
  }
  if (!s->slots[i].addr) s->count++;
  s->slots[i] = (struct live_entry){addr, word};
  if (born) s->births[i] = birth;
  shard_unlock(s, locked);
}

static inline __attribute__((always_inline)) int remove_entry(uintptr_t addr, struct igprof_node **node,
                                                              uint64_t *size, int64_t *birth, const int born)
{
  uint64_t h = hash_addr(addr);
  struct live_shard *s = shard_of(h);
  int locked = shard_lock(s);
  if (!s->mask) { shard_unlock(s, locked); return 0; }
  uint32_t mask = s->mask, i = slot_of(h, mask);
  while (s->slots[i].addr != addr) {
    if (!s->slots[i].addr) { shard_unlock(s, locked); return 0; }
    i = (i + 1) & mask;
  }
  /* Locals: a store into births (int64_t) may alias an entry's size for
   * the compiler, which would then read the shard's pointers again. */
  struct live_entry *slots = s->slots;
  int64_t *births = born ? s->births : NULL;
  entry_record(&slots[i], node, size, 1);
  if (born) *birth = births[i];
  /* Backward-shift deletion: pull later members of the probe run into the
   * hole when their home slot does not lie cyclically within (hole, j]. */
  uint32_t hole = i, j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!slots[j].addr) break;
    uint32_t home = slot_of(hash_addr(slots[j].addr), mask);
    if (shift_movable(hole, j, home)) {
      slots[hole] = slots[j];
      if (born) births[hole] = births[j];
      hole = j;
    }
  }
  slots[hole].addr = 0;
  s->count--;
  shard_unlock(s, locked);
  return 1;
}

void igprof_live_insert(uintptr_t addr, struct igprof_node *node, uint64_t size) { insert(addr, node, size, 0, 0); }

void igprof_live_insert_born(uintptr_t addr, struct igprof_node *node, uint64_t size, int64_t birth)
{
  insert(addr, node, size, birth, 1);
}

int igprof_live_remove(uintptr_t addr, struct igprof_node **node, uint64_t *size)
{
  return remove_entry(addr, node, size, NULL, 0);
}

static __attribute__((noinline)) int remove_born(uintptr_t addr, struct igprof_node **node, uint64_t *size,
                                                 int64_t *birth)
{
  return remove_entry(addr, node, size, birth, 1);
}

/* An empty shard cannot hold the block, and that needs no lock: the
 * insert of a block happens before its free (the program passed the
 * address from one to the other), and while the block is in, the count is
 * never 0. With --sample (births: the weights) most frees are of blocks
 * never inserted and most shards are empty: this test is all they cost. */
int igprof_live_remove_born(uintptr_t addr, struct igprof_node **node, uint64_t *size, int64_t *birth)
{
  if (!__atomic_load_n(&shard_of(hash_addr(addr))->count, __ATOMIC_RELAXED)) return 0;
  return remove_born(addr, node, size, birth);
}

void igprof_live_foreach(void (*fn)(void *arg, uintptr_t addr, struct igprof_node *node, uint64_t size),
                         void *arg)
{
  for (unsigned k = 0; k < SHARD_COUNT; ++k) {
    struct live_shard *s = &shards[k];
    lock_always(s);
    if (s->count)
      for (uint32_t i = 0; i <= s->mask; ++i)
        if (s->slots[i].addr) {
          struct igprof_node *node;
          uint64_t size;
          entry_record(&s->slots[i], &node, &size, 0);
          fn(arg, s->slots[i].addr, node, size);
        }
    unlock_always(s);
  }
}

uint64_t igprof_live_count(void)
{
  uint64_t n = 0;
  for (unsigned k = 0; k < SHARD_COUNT; ++k) n += __atomic_load_n(&shards[k].count, __ATOMIC_RELAXED);
  return n;
}

void igprof_live_fork_prepare(void)
{
  for (unsigned k = 0; k < SHARD_COUNT; ++k) lock_always(&shards[k]);
  igprof_spin_lock(&wide.lock);
}

void igprof_live_fork_parent(void)
{
  igprof_spin_unlock(&wide.lock);
  for (unsigned k = 0; k < SHARD_COUNT; ++k) unlock_always(&shards[k]);
}

/* The child starts with an empty table: blocks inherited from the parent
 * are not the child's allocations, and their frees are ignored. */
void igprof_live_fork_child(void)
{
  for (unsigned k = 0; k < SHARD_COUNT; ++k) {
    struct live_shard *s = &shards[k];
    free_table(s);
    s->slots = NULL;
    s->births = NULL;
    s->mask = 0;
    s->count = 0;
    unlock_always(s);
  }
  if (wide.slots) igprof_pages_free(wide.slots, sizeof *wide.slots * (wide.mask + 1));
  wide.slots = NULL;
  wide.mask = wide.count = 0;
  igprof_spin_unlock(&wide.lock);
}
