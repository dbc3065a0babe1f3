/* The live table: address -> (node, size) for every block still allocated,
 * the source of MEM_LIVE's frees and of the ;LK leak lists.
 *
 * Split into 256 shards by address hash, each an open-addressed table with
 * linear probing and backward-shift deletion (no tombstones, so lookups stay
 * short however many blocks come and go) behind its own spinlock. A malloc
 * and a free on different threads meet on one shard only if their addresses
 * hash together; growing enlarges one shard under its own lock while the
 * other 255 carry on, so there is never a stop-the-world rehash.
 */
#include "internal.h"
#include "spinlock.h"

#include <string.h>

#define SHARD_BITS 8
#define SHARD_COUNT (1u << SHARD_BITS)
#define SHARD_INITIAL 64u

/* An entry is 12 bytes. A program with millions of small live blocks
 * (python3 with PYTHONMALLOC=malloc: 2.5 million at its peak) spends most
 * of the profiler's memory here. Its first 8 bytes are the block's address
 * as a key (KEY_BITS bits; on 64-bit machines the address over 8, which
 * takes addresses below 2^48 that malloc's alignment keeps a multiple of 8)
 * with the size above it; the last 4 the node, as its distance in cache
 * lines from NODE_BASE (nodes are cache-line aligned, arena.c). A record
 * that does not fit takes the wide table below: a block of SIZE_WIDE bytes
 * or more, or a node elsewhere (the tree's root, or more than 128 GiB from
 * the runtime's own data), keeps an entry with SIZE_WIDE as its size; an
 * address that is no key (above 2^48, or not a multiple of 8) has no
 * entry at all. An empty slot is all zero: no block is at address 0. */
#if UINTPTR_MAX > 0xffffffffu
#define KEY_SHIFT 3
#define KEY_BITS 45
/* The nodes 32 bits of lines reach: 128 GiB on either side of the
 * runtime's own data (arena chunks are mappings, placed near it; the
 * arithmetic wraps, so any base works). An address of the link, no load. */
static char node_anchor __attribute__((aligned(IGPROF_CACHE_LINE)));
#define NODE_BASE ((uintptr_t) &node_anchor - ((uintptr_t) 1 << 37))
#else
#define KEY_SHIFT 0
#define KEY_BITS 32
#define NODE_BASE ((uintptr_t) 0)
#endif
#define KEY_MASK ((UINT64_C(1) << KEY_BITS) - 1)
#define NODE_ALIGN_BITS 6
_Static_assert(IGPROF_CACHE_LINE == 1 << NODE_ALIGN_BITS, "nodes are cache-line aligned");
#define SIZE_WIDE ((UINT64_C(1) << (64 - KEY_BITS)) - 1)

struct live_entry {
  uint32_t word[2]; /* key | size << KEY_BITS; 0 = empty */
  uint32_t node;    /* lines from NODE_BASE */
};
_Static_assert(sizeof(struct live_entry) == 12, "entries are 12 bytes");

static inline uint64_t entry_word(const struct live_entry *e)
{
  uint64_t w;
  memcpy(&w, e->word, sizeof w);
  return w;
}

static inline uint64_t entry_key(const struct live_entry *e) { return entry_word(e) & KEY_MASK; }

static inline void entry_clear(struct live_entry *e) { memset(e->word, 0, sizeof e->word); }

/* The key of addr, or 0 if addr is no key (its record is wide only). */
static inline uint64_t key_of(uintptr_t addr)
{
  uint64_t a = (uint64_t) addr;
  if (IGPROF_UNLIKELY((a & ((UINT64_C(1) << KEY_SHIFT) - 1)) != 0 || (a >> KEY_SHIFT) >> KEY_BITS != 0)) return 0;
  return a >> KEY_SHIFT;
}

static inline uintptr_t key_addr(uint64_t key) { return (uintptr_t) (key << KEY_SHIFT); }

static inline int node_packable(const struct igprof_node *node)
{
  uint64_t d = (uint64_t) ((uintptr_t) node - NODE_BASE);
  return (d & ((1u << NODE_ALIGN_BITS) - 1)) == 0 && d >> (32 + NODE_ALIGN_BITS) == 0;
}

static inline uint32_t node_lines(const struct igprof_node *node)
{
  return (uint32_t) (((uintptr_t) node - NODE_BASE) >> NODE_ALIGN_BITS);
}

static inline struct igprof_node *lines_node(uint32_t lines)
{
  return (struct igprof_node *) (NODE_BASE + ((uintptr_t) lines << NODE_ALIGN_BITS));
}

static inline void entry_set(struct live_entry *e, uint64_t key, uint64_t size, uint32_t node)
{
  uint64_t w = key | size << KEY_BITS;
  memcpy(e->word, &w, sizeof w);
  e->node = node;
}

/* The wide table: the full records of the few blocks whose entry says
 * SIZE_WIDE (blocks of 512 KiB and more on 64-bit machines) and of those
 * whose address is no key. One table behind one lock, taken with the
 * block's shard held if it has one (shard, then wide). Open addressing,
 * linear probing, backward-shift deletion, as the shards. */
struct wide_entry {
  uintptr_t addr; /* 0 = empty */
  struct igprof_node *node;
  uint64_t size;
  int64_t birth; /* a keyless record's (the others' are in their shard) */
};

static struct {
  atomic_flag lock;
  uint32_t mask, count; /* mask: capacity - 1, 0 before the first insert */
  uint32_t keyless;     /* records whose address is no key (no shard entry) */
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
static int wide_put(uintptr_t addr, struct igprof_node *node, uint64_t size, int64_t birth)
{
  int locked = wide_lock(), rc = 0;
  if ((wide.count + 1) * 2 > wide.mask + 1 && wide_grow() != 0) {
    rc = -1;
  } else {
    uint32_t i = wide_slot(wide.slots, wide.mask, addr);
    if (!wide.slots[i].addr) {
      wide.count++;
      wide.keyless += !key_of(addr);
    }
    wide.slots[i] = (struct wide_entry){addr, node, size, birth};
  }
  wide_unlock(locked);
  return rc;
}

/* addr's full record, taken out of the table if `take`; its birth too if
 * `birth` is not NULL. */
static int wide_get(uintptr_t addr, struct igprof_node **node, uint64_t *size, int64_t *birth, int take)
{
  int locked = wide_lock(), found = 0;
  if (wide.mask) {
    struct wide_entry *slots = wide.slots;
    uint32_t mask = wide.mask, hole = wide_slot(slots, mask, addr);
    if (slots[hole].addr) {
      found = 1;
      *node = slots[hole].node;
      *size = slots[hole].size;
      if (birth) *birth = slots[hole].birth;
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
      wide.keyless -= !key_of(addr);
    }
  }
  wide_unlock(locked);
  return found;
}

/* The record an entry stands for (its shard held). */
static inline void entry_record(const struct live_entry *e, struct igprof_node **node, uint64_t *size, int take)
{
  uint64_t w = entry_word(e);
  if (IGPROF_LIKELY(w >> KEY_BITS != SIZE_WIDE)) {
    *node = lines_node(e->node);
    *size = w >> KEY_BITS;
  } else if (!wide_get(key_addr(w & KEY_MASK), node, size, NULL, take)) {
    *node = NULL; /* not reached: a wide entry's record is put first */
    *size = 0;
  }
}

/* With --lifetimes each block's allocation time sits in `births`, beside
 * `slots` (same index): without it, entries stay 12 bytes, so the probes
 * of plain -mp read as few cache lines as before. */
struct live_shard {
  atomic_flag lock;
  uint32_t cap;    /* entries; 0 before the first insert */
  uint32_t count;
  struct live_entry *slots;
  int64_t *births; /* NULL without igprof_live_keep_births */
} __attribute__((aligned(64)));

static int keep_births;

void igprof_live_keep_births(void) { keep_births = 1; }

static struct live_shard shards[SHARD_COUNT];

/* Blocks allocated one after the other sit next to each other, and with
 * millions of live blocks every random probe into the shards is a cache
 * miss. So the hash keeps locality inside a region of 1 KiB: the region
 * picks the shard and a pseudo-random base slot, the offset in the region
 * (in 16 bytes) is added to it, and neighbouring blocks land in
 * neighbouring slots (the same cache lines). Small regions, not pages: a
 * run of densely packed blocks is then at most 64 slots, which bounds what
 * a removal shifts, and the runs of different regions overlap little
 * while a shard is four fifths full (with pages, 32-byte blocks made runs
 * of 512 at two thirds full; live-size in tests/profiler/unit.c).
 * h = mixed region bits, with the offset in the region in the low bits. */
#define REGION_SHIFT 10
#define REGION_OFF ((1u << (REGION_SHIFT - 4)) - 1)
static inline uint64_t hash_addr(uintptr_t addr)
{
  uint64_t region = (uint64_t) (addr >> REGION_SHIFT) * 0x9e3779b97f4a7c15ull;
  return (region & ~(uint64_t) 0xff) | ((addr >> 4) & REGION_OFF);
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

/* A shard's capacity is any number of entries (it grows by a quarter, see
 * shard_grow), so the region's base slot is its 32 hash bits scaled to the
 * capacity (a multiply, no division), and the offset wraps round. */
static inline uint32_t slot_of(uint64_t h, uint32_t cap)
{
  uint32_t i = (uint32_t) (((uint64_t) (uint32_t) (h >> 24) * cap) >> 32) + (uint32_t) (h & 0xff);
  if (IGPROF_UNLIKELY(i >= cap)) i = i - cap < cap ? i - cap : i % cap;
  return i;
}

static inline uint32_t next_slot(uint32_t i, uint32_t cap) { return i + 1 == cap ? 0 : i + 1; }

static void place(struct live_entry *slots, int64_t *births, uint32_t cap, const struct live_entry *e, int64_t birth)
{
  uint32_t i = slot_of(hash_addr(key_addr(entry_key(e))), cap);
  while (entry_word(&slots[i])) i = next_slot(i, cap);
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
  /* A grown table takes every entry of the one before it (two fifths of
   * its slots or more), spread over the whole table: each of its pages is
   * written at once. */
  return cap == SHARD_INITIAL ? initial_part(initial, entry, s) : igprof_pages_alloc_filled(entry * cap);
}

static void free_table(struct live_shard *s)
{
  uint32_t cap = s->cap;
  if (s->slots && cap != SHARD_INITIAL) igprof_pages_free(s->slots, sizeof *s->slots * cap);
  if (s->births && cap != SHARD_INITIAL) igprof_pages_free(s->births, sizeof *s->births * cap);
}

/* Most entries are in a shard while it is full between three fifths and
 * four fifths: small shards double (cheap, and a short process makes
 * many), big ones grow by a quarter, each step a new table that takes
 * whole pages, so the table stays near 12 bytes / 0.7 a live block
 * (python3's 2.5 million: 43 MB, where doubling tables of 16 bytes took
 * 64 MB). A block moves about four times on its way to a big shard;
 * the shard's other 255 neighbours carry on meanwhile. */
#define GROW_DOUBLING 4096u
#define LOAD_MAX_NUM 4u /* grow past 4/5 full */
#define LOAD_MAX_DEN 5u

static inline int shard_full(const struct live_shard *s)
{
  return (uint64_t) (s->count + 1) * LOAD_MAX_DEN > (uint64_t) s->cap * LOAD_MAX_NUM;
}

/* Enlarge the shard (or create it). Returns -1 if no memory: the block then
 * goes unrecorded rather than the application failing. */
static int shard_grow(struct live_shard *s)
{
  uint32_t old = s->cap, cap;
  if (!old) cap = SHARD_INITIAL;
  else if (old < GROW_DOUBLING) cap = old * 2;
  else if (old > UINT32_MAX / 5 * 4) return -1;
  else cap = old + old / 4;
  struct live_entry *fresh = table_alloc(&initial_tables, sizeof *fresh, cap, s);
  int64_t *births = keep_births ? table_alloc(&initial_births, sizeof *births, cap, s) : NULL;
  if (!fresh || (keep_births && !births)) {
    if (fresh && cap != SHARD_INITIAL) igprof_pages_free(fresh, sizeof *fresh * cap);
    return -1;
  }
  for (uint32_t i = 0; i < old; ++i)
    if (entry_word(&s->slots[i])) place(fresh, births, cap, &s->slots[i], s->births ? s->births[i] : 0);
  free_table(s);
  s->slots = fresh;
  s->births = births;
  s->cap = cap;
  return 0;
}

/* The slot a block's insert will probe first, asked for ahead of it: the
 * memory hooks call this before the stack walk, so the cache miss on the
 * table (one per insert: blocks land all over it) overlaps the walk. Only
 * a hint: it reads the shard without its lock (a racing grow may leave it
 * pointing at old slots, which a prefetch cannot fault on: it may point
 * past them, which a prefetch ignores). */
void igprof_live_prefetch(uintptr_t addr)
{
  uint64_t h = hash_addr(addr);
  struct live_shard *s = shard_of(h);
  struct live_entry *slots = __atomic_load_n(&s->slots, __ATOMIC_RELAXED);
  uint32_t cap = __atomic_load_n(&s->cap, __ATOMIC_RELAXED);
  if (slots && cap) __builtin_prefetch(&slots[slot_of(h, cap)], 1);
}

/* Insert and remove, with or without the births (a constant in each of
 * the functions below: plain -mp pays no test for them). */
static inline __attribute__((always_inline)) void insert(uintptr_t addr, struct igprof_node *node, uint64_t size,
                                                         int64_t birth, const int born)
{
  uint64_t key = key_of(addr);
  if (IGPROF_UNLIKELY(!key)) {
    /* No entry: the full record only, with its birth. */
    if (addr) wide_put(addr, node, size, born ? birth : 0);
    return;
  }
  uint64_t h = hash_addr(addr);
  struct live_shard *s = shard_of(h);
  int locked = shard_lock(s);
  if (shard_full(s)) { /* also before the first insert (capacity 0) */
    if (shard_grow(s) != 0) { shard_unlock(s, locked); return; }
  }
  uint32_t cap = s->cap, i = slot_of(h, cap), probes = 0;
  struct live_entry *slots = s->slots;
  for (uint64_t w; (w = entry_word(&slots[i])) && (w & KEY_MASK) != key;) {
    i = next_slot(i, cap);
    /* Locality means runs: a run this long in a table that is not nearly
     * empty means regions overlap too much, and growing spreads them
     * apart (one region's own blocks make a run of at most 64 however
     * big the table: hence the load condition, so it cannot grow on and on). */
    if (++probes == 512 && (uint64_t) s->count * 8 > cap && shard_grow(s) == 0) {
      cap = s->cap;
      slots = s->slots;
      i = slot_of(h, cap);
      probes = 0;
    }
  }
  /* An address already present means its free was never seen (e.g. freed
   * through a path we do not hook): the newer block replaces it. */
  uint64_t old = entry_word(&slots[i]);
  int present = old != 0;
  if (IGPROF_LIKELY(size < SIZE_WIDE && node_packable(node))) {
    if (IGPROF_UNLIKELY(old >> KEY_BITS == SIZE_WIDE)) { /* an empty slot's is 0 */
      struct igprof_node *old_node;
      uint64_t old_size;
      wide_get(addr, &old_node, &old_size, NULL, 1);
    }
    entry_set(&slots[i], key, size, node_lines(node));
  } else {
    if (wide_put(addr, node, size, 0) != 0) { shard_unlock(s, locked); return; }
    entry_set(&slots[i], key, SIZE_WIDE, 0);
  }
  s->count += !present;
  if (born) s->births[i] = birth;
  shard_unlock(s, locked);
}

static inline __attribute__((always_inline)) int remove_entry(uintptr_t addr, struct igprof_node **node,
                                                              uint64_t *size, int64_t *birth, const int born)
{
  uint64_t key = key_of(addr);
  if (IGPROF_UNLIKELY(!key)) {
    if (!addr || !__atomic_load_n(&wide.keyless, __ATOMIC_RELAXED)) return 0;
    return wide_get(addr, node, size, born ? birth : NULL, 1);
  }
  uint64_t h = hash_addr(addr);
  struct live_shard *s = shard_of(h);
  int locked = shard_lock(s);
  if (!s->cap) { shard_unlock(s, locked); return 0; }
  /* Locals: a store into births (int64_t) may alias an entry for the
   * compiler, which would then read the shard's pointers again. */
  uint32_t cap = s->cap, i = slot_of(h, cap);
  struct live_entry *slots = s->slots;
  for (uint64_t w; ((w = entry_word(&slots[i])) & KEY_MASK) != key;) {
    if (!w) { shard_unlock(s, locked); return 0; }
    i = next_slot(i, cap);
  }
  int64_t *births = born ? s->births : NULL;
  entry_record(&slots[i], node, size, 1);
  if (born) *birth = births[i];
  /* Backward-shift deletion: pull later members of the probe run into the
   * hole when their home slot does not lie cyclically within (hole, j]. */
  uint32_t hole = i, j = i;
  for (;;) {
    j = next_slot(j, cap);
    uint64_t w = entry_word(&slots[j]);
    if (!w) break;
    uint32_t home = slot_of(hash_addr(key_addr(w & KEY_MASK)), cap);
    if (shift_movable(hole, j, home)) {
      slots[hole] = slots[j];
      if (born) births[hole] = births[j];
      hole = j;
    }
  }
  entry_clear(&slots[hole]);
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
 * never inserted and most shards are empty: this test is all they cost.
 * An address that is no key has no shard: remove_born asks the wide table. */
int igprof_live_remove_born(uintptr_t addr, struct igprof_node **node, uint64_t *size, int64_t *birth)
{
  if (key_of(addr) && !__atomic_load_n(&shard_of(hash_addr(addr))->count, __ATOMIC_RELAXED)) return 0;
  return remove_born(addr, node, size, birth);
}

void igprof_live_foreach(void (*fn)(void *arg, uintptr_t addr, struct igprof_node *node, uint64_t size),
                         void *arg)
{
  for (unsigned k = 0; k < SHARD_COUNT; ++k) {
    struct live_shard *s = &shards[k];
    lock_always(s);
    if (s->count)
      for (uint32_t i = 0; i < s->cap; ++i)
        if (entry_word(&s->slots[i])) {
          struct igprof_node *node;
          uint64_t size;
          entry_record(&s->slots[i], &node, &size, 0);
          fn(arg, key_addr(entry_key(&s->slots[i])), node, size);
        }
    unlock_always(s);
  }
  /* The records without an entry. */
  igprof_spin_lock(&wide.lock);
  for (uint32_t i = 0; wide.keyless && wide.mask && i <= wide.mask; ++i)
    if (wide.slots[i].addr && !key_of(wide.slots[i].addr))
      fn(arg, wide.slots[i].addr, wide.slots[i].node, wide.slots[i].size);
  igprof_spin_unlock(&wide.lock);
}

uint64_t igprof_live_count(void)
{
  uint64_t n = __atomic_load_n(&wide.keyless, __ATOMIC_RELAXED);
  for (unsigned k = 0; k < SHARD_COUNT; ++k) n += __atomic_load_n(&shards[k].count, __ATOMIC_RELAXED);
  return n;
}

uint64_t igprof_live_table_bytes(void)
{
  uint64_t bytes = 0;
  for (unsigned k = 0; k < SHARD_COUNT; ++k) {
    uint64_t cap = __atomic_load_n(&shards[k].cap, __ATOMIC_RELAXED);
    bytes += cap * (sizeof(struct live_entry) + (keep_births ? sizeof(int64_t) : 0));
  }
  return bytes + (uint64_t) (wide.mask ? wide.mask + 1 : 0) * sizeof(struct wide_entry);
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
    s->cap = 0;
    s->count = 0;
    unlock_always(s);
  }
  if (wide.slots) igprof_pages_free(wide.slots, sizeof *wide.slots * (wide.mask + 1));
  wide.slots = NULL;
  wide.mask = wide.count = wide.keyless = 0;
  igprof_spin_unlock(&wide.lock);
}
