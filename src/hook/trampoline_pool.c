#define _GNU_SOURCE
#include "trampoline_pool.h"

#include <errno.h>
#include <limits.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "proc_maps.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define CHUNK ((size_t)64 * 1024)
#define MAX_CHUNKS 512
/* A chunk this close to a target is used without looking for a closer gap. */
#define CLOSE_ENOUGH ((uintptr_t)256 << 20)
/* Lowest address we consider for a chunk (above vm.mmap_min_addr). */
#define LOWEST_ADDRESS ((uintptr_t)0x10000)
/* Top of the user address space, less a page: the power of two above the
 * initial stack, where the kernel puts it (AT_EXECFN points into its top).
 * 0x7ffffffff000 on x86_64 (47-bit), 2^48 - 4 KiB on AArch64 with 48-bit
 * virtual addresses, where libraries sit just under 2^48. */
static uintptr_t highest_address(void)
{
  static uintptr_t top;
  if (!top) {
    uintptr_t stack = (uintptr_t)getauxval(AT_EXECFN);
    if (!stack)
      stack = (uintptr_t)__builtin_frame_address(0);
    unsigned bits = 64 - (unsigned)__builtin_clzll((unsigned long long)stack);
    top = (uintptr_t)(((uint64_t)1 << bits) - 4096);
  }
  return top;
}
#define HIGHEST_ADDRESS highest_address()

struct chunk {
  uint8_t *write;
  uintptr_t exec;
  size_t used;
  int dual;        /* memfd double mapping (else one anonymous mapping) */
};

static struct chunk chunks[MAX_CHUNKS];
static int nchunks;
/* Chunks are MAP_SHARED: after fork the parent and the child would both write
 * into their free tails. A process that finds itself a new pid retires every
 * inherited chunk and allocates its own. */
static pid_t owner_pid;
static int refuse_near;

static int single_view;

/* Tests only: mappings that the gap search does not see (tramp_pool_hide). */
static const uintptr_t (*hidden)[2];
static int nhidden;

void tramp_pool_hide(const uintptr_t (*ranges)[2], int n)
{
  hidden = ranges;
  nhidden = n;
}

static int is_hidden(const struct maps_entry *e)
{
  for (int i = 0; i < nhidden; i++)
    if (e->start >= hidden[i][0] && e->end <= hidden[i][1])
      return 1;
  return 0;
}

void tramp_pool_refuse_near(int refuse) { refuse_near = refuse; }
void tramp_pool_single_view(int single) { single_view = single; }

int tramp_pool_contains(uintptr_t addr)
{
  for (int i = 0; i < nchunks; i++)
    if (addr >= chunks[i].exec && addr < chunks[i].exec + CHUNK)
      return 1;
  return 0;
}

/* Where a mapping failed with EEXIST although /proc/self/maps showed a gap:
 * a mapping created meanwhile, or one the file does not show (under
 * qemu-user, the emulator's own mappings share the address space and are
 * left out of the guest's file). The next search passes over them. */
#define MAX_TAKEN 32

struct gap_search {
  uintptr_t near;
  uintptr_t best;
  uintptr_t best_distance;
  int best_moves;
  const uintptr_t *taken;
  int ntaken;
};

static int is_taken(const struct gap_search *s, uintptr_t a)
{
  for (int i = 0; i < s->ntaken; i++)
    if (s->taken[i] == a)
      return 1;
  return 0;
}

static uintptr_t distance(uintptr_t a, uintptr_t b) { return a > b ? a - b : b - a; }

static void consider(void *arg, uintptr_t lo, uintptr_t hi)
{
  struct gap_search *s = arg;
  lo = (lo + 0xffff) & ~(uintptr_t)0xffff;
  if (lo < LOWEST_ADDRESS)
    lo = LOWEST_ADDRESS;
  if (hi > HIGHEST_ADDRESS)
    hi = HIGHEST_ADDRESS;
  hi &= ~(uintptr_t)0xffff;
  if (hi <= lo || hi - lo < CHUNK)
    return;
  /* The two ends of the gap; the one closer to the target wins. An end
   * found taken moves into the gap by 1, 3, 7, ... chunks, so a hidden
   * mapping is passed over in a few tries whatever its size; an end not yet
   * tried anywhere is preferred to one moved. */
  for (int i = 0; i < 2; i++) {
    uintptr_t step = CHUNK, c = i ? hi - CHUNK : lo;
    int moves = 0;
    while (is_taken(s, c)) {
      if (hi - lo - CHUNK < step)
        break;
      c = i ? hi - CHUNK - step : lo + step;
      step = 2 * step + CHUNK;
      moves++;
    }
    uintptr_t d = distance(c, s->near);
    if (arch_near_reachable(c, s->near, CHUNK) && !is_taken(s, c) &&
        (moves < s->best_moves || (moves == s->best_moves && d < s->best_distance))) {
      s->best = c;
      s->best_distance = d;
      s->best_moves = moves;
    }
  }
}

/* Each gap /proc/self/maps shows, the one above the last mapping too, as
 * fn(arg, lo, hi); a hidden mapping (tramp_pool_hide) counts as free. */
struct gap_walk {
  uintptr_t prev_end;
  void (*fn)(void *arg, uintptr_t lo, uintptr_t hi);
  void *arg;
};

static int visit_mapping(const struct maps_entry *e, void *arg)
{
  struct gap_walk *w = arg;
  if (is_hidden(e))
    return 0;
  if (e->start > w->prev_end)
    w->fn(w->arg, w->prev_end, e->start);
  if (e->end > w->prev_end)
    w->prev_end = e->end;
  return 0;
}

static int for_each_gap(void (*fn)(void *arg, uintptr_t lo, uintptr_t hi), void *arg)
{
  struct gap_walk w = {LOWEST_ADDRESS, fn, arg};
  if (proc_maps_for_each(visit_mapping, &w) < 0)
    return -1;
  fn(arg, w.prev_end, HIGHEST_ADDRESS);
  return 0;
}

static uintptr_t find_near_gap(uintptr_t near, const uintptr_t *taken, int ntaken)
{
  struct gap_search s = {near, 0, UINTPTR_MAX, INT_MAX, taken, ntaken};
  return for_each_gap(consider, &s) < 0 ? 0 : s.best;
}

static int closer_gap_exists(uintptr_t near, uintptr_t than)
{
  uintptr_t gap = find_near_gap(near, NULL, 0);
  return gap && distance(gap, near) < distance(than, near);
}

/* Map the executable view at `hint` (exactly, or fail), or anywhere if 0. */
static void *map_at(uintptr_t hint, int prot, int flags, int fd)
{
  if (hint)
    flags |= MAP_FIXED_NOREPLACE;
  void *p = mmap((void *)hint, CHUNK, prot, flags, fd, 0);
  if (p == MAP_FAILED)
    return NULL;
  if (hint && (uintptr_t)p != hint) {
    /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
    munmap(p, CHUNK);
    errno = EEXIST;
    return NULL;
  }
  return p;
}

static int new_chunk(uintptr_t hint, struct chunk *c)
{
  int fd = single_view ? -1 : (int)memfd_create("igprof-trampolines", MFD_CLOEXEC);
  if (fd >= 0) {
    /* The executable view first: the writable one, placed anywhere, could
     * otherwise take the very gap chosen for it. */
    void *x = NULL, *w = MAP_FAILED;
    if (ftruncate(fd, (off_t)CHUNK) == 0 &&
        (x = map_at(hint, PROT_READ | PROT_EXEC, MAP_SHARED, fd)) != NULL &&
        (w = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) != MAP_FAILED) {
      close(fd);
      *c = (struct chunk){w, (uintptr_t)x, 0, 1};
      return 0;
    }
    int saved = errno;
    if (x)
      munmap(x, CHUNK);
    close(fd);
    errno = saved;
    if (saved == EEXIST)
      return -1;
  }
  /* No memfd (old kernel, seccomp): one private mapping, switched between
   * read-write and read-execute around each write. */
  void *p = map_at(hint, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  if (!p)
    return -1;
  *c = (struct chunk){p, (uintptr_t)p, 0, 0};
  return 0;
}

/* The last resort for a near chunk, when every gap's ends (and the places
 * they move to) proved taken by mappings the file does not show: under
 * qemu-user the emulator's code cache alone fills 128 MiB, and may lie right
 * next to the guest's C library. Every chunk-aligned address within reach
 * that the file shows free is tried, the nearest first, each with one mmap
 * call that claims nothing but tells free from taken: about 4 000 calls at
 * most on ARM64, 65 500 on x86_64 (whose reach is 2 GiB), and only when the
 * search by gap ends has failed. */
#define MAX_SCAN_GAPS 512

static struct gap_list {
  uintptr_t lo, hi; /* the window within reach */
  int n;
  uintptr_t gap[MAX_SCAN_GAPS][2]; /* [lo, hi), ascending */
} scan_gaps;

static void add_gap(void *arg, uintptr_t lo, uintptr_t hi)
{
  struct gap_list *g = arg;
  if (lo < g->lo)
    lo = g->lo;
  if (hi > g->hi)
    hi = g->hi;
  if (hi > lo && hi - lo >= CHUNK && g->n < MAX_SCAN_GAPS) {
    g->gap[g->n][0] = lo;
    g->gap[g->n][1] = hi;
    g->n++;
  }
}

static int chunk_in_gap(const struct gap_list *g, uintptr_t a)
{
  int lo = 0, hi = g->n; /* the last gap starting at or below a */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (g->gap[mid][0] <= a)
      lo = mid;
    else
      hi = mid;
  }
  return g->n > 0 && g->gap[lo][0] <= a && a <= g->gap[lo][1] - CHUNK;
}

static int scan_near(uintptr_t target, struct chunk *c)
{
  struct gap_list *g = &scan_gaps;
  uintptr_t radius = arch_near_search_radius();
  uintptr_t base = target & ~(uintptr_t)(CHUNK - 1);
  g->lo = base > LOWEST_ADDRESS + radius ? base - radius : LOWEST_ADDRESS;
  g->hi = HIGHEST_ADDRESS - base > radius ? base + radius : HIGHEST_ADDRESS;
  g->n = 0;
  if (for_each_gap(add_gap, g) < 0)
    return -1;
  for (uintptr_t d = 0; d <= radius; d += CHUNK) {
    for (int below = 0; below < 2; below++) {
      if (below ? d == 0 || base - g->lo < d : g->hi - base < d)
        continue;
      uintptr_t a = below ? base - d : base + d;
      if (!chunk_in_gap(g, a) || !arch_near_reachable(a, target, CHUNK))
        continue;
      void *p = mmap((void *)a, CHUNK, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) {
        if (errno == EEXIST)
          continue;
        return -1; /* out of mappings or memory: more calls will not help */
      }
      munmap(p, CHUNK);
      if ((uintptr_t)p == a && new_chunk(a, c) == 0)
        return 0;
    }
  }
  errno = EEXIST;
  return -1;
}

static void retire_inherited_chunks(void)
{
  pid_t pid = getpid();
  if (pid == owner_pid)
    return;
  for (int i = 0; i < nchunks; i++)
    if (chunks[i].dual)
      chunks[i].used = CHUNK;
  owner_pid = pid;
}

/* Where a test wants a chunk that is out of near reach of `target`. */
static uintptr_t far_hint(uintptr_t target)
{
  /* 64 GiB, or 256 MiB in a 32-bit space (ARM32's b.w reaches 16 MiB) */
  uintptr_t away = sizeof(uintptr_t) > 4 ? (uintptr_t)((uint64_t)64 << 30) : (uintptr_t)256 << 20;
  return (target > away + LOWEST_ADDRESS ? target - away : target + away) & ~(uintptr_t)0xffff;
}

static int use_chunk(int i, size_t size, struct tramp_block *out, const char **why)
{
  struct chunk *c = &chunks[i];
  *out = (struct tramp_block){c->write + c->used, c->exec + c->used, size, i};
  /* a single-view chunk may hold live trampolines: keep it executable */
  if (!c->dual && mprotect(c->write, CHUNK, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    *why = "cannot make a trampoline chunk writable";
    return -1;
  }
  return 0;
}

/* Is every address within near reach of every other? On i386 a rel32 wraps
 * around the 32-bit address space: any chunk serves any target, and new
 * chunks go where the kernel puts them (the nearest gap to an executable is
 * where its heap grows: a chunk there would stop brk). */
static int near_everywhere(void)
{
  return arch_near_reachable(LOWEST_ADDRESS, HIGHEST_ADDRESS - CHUNK, CHUNK);
}

int tramp_reserve(uintptr_t target, int need_near, size_t size, struct tramp_block *out,
                  const char **why)
{
  retire_inherited_chunks();
  int everywhere = near_everywhere();
  size = (size + 15) & ~(size_t)15;
  if (need_near && refuse_near) {
    *why = "no free address space within near-jump reach (forced by a test)";
    return -1;
  }
  int simulate_full = refuse_near; /* and !need_near */

  /* The closest chunk with room serves, if it is close: the relocated code
   * also addresses the target's data through rel32 displacements, and data a
   * library reaches lies near the library, not near a chunk made for another
   * library 2 GiB away. */
  int best = -1;
  for (int i = 0; i < nchunks; i++) {
    struct chunk *c = &chunks[i];
    int reachable = arch_near_reachable(c->exec, target, CHUNK);
    if (CHUNK - c->used < size || (need_near && !reachable) || (simulate_full && reachable))
      continue;
    if (best < 0 || distance(c->exec, target) < distance(chunks[best].exec, target))
      best = i;
  }
  if (best >= 0 && (!need_near || everywhere || distance(chunks[best].exec, target) <= CLOSE_ENOUGH ||
                    nchunks == MAX_CHUNKS || !closer_gap_exists(target, chunks[best].exec)))
    return use_chunk(best, size, out, why);
  if (nchunks == MAX_CHUNKS) {
    *why = "trampoline chunk table is full";
    return -1;
  }
  struct chunk c;
  int ok = -1;
  uintptr_t taken[MAX_TAKEN];
  int ntaken = 0;
  for (int attempt = 0; attempt < MAX_TAKEN && ok != 0; attempt++) {
    uintptr_t hint = everywhere      ? 0
                     : simulate_full ? far_hint(target)
                     : need_near     ? find_near_gap(target, taken, ntaken)
                                     : 0;
    if (need_near && !everywhere && !hint) {
      errno = EEXIST; /* every gap within reach is taken, as far as seen */
      break;
    }
    ok = new_chunk(hint, &c);
    if (ok != 0 && errno != EEXIST)
      break; /* not a lost race with another mapping: retrying will not help */
    if (ok != 0)
      taken[ntaken++] = hint;
  }
  if (ok != 0 && best >= 0) /* farther than a gap seemed to be, but it serves */
    return use_chunk(best, size, out, why);
  if (ok != 0 && errno == EEXIST && need_near && !everywhere && !simulate_full)
    ok = scan_near(target, &c);
  if (ok != 0) {
    *why = errno == EEXIST && need_near ? "no free address space within near-jump reach"
                                        : "cannot map a trampoline chunk";
    return -1;
  }
  if (!c.dual && mprotect(c.write, CHUNK, PROT_READ | PROT_WRITE) != 0) {
    munmap(c.write, CHUNK);
    *why = "cannot make a trampoline chunk writable";
    return -1;
  }
  chunks[nchunks] = c;
  *out = (struct tramp_block){c.write, c.exec, size, nchunks};
  nchunks++;
  return 0;
}

void tramp_commit(struct tramp_block *block, size_t used)
{
  struct chunk *c = &chunks[block->chunk];
  used = (used + 15) & ~(size_t)15;
  if (block->write == c->write + c->used)
    c->used += used;
  if (!c->dual)
    mprotect(c->write, CHUNK, PROT_READ | PROT_EXEC);
  if (used)
    arch_flush_icache((void *)block->exec, used);
}
