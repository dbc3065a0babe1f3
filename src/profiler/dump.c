/* Writing a profile dump in IgProf's HEX text format (inventory §8.1):
 *
 *   P=(HEX ID=<pid> N=(<program>) T=<period>)
 *   C<depth> FN<id>=(F<fid>=(<path>)+<offset> N=(<symbol>))+<symoffset> V<cid>=(<NAME>):(<t>,<v>,<p>);LK=(0x<a>,<s>)...
 *
 * One file per process, written under a temporary name in the target
 * directory and renamed without replacing anything (a name already taken
 * gets a suffix), so no dump is ever half-read or clobbered. The tree is read
 * lock-free while other threads keep allocating; symbols are resolved from a
 * module snapshot and the ELF files themselves, never with dladdr.
 */
#define _GNU_SOURCE
#include "mem/heap.h"
#include "internal.h"
#include "symbols.h"
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned checkpoint_seq;

/* ---------------------------------------------------------------- */
/* Names                                                             */
/* ---------------------------------------------------------------- */

void igprof_expand_name(char *dst, size_t cap, const char *pattern)
{
  size_t n = 0;
  for (const char *p = pattern; *p && n + 1 < cap; ++p) {
    if (p[0] == '%' && p[1] == 'p') {
      n += igprof_format(dst + n, cap - n, "%d", (int) igprof_state.pid);
      ++p;
    } else if (p[0] == '%' && p[1] == '%') {
      dst[n++] = '%';
      ++p;
    } else {
      dst[n++] = *p;
    }
  }
  dst[n < cap ? n : cap - 1] = 0;
}

/* The program's part of a default name: at most 200 bytes, so that
 * "igprof.<program>.<pid>-<n>.<checkpoint>.gz" stays within NAME_MAX however
 * long argv[0] is. */
#define PROGRAM_NAME_MAX 200

static void final_name(char *dst, size_t cap)
{
  if (igprof_config.output[0]) igprof_expand_name(dst, cap, igprof_config.output);
  else igprof_format(dst, cap, "igprof.%.*s.%d%s", PROGRAM_NAME_MAX, igprof_state.program,
                     (int) igprof_state.pid, igprof_config.gzip ? ".gz" : "");
}

/* name + ".<tag>", keeping a trailing ".gz" last. */
static void suffixed(char *dst, size_t cap, const char *name, const char *tag)
{
  size_t len = strlen(name);
  int gz = len > 3 && strcmp(name + len - 3, ".gz") == 0;
  igprof_format(dst, cap, "%.*s.%s%s", (int) (gz ? len - 3 : len), name, tag, gz ? ".gz" : "");
}

/* name + "-<n>", keeping a trailing ".gz" last. */
static void numbered(char *dst, size_t cap, const char *name, int n)
{
  size_t len = strlen(name);
  int gz = len > 3 && strcmp(name + len - 3, ".gz") == 0;
  igprof_format(dst, cap, "%.*s-%d%s", (int) (gz ? len - 3 : len), name, n, gz ? ".gz" : "");
}

/* Move tmp to name without replacing an existing file; on a clash (another
 * process with the same -o name, or an earlier image of this pid before an
 * exec) try name-2, name-3, ... The chosen name goes back into name. Neither
 * call follows a symlink planted at the name: rename and link replace or
 * refuse the name itself. */
static int publish(const char *tmp, char *name, size_t cap)
{
  char candidate[IGPROF_PATH_MAX];
  for (int attempt = 1; attempt <= 1000; ++attempt) {
    if (attempt == 1) igprof_format(candidate, sizeof candidate, "%s", name);
    else numbered(candidate, sizeof candidate, name, attempt);
    int rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, candidate, RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      /* File system without RENAME_NOREPLACE: link() fails on a taken name too. */
      rc = link(tmp, candidate);
      if (rc == 0) unlink(tmp);
    }
    if (rc == 0) {
      igprof_format(name, cap, "%s", candidate);
      return 0;
    }
    if (errno != EEXIST) return -1;
  }
  errno = EEXIST;
  return -1;
}

/* Create the temporary file a dump is written to, in the directory of
 * `target`: ".igprof-tmp.<pid>.<n>", hidden, so that a dump cut short by
 * SIGKILL never matches the "igprof.prog.*" glob its readers use. It is made
 * with O_EXCL | O_NOFOLLOW: in a shared directory a name someone planted
 * (a symlink to a file of root's) is never opened, the next n is tried. */
static int create_temporary(const char *target, char *tmp, size_t cap)
{
  const char *slash = strrchr(target, '/');
  int dir_len = slash ? (int) (slash - target + 1) : 0;
  static _Atomic unsigned sequence;
  for (int attempt = 0; attempt < 100; ++attempt) {
    igprof_format(tmp, cap, "%.*s.igprof-tmp.%d.%u", dir_len, target, (int) igprof_state.pid,
                  atomic_fetch_add(&sequence, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

/* Where a relative name goes: the directory the process started in (so a
 * program that later changes directory, or a daemon() child in "/", still
 * writes next to where it was run), then its current directory, then
 * $TMPDIR or /tmp. An absolute name goes where it says first, then the
 * same fallbacks with its last component. */
static int candidate_path(int k, const char *name, char *out, size_t cap)
{
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *tmpdir = igprof_getenv("TMPDIR");
  if (!tmpdir || tmpdir[0] != '/') tmpdir = "/tmp";
  const char *dir;
  switch (k) {
  case 0:
    if (name[0] == '/' || !igprof_state.start_dir[0]) { igprof_format(out, cap, "%s", name); return 1; }
    dir = igprof_state.start_dir;
    base = name;
    break;
  case 1: dir = NULL; break;
  case 2: dir = tmpdir; break;
  default: return 0;
  }
  if (k == 1 && name[0] != '/' && !igprof_state.start_dir[0]) return 0; /* case 0 was the cwd */
  size_t need = dir ? igprof_format(out, cap, "%s/%s", dir, base) : igprof_format(out, cap, "%s", base);
  return need < cap;
}

/* ---------------------------------------------------------------- */
/* Output targets: file or |command                                  */
/* ---------------------------------------------------------------- */

/* The environment of a `|command` child: the application's, minus the
 * profiler's own variables, so the compressor is not itself profiled.
 * The application's environment is left untouched. */
static char **child_environment(struct igprof_scratch *s)
{
  extern char **environ;
  size_t n = 0;
  for (char **e = environ; e && *e; ++e) ++n;
  char **env = igprof_scratch_alloc(s, sizeof *env * (n + 1));
  if (!env) return NULL;
  size_t k = 0;
  for (char **e = environ; e && *e; ++e) {
    if (strncmp(*e, "IGPROF=", 7) == 0) continue;
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0 && strstr(*e, "libigprof")) continue;
    env[k++] = *e;
  }
  env[k] = NULL;
  return env;
}

static pid_t spawn_command(const char *command, int *write_fd, struct igprof_scratch *s)
{
  int fds[2];
  char **env = child_environment(s);
  if (!env || pipe2(fds, O_CLOEXEC) != 0) return -1;
  char *argv[] = {"sh", "-c", (char *) command, NULL};
  /* vfork: no atfork handlers, no copy; the child only dup2s and execs. */
  pid_t pid = vfork();
  if (pid == 0) {
    if (dup2(fds[0], 0) < 0) _exit(127);
    execve("/bin/sh", argv, env);
    _exit(127);
  }
  close(fds[0]);
  if (pid < 0) { close(fds[1]); return -1; }
  *write_fd = fds[1];
  return pid;
}

/* ---------------------------------------------------------------- */
/* Tree traversal                                                    */
/* ---------------------------------------------------------------- */

struct leak {
  struct leak *next;
  uintptr_t addr;
  uint64_t size;
};

/* The dump works on a snapshot of the tree taken in one pre-order walk: an
 * array of the nodes that exist at that moment, 8 bytes each, as a dump of
 * a tree of half a million nodes is made while the program's own memory is
 * still mapped and what it holds adds to the process's peak. An entry holds
 * the end of the node's subtree (its children are the entries from the
 * next one on, each subtree skipped by its end) and its call site as an
 * index into the table of distinct pcs, with a flag. A node with a
 * counter block has an entry in a second, smaller array (aux) that points
 * at the node, its block and its live blocks; those entries are made in
 * pre-order, so a node's is found by counting the flagged nodes before it
 * (a bit per node and a count per 64). Counter values are read from the
 * blocks when they are written, and once on the snapshot's visit to tell
 * whether the node has data. The one write into the tree, on that visit,
 * is the node's index in the array, tagged with the dump's generation, so a
 * live block can find its node's entry; no pass is needed afterwards to
 * clear it. */
struct node_info {
  uint32_t end;  /* one past the last entry of its subtree */
  uint32_t site; /* its pc's entry in dump_ctx.sites; HAS_DATA */
};

#define NO_INDEX UINT32_MAX
/* In node_info.site: the node or one below it has data to write. */
#define HAS_DATA 0x80000000u
#define SITE_OF(info) ((info)->site & ~HAS_DATA)

struct aux {
  struct igprof_node *node;
  const struct igprof_counter_value *counters;
  struct leak *leaks;
};

/* A distinct call site: its FN id once written (NO_INDEX until then) and
 * the offset from its symbol's start, written after every reference. */
struct site {
  uintptr_t pc;
  uint64_t offset;
  uint32_t id;
};

struct dump_ctx {
  struct igprof_scratch scratch;
  struct igprof_out out;
  struct symbols *symbols;
  /* the snapshot: infos[0..count); a node of it has dump_gen == gen */
  struct node_info *infos;
  uint32_t count, gen;
  /* the nodes with a counter block, in pre-order; bit i % 64 of
   * aux_bits[i / 64] says node i has an entry, aux_rank[i / 64] counts the
   * entries made before node i & ~63 */
  struct aux *aux;
  uint32_t naux;
  uint64_t *aux_bits;
  uint32_t *aux_rank;
  struct site *sites; /* distinct pcs of the snapshot's nodes */
  uint32_t nsites, next_fn;
  uint32_t *site_table; /* pc -> index in sites, open addressing, at most half full */
  size_t site_slots;
  /* the children of the nodes on the output's path, each node's in
   * ascending pc order (push_kids), and room to sort them by pc */
  uint32_t *kids, nkids, kids_cap;
  uintptr_t *kid_pcs;
  uint32_t kid_pcs_cap;
  int *module_fid; /* per snapshot module, -1 until written */
  int next_fid, nofile_fid;
  int counter_defined[IGPROF_MAX_COUNTERS];
  uint64_t nodes, leaks;
  int no_memory;
};

static uint32_t dump_generation; /* under dump_lock */

static uint32_t index_of(const struct dump_ctx *d, const struct igprof_node *n)
{
  return n->dump_gen == d->gen ? n->dump_index : NO_INDEX;
}

static int has_data(const struct dump_ctx *d, uint32_t i) { return (d->infos[i].site & HAS_DATA) != 0; }

/* Node i's entry in d->aux, or NULL. */
static struct aux *aux_of(const struct dump_ctx *d, uint32_t i)
{
  uint64_t word = d->aux_bits[i / 64];
  if (!(word >> (i % 64) & 1)) return NULL;
  uint64_t before = word & ((UINT64_C(1) << (i % 64)) - 1);
  return &d->aux[d->aux_rank[i / 64] + (uint32_t) __builtin_popcountll(before)];
}

#define SITE_SLOT(pc, mask) ((size_t) (((uint64_t) (pc) * 0x9e3779b97f4a7c15ull) >> 20) & (mask))

/* A table of twice the slots, the sites entered again. */
static int grow_site_table(struct dump_ctx *d)
{
  size_t slots = d->site_slots ? d->site_slots * 2 : 4096;
  uint32_t *table = igprof_scratch_alloc(&d->scratch, sizeof *table * slots);
  if (!table) return -1;
  memset(table, 0xff, sizeof *table * slots); /* NO_INDEX */
  for (uint32_t s = 0; s < d->nsites; ++s) {
    size_t at = SITE_SLOT(d->sites[s].pc, slots - 1);
    while (table[at] != NO_INDEX) at = (at + 1) & (slots - 1);
    table[at] = s;
  }
  d->site_table = table;
  d->site_slots = slots;
  return 0;
}

/* The entry of `pc` in d->sites, made on first use; NO_INDEX when out of
 * memory. */
static uint32_t site_of(struct dump_ctx *d, uintptr_t pc)
{
  if ((size_t) d->nsites * 2 >= d->site_slots && grow_site_table(d) != 0) return NO_INDEX;
  size_t mask = d->site_slots - 1, at = SITE_SLOT(pc, mask);
  uint32_t s;
  while ((s = d->site_table[at]) != NO_INDEX && d->sites[s].pc != pc) at = (at + 1) & mask;
  if (s == NO_INDEX) {
    s = d->site_table[at] = d->nsites++;
    d->sites[s] = (struct site){pc, 0, NO_INDEX};
  }
  return s;
}
#undef SITE_SLOT

/* Counter `id`'s ticks, value and peak in a node's block. */
static void read_counter(const struct aux *a, int id, int64_t v[3])
{
  igprof_counter_reader reader = igprof_counter_reader_of(id);
  if (reader) {
    reader(a->node, a->counters, v);
    return;
  }
  const struct igprof_counter_value *c = &a->counters[igprof_counter_slot(id)];
  v[0] = atomic_load_explicit(&c->ticks, memory_order_relaxed);
  v[1] = atomic_load_explicit(&c->value, memory_order_relaxed);
  v[2] = atomic_load_explicit(&c->peak, memory_order_relaxed);
}

/* Node i (node n) as the snapshot's walk finds it. */
static int visit(struct dump_ctx *d, uint32_t i, struct igprof_node *n)
{
  uint32_t site = site_of(d, n->pc);
  if (site == NO_INDEX) return -1;
  struct node_info *info = &d->infos[i];
  info->end = NO_INDEX;
  info->site = site;
  if (i % 64 == 0) {
    d->aux_bits[i / 64] = 0;
    d->aux_rank[i / 64] = d->naux;
  }
  const struct igprof_counter_value *counters = atomic_load_explicit(&n->counters, memory_order_acquire);
  if (counters) {
    struct aux *a = &d->aux[d->naux++];
    *a = (struct aux){n, counters, NULL};
    d->aux_bits[i / 64] |= UINT64_C(1) << (i % 64);
    for (int id = 0, nc = igprof_counter_count(); id < nc && !(info->site & HAS_DATA); ++id) {
      int64_t v[3];
      read_counter(a, id, v);
      if (v[0] || v[1] || v[2]) info->site |= HAS_DATA;
    }
  }
  n->dump_index = i;
  n->dump_gen = d->gen;
  return 0;
}

/* The snapshot: one pre-order walk, at most `cap` nodes. A node has data
 * of its own when a counter of its block is not all zero. `open` holds the
 * entries of the current node's ancestors. */
static void take_snapshot(struct dump_ctx *d, struct igprof_node *root, uint64_t cap)
{
  size_t room = (size_t) (cap ? cap : 1), words = room / 64 + 1;
  /* Reserved for every node, written as far as used (the pages beyond are
   * never touched, so never resident). */
  d->infos = igprof_scratch_alloc(&d->scratch, sizeof *d->infos * room);
  d->aux = igprof_scratch_alloc(&d->scratch, sizeof *d->aux * room);
  d->sites = igprof_scratch_alloc(&d->scratch, sizeof *d->sites * room);
  d->aux_bits = igprof_scratch_alloc(&d->scratch, sizeof *d->aux_bits * words);
  d->aux_rank = igprof_scratch_alloc(&d->scratch, sizeof *d->aux_rank * words);
  uint32_t open_cap = (uint32_t) igprof_config.depth + 16, top = 0;
  uint32_t *open = igprof_scratch_alloc(&d->scratch, sizeof *open * open_cap);
  if (!d->infos || !d->aux || !d->sites || !d->aux_bits || !d->aux_rank || !open || grow_site_table(d) != 0) {
    d->no_memory = 1;
    return;
  }
  /* A generation tells this dump's snapshot from older ones (0: never). */
  if (++dump_generation == 0) ++dump_generation;
  d->gen = dump_generation;
  struct igprof_node *n = atomic_load_explicit(&root->children, memory_order_acquire);
  while (n && d->count < cap) {
    uint32_t i = d->count++;
    if (visit(d, i, n) != 0) { d->no_memory = 1; return; }
    struct igprof_node *c = atomic_load_explicit(&n->children, memory_order_acquire);
    if (c) { /* down */
      if (top == open_cap) { /* deeper than stacks are kept: not expected */
        uint32_t *more = igprof_scratch_alloc(&d->scratch, sizeof *more * open_cap * 2);
        if (!more) { d->no_memory = 1; return; }
        memcpy(more, open, sizeof *open * top);
        open = more;
        open_cap *= 2;
      }
      open[top++] = i;
      n = c;
      continue;
    }
    /* across, or up (each node left behind is complete) until a sibling is found */
    d->infos[i].end = d->count;
    while (n && !n->sibling) {
      n = n->parent == root ? NULL : n->parent;
      if (n && top) d->infos[open[--top]].end = d->count;
    }
    if (!n) break;
    n = n->sibling;
  }
  /* Cut short at `cap`: the nodes still open end with the snapshot. */
  while (top) d->infos[open[--top]].end = d->count;
}

/* "Has data" carried up: a node is written if it or one below it has data.
 * Children come after their parent, so one pass from the last node back. */
static void carry_data_up(struct dump_ctx *d)
{
  for (uint32_t i = d->count; i-- > 0;) {
    struct node_info *info = &d->infos[i];
    for (uint32_t j = i + 1; j < info->end && !(info->site & HAS_DATA); j = d->infos[j].end)
      if (has_data(d, j)) info->site |= HAS_DATA;
  }
}

/* Node p's children with data (p == NO_INDEX: the root's) pushed onto
 * d->kids in ascending pc order (a shell sort: siblings' pcs differ);
 * returns where they begin, or NO_INDEX when out of memory. */
static uint32_t push_kids(struct dump_ctx *d, uint32_t p)
{
  uint32_t base = d->nkids;
  uint32_t last = p == NO_INDEX ? d->count : d->infos[p].end;
  for (uint32_t j = p == NO_INDEX ? 0 : p + 1; j < last; j = d->infos[j].end) {
    if (!has_data(d, j)) continue;
    if (d->nkids == d->kids_cap) {
      uint32_t cap = d->kids_cap ? d->kids_cap * 2 : 4096;
      uint32_t *kids = igprof_scratch_alloc(&d->scratch, sizeof *kids * cap);
      if (!kids) return NO_INDEX;
      if (d->nkids) memcpy(kids, d->kids, sizeof *kids * d->nkids);
      d->kids = kids;
      d->kids_cap = cap;
    }
    d->kids[d->nkids++] = j;
  }
  uint32_t n = d->nkids - base;
  if (n < 2) return base;
  if (n > d->kid_pcs_cap) {
    uint32_t cap = n > 4096 ? n : 4096;
    d->kid_pcs = igprof_scratch_alloc(&d->scratch, sizeof *d->kid_pcs * cap);
    if (!d->kid_pcs) return NO_INDEX;
    d->kid_pcs_cap = cap;
  }
  uint32_t *v = d->kids + base;
  uintptr_t *pc = d->kid_pcs;
  for (uint32_t k = 0; k < n; ++k) pc[k] = d->sites[SITE_OF(&d->infos[v[k]])].pc;
  static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
  for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; ++g) {
    size_t gap = gaps[g];
    if (gap >= n) continue;
    for (size_t i = gap; i < n; ++i) {
      uint32_t x = v[i];
      uintptr_t key = pc[i];
      size_t j = i;
      while (j >= gap && pc[j - gap] > key) { v[j] = v[j - gap]; pc[j] = pc[j - gap]; j -= gap; }
      v[j] = x;
      pc[j] = key;
    }
  }
  return base;
}

static void attach_leak(void *arg, uintptr_t addr, struct igprof_node *node, uint64_t size)
{
  struct dump_ctx *d = arg;
  uint32_t i = index_of(d, node);
  if (i == NO_INDEX) return; /* node created after the snapshot began */
  d->infos[i].site |= HAS_DATA;
  struct aux *a = aux_of(d, i);
  if (!a) return; /* its counter block came after the snapshot's visit: its values are not written */
  struct leak *l = igprof_scratch_alloc(&d->scratch, sizeof *l);
  if (!l) { d->no_memory = 1; return; }
  l->addr = addr;
  l->size = size;
  l->next = a->leaks;
  a->leaks = l;
  d->leaks++;
}

static void write_fn(struct dump_ctx *d, struct site *site)
{
  struct igprof_out *o = &d->out;
  uintptr_t pc = site->pc;
  int fresh = site->id == NO_INDEX;
  if (fresh) site->id = d->next_fn++; /* ids in the order of first use */
  igprof_out_str(o, "FN");
  igprof_out_hex(o, site->id);
  if (!fresh) {
    /* Symbolised at its first node: only the offset is written again. */
    igprof_out_char(o, '+');
    igprof_out_hex(o, site->offset);
    return;
  }
  struct symbol_info si;
  int synthetic = pc == IGPROF_PC_TRUNCATED || pc == IGPROF_PC_SIZE_FILTERED;
  if (synthetic) {
    si = (struct symbol_info){.module = -1, .path = "",
                              .name = pc == IGPROF_PC_TRUNCATED ? "@igprof_truncated_stack" : "@igprof_size_filtered"};
  } else {
    symbols_lookup(d->symbols, pc, &si);
  }
  site->offset = si.name && !synthetic ? pc - si.symbol_start : 0;
  {
    int *fid = si.module >= 0 ? &d->module_fid[si.module] : &d->nofile_fid;
    igprof_out_str(o, "=(F");
    if (*fid < 0) {
      *fid = d->next_fid++;
      igprof_out_hex(o, (uint64_t) *fid);
      igprof_out_str(o, "=(");
      igprof_out_name(o, si.path);
      igprof_out_char(o, ')');
    } else {
      igprof_out_hex(o, (uint64_t) *fid);
    }
    igprof_out_char(o, '+');
    igprof_out_hex(o, pc - si.module_base);
    igprof_out_str(o, " N=(");
    if (si.name) {
      igprof_out_name(o, si.name);
    } else {
      igprof_out_str(o, "@?0x");
      igprof_out_hex(o, pc);
    }
    igprof_out_str(o, "))");
  }
  igprof_out_char(o, '+');
  igprof_out_hex(o, site->offset);
}

static void write_counters(struct dump_ctx *d, uint32_t i)
{
  struct igprof_out *o = &d->out;
  const struct aux *a = aux_of(d, i);
  if (!a) return;
  int nc = igprof_counter_count();
  for (int i = 0; i < nc; ++i) {
    int64_t v[3];
    read_counter(a, i, v);
    int64_t ticks = v[0], value = v[1];
    int64_t peak = igprof_counter_is_sum(i) ? value : v[2];
    int has_leaks = igprof_counter_has_leaks(i) && a->leaks;
    if (!ticks && !peak && !has_leaks) continue;
    igprof_out_str(o, " V");
    igprof_out_hex(o, (uint64_t) i);
    if (!d->counter_defined[i]) {
      d->counter_defined[i] = 1;
      igprof_out_str(o, "=(");
      igprof_out_str(o, igprof_counter_name(i));
      igprof_out_char(o, ')');
    }
    igprof_out_str(o, ":(");
    igprof_out_shex(o, ticks);
    igprof_out_char(o, ',');
    igprof_out_shex(o, value);
    igprof_out_char(o, ',');
    igprof_out_shex(o, peak);
    igprof_out_char(o, ')');
    if (has_leaks)
      for (struct leak *l = a->leaks; l; l = l->next) {
        igprof_out_str(o, ";LK=(0x");
        igprof_out_hex(o, l->addr);
        igprof_out_char(o, ',');
        igprof_out_hex(o, l->size);
        igprof_out_char(o, ')');
      }
  }
}

/* A node on the output's path: its children with data are d->kids[next,
 * end); they were pushed from `base` (== next at first). */
struct frame {
  uint32_t base, next, end;
};

/* Depth-first output of the snapshot's nodes with data, children in
 * ascending pc order, with an explicit stack (trees can be deeper than a
 * small thread stack allows recursion), at most `cap` levels. visit(d, i,
 * depth, arg) writes node i and says whether to go below it. */
static void walk_output(struct dump_ctx *d, int (*visit)(struct dump_ctx *, uint32_t, int, void *), void *arg)
{
  int cap = igprof_config.depth + 8;
  struct frame *stack = igprof_scratch_alloc(&d->scratch, sizeof *stack * (size_t) cap);
  uint32_t base = stack ? push_kids(d, NO_INDEX) : NO_INDEX;
  if (base == NO_INDEX) { d->no_memory = 1; return; }
  int top = 0;
  stack[top++] = (struct frame){base, base, d->nkids};
  while (top > 0) {
    struct frame *f = &stack[top - 1];
    if (f->next == f->end) {
      d->nkids = f->base;
      --top;
      continue;
    }
    uint32_t i = d->kids[f->next++];
    if (!visit(d, i, top, arg) || top >= cap || d->infos[i].end == i + 1) continue;
    if ((base = push_kids(d, i)) == NO_INDEX) { d->no_memory = 1; return; }
    stack[top++] = (struct frame){base, base, d->nkids};
  }
}

static int write_node(struct dump_ctx *d, uint32_t i, int depth, void *arg)
{
  (void) arg;
  igprof_out_char(&d->out, 'C');
  igprof_out_hex(&d->out, (uint64_t) depth);
  igprof_out_char(&d->out, ' ');
  write_fn(d, &d->sites[SITE_OF(&d->infos[i])]);
  write_counters(d, i);
  igprof_out_char(&d->out, '\n');
  d->nodes++;
  return 1;
}

static void write_tree(struct dump_ctx *d) { walk_output(d, write_node, NULL); }

/* FN<id>=(F<nofile>+0 N=(<name>))+<offset>: a frame of no file (the
 * timeline's), defining the no-file F id on its first use. */
static void write_synthetic_fn(struct dump_ctx *d, uint32_t id, const char *name, uint64_t offset)
{
  struct igprof_out *o = &d->out;
  igprof_out_str(o, "FN");
  igprof_out_hex(o, id);
  igprof_out_str(o, "=(F");
  int fresh = d->nofile_fid < 0;
  if (fresh) d->nofile_fid = d->next_fid++;
  igprof_out_hex(o, (uint64_t) d->nofile_fid);
  if (fresh) igprof_out_str(o, "=()");
  igprof_out_str(o, "+0 N=(");
  igprof_out_str(o, name);
  igprof_out_str(o, "))+");
  igprof_out_hex(o, offset);
}

/* What a detailed snapshot's walk over the tree writes. */
struct snapshot_walk {
  const uint8_t *in;
  const int64_t (*val)[2];
  int cid, defined;
  uint32_t sample;
};

/* One line of a snapshot's copy of the tree: node i at `depth` under the
 * snapshot's own line, with its HEAP_SNAPSHOT counter if it held live
 * blocks then (in[i] == 2); nothing for a node that led to none (in[i] == 0). */
static int write_snapshot_line(struct dump_ctx *d, uint32_t i, int depth, void *arg)
{
  struct snapshot_walk *w = arg;
  if (!w->in[i]) return 0;
  struct igprof_out *o = &d->out;
  igprof_out_char(o, 'C');
  igprof_out_hex(o, (uint64_t) depth + 1);
  igprof_out_char(o, ' ');
  write_fn(d, &d->sites[SITE_OF(&d->infos[i])]);
  if (w->in[i] == 2) {
    igprof_out_str(o, " V");
    igprof_out_hex(o, (uint64_t) w->cid);
    if (!w->defined) igprof_out_str(o, "=(HEAP_SNAPSHOT)");
    w->defined = 1;
    igprof_out_str(o, ":(");
    igprof_out_shex(o, w->val[i][0]);
    igprof_out_char(o, ',');
    igprof_out_shex(o, w->val[i][1]);
    igprof_out_char(o, ',');
    igprof_out_hex(o, w->sample);
    igprof_out_char(o, ')');
  }
  igprof_out_char(o, '\n');
  return 1;
}

/* The detailed snapshots (--snapshots; docs/dump-format.md): for each, a
 * synthetic stack @igprof_heap_snapshot whose FN offset is the timeline
 * sample it belongs to, over a copy of the stacks that held live blocks
 * then (children in the tree's order), each such node with counter
 * HEAP_SNAPSHOT = (blocks, bytes, sample). */
static void write_snapshots(struct dump_ctx *d, const struct igprof_heap_snapshot *snapshots, size_t n, int cid)
{
  uint8_t *in = igprof_scratch_alloc(&d->scratch, d->count + 1);
  int64_t (*val)[2] = igprof_scratch_alloc(&d->scratch, sizeof *val * (d->count + 1));
  if (!in || !val) { d->no_memory = 1; return; }
  uint32_t fn = d->next_fn++;
  struct snapshot_walk w = {in, (const int64_t (*)[2]) val, cid, 0, 0};
  for (size_t k = 0; k < n && !d->no_memory; ++k) {
    const struct igprof_heap_snapshot *s = &snapshots[k];
    memset(in, 0, d->count + 1);
    for (uint32_t p = 0; p < s->count; ++p) {
      uint32_t i = index_of(d, s->paths[p].node);
      if (i == NO_INDEX || !has_data(d, i)) continue; /* made after the dump's snapshot began */
      val[i][0] = s->paths[p].blocks;
      val[i][1] = s->paths[p].bytes;
      in[i] = 2;
    }
    /* and the nodes above them (children after their parent) */
    for (uint32_t i = d->count; i-- > 0;)
      for (uint32_t j = i + 1; j < d->infos[i].end && !in[i]; j = d->infos[j].end)
        if (in[j]) in[i] = 1;
    igprof_out_str(&d->out, "C1 ");
    if (k == 0) write_synthetic_fn(d, fn, "@igprof_heap_snapshot", s->sample);
    else {
      igprof_out_str(&d->out, "FN");
      igprof_out_hex(&d->out, fn);
      igprof_out_char(&d->out, '+');
      igprof_out_hex(&d->out, s->sample);
    }
    igprof_out_char(&d->out, '\n');
    w.sample = s->sample;
    walk_output(d, write_snapshot_line, &w);
  }
}

/* The heap timeline (--timeline; docs/dump-format.md, "The heap timeline"):
 * a synthetic stack @igprof_heap_timeline with one @igprof_heap_sample line
 * per sample, in time order, each with counter HEAP_TIMELINE = (blocks,
 * bytes, microseconds since start). IgProf's grammar throughout, so its
 * tools read it as one more stack with a counter of its own. */
static void write_timeline(struct dump_ctx *d)
{
  const struct igprof_heap *h = &igprof_heap;
  if (!h->started || (!h->sample_bytes && !h->sample_ns)) return;
  struct igprof_heap_sample *v;
  struct igprof_heap_snapshot *snapshots;
  size_t nsnapshots;
  size_t n = igprof_heap_timeline(&d->scratch, &v, &snapshots, &nsnapshots);
  if (!n) { d->no_memory = 1; return; }
  struct igprof_out *o = &d->out;
  uint32_t fn = d->next_fn;
  d->next_fn += 2;
  int cid = igprof_counter_count(); /* the next id: no runtime counter */
  igprof_out_str(o, "C1 ");
  write_synthetic_fn(d, fn, "@igprof_heap_timeline", 0);
  igprof_out_char(o, '\n');
  for (size_t i = 0; i < n; ++i) {
    igprof_out_str(o, "C2 ");
    if (i == 0) {
      write_synthetic_fn(d, fn + 1, "@igprof_heap_sample", 0);
    } else {
      igprof_out_str(o, "FN");
      igprof_out_hex(o, fn + 1);
      igprof_out_char(o, '+');
      igprof_out_hex(o, i);
    }
    igprof_out_str(o, " V");
    igprof_out_hex(o, (uint64_t) cid);
    if (i == 0) igprof_out_str(o, "=(HEAP_TIMELINE)");
    igprof_out_str(o, ":(");
    igprof_out_shex(o, v[i].blocks);
    igprof_out_char(o, ',');
    igprof_out_shex(o, v[i].bytes);
    igprof_out_char(o, ',');
    igprof_out_shex(o, v[i].ns / 1000);
    igprof_out_str(o, ")\n");
  }
  if (nsnapshots) write_snapshots(d, snapshots, nsnapshots, cid + 1);
}

/* The allocation-size histogram (--histogram; docs/dump-format.md): a
 * synthetic stack @igprof_size_histogram with one @igprof_size_class line
 * per size class that had allocations, its FN offset the class k, with
 * counter HEAP_HISTOGRAM = (allocations, bytes, the class's smallest size). */
static void write_histogram(struct dump_ctx *d)
{
  if (!igprof_heap.started || !igprof_heap_histogram_on) return;
  struct igprof_out *o = &d->out;
  uint32_t fn = d->next_fn;
  d->next_fn += 2;
  int cid = igprof_counter_count() + 2, first = 1; /* after HEAP_TIMELINE and HEAP_SNAPSHOT */
  igprof_out_str(o, "C1 ");
  write_synthetic_fn(d, fn, "@igprof_size_histogram", 0);
  igprof_out_char(o, '\n');
  for (int k = 0; k < IGPROF_HEAP_SIZE_CLASSES; ++k) {
    int64_t count = atomic_load_explicit(&igprof_heap_histogram[k][0], memory_order_relaxed);
    int64_t bytes = atomic_load_explicit(&igprof_heap_histogram[k][1], memory_order_relaxed);
    if (!count) continue;
    igprof_out_str(o, "C2 ");
    if (first) {
      write_synthetic_fn(d, fn + 1, "@igprof_size_class", (uint64_t) k);
    } else {
      igprof_out_str(o, "FN");
      igprof_out_hex(o, fn + 1);
      igprof_out_char(o, '+');
      igprof_out_hex(o, (uint64_t) k);
    }
    igprof_out_str(o, " V");
    igprof_out_hex(o, (uint64_t) cid);
    if (first) igprof_out_str(o, "=(HEAP_HISTOGRAM)");
    first = 0;
    igprof_out_str(o, ":(");
    igprof_out_shex(o, count);
    igprof_out_char(o, ',');
    igprof_out_shex(o, bytes);
    igprof_out_char(o, ',');
    igprof_out_hex(o, k ? 1ull << (k - 1) : 0);
    igprof_out_str(o, ")\n");
  }
}

/* --sample (docs/dump-format.md, "Sampled memory profiles"): a synthetic
 * stack @igprof_mem_sampling whose counter MEM_SAMPLING is (allocations
 * sampled, the mean interval in bytes, 0): the memory figures are
 * estimates. */
static void write_sampling(struct dump_ctx *d)
{
  if (!igprof_heap.started || !igprof_mem_sample_mean) return;
  struct igprof_out *o = &d->out;
  int cid = igprof_counter_count() + 3; /* after HEAP_TIMELINE, HEAP_SNAPSHOT and HEAP_HISTOGRAM */
  igprof_out_str(o, "C1 ");
  write_synthetic_fn(d, d->next_fn++, "@igprof_mem_sampling", 0);
  igprof_out_str(o, " V");
  igprof_out_hex(o, (uint64_t) cid);
  igprof_out_str(o, "=(MEM_SAMPLING):(");
  igprof_out_hex(o, atomic_load_explicit(&igprof_mem_sampled, memory_order_relaxed));
  igprof_out_char(o, ',');
  igprof_out_hex(o, igprof_mem_sample_mean);
  igprof_out_str(o, ",0)\n");
}

static void write_header(struct igprof_out *o)
{
  igprof_out_str(o, "P=(HEX ID=");
  igprof_out_hex(o, (uint64_t) igprof_state.pid); /* every INT after HEX is hexadecimal */
  igprof_out_str(o, " N=(");
  igprof_out_name(o, igprof_state.invocation[0] ? igprof_state.invocation : igprof_state.program);
  igprof_out_str(o, ") T=");
  /* %f without stdio: six decimals, rounded. */
  double t = igprof_state.tick_period < 0 ? 0 : igprof_state.tick_period;
  uint64_t micro = (uint64_t) (t * 1e6 + 0.5);
  char frac[16];
  igprof_out_dec(o, micro / 1000000);
  igprof_format(frac, sizeof frac, ".%u", (unsigned) (micro % 1000000 + 1000000));
  frac[1] = '.';
  igprof_out_str(o, frac + 1);
  igprof_out_str(o, ")\n");
}

static void *z_alloc(void *opaque, unsigned items, unsigned size)
{
  return igprof_scratch_alloc(opaque, (size_t) items * size);
}

static void z_free(void *opaque, void *p) { (void) opaque; (void) p; }

static int write_dump(struct dump_ctx *d, int fd)
{
  struct igprof_node *root = igprof_tree_root();
  d->out.fd = fd;
  d->out.cap = 1 << 16;
  d->out.buf = igprof_scratch_alloc(&d->scratch, d->out.cap);
  if (!d->out.buf) return ENOMEM;
  if (igprof_config.gzip) {
    z_stream *z = igprof_scratch_alloc(&d->scratch, sizeof *z);
    d->out.zcap = 1 << 16;
    d->out.zbuf = igprof_scratch_alloc(&d->scratch, d->out.zcap);
    if (!z || !d->out.zbuf) return ENOMEM;
    z->zalloc = z_alloc;
    z->zfree = z_free;
    z->opaque = &d->scratch;
    if (deflateInit2(z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return ENOMEM;
    d->out.zstream = z;
  }

  /* The snapshot, the live blocks onto their nodes, then "has data"
   * carried up: a node is printed if it or a descendant has data (a child
   * always comes after its parent in pre-order). */
  /* Room for the nodes that exist now, and some made by other threads
   * while the snapshot is taken (those are not needed, but the count may be
   * read before increments made by nodes already linked: never run short). */
  uint64_t nodes_now = igprof_tree_node_count();
  take_snapshot(d, root, nodes_now + nodes_now / 4 + 1024);
  if (!d->no_memory) igprof_live_foreach(attach_leak, d);
  if (!d->no_memory) carry_data_up(d);
  d->symbols = symbols_snapshot(&d->scratch);
  int nmod = symbols_count(d->symbols);
  d->module_fid = igprof_scratch_alloc(&d->scratch, sizeof(int) * (size_t) (nmod + 1));
  if (!d->module_fid) d->no_memory = 1;
  if (!d->no_memory) {
    for (int i = 0; i < nmod; ++i) d->module_fid[i] = -1;
    d->nofile_fid = -1;
    write_header(&d->out);
    write_tree(d);
    write_timeline(d);
    write_histogram(d);
    write_sampling(d);
    igprof_out_finish(&d->out);
  }
  symbols_close(d->symbols);
  if (d->no_memory) return ENOMEM;
  return d->out.failed;
}

/* ---------------------------------------------------------------- */
/* Entry points                                                      */
/* ---------------------------------------------------------------- */

/* Write the dump to a file: a temporary name, then renamed into place.
 * When the directory cannot be written (removed while the program ran, made
 * read-only), the next place candidate_path gives is tried, and the user is
 * told where the dump went. `target` gets the name used. */
static int dump_to_file(struct dump_ctx *d, char *target, size_t cap)
{
  char name[IGPROF_PATH_MAX], path[IGPROF_PATH_MAX], tmp[IGPROF_PATH_MAX + 64], first[IGPROF_PATH_MAX];
  int rc = ENOENT, first_rc = 0;
  igprof_format(name, sizeof name, "%s", target);
  first[0] = 0;
  for (int k = 0; k < 3; ++k) {
    if (!candidate_path(k, name, path, sizeof path) || (k > 0 && strcmp(path, first) == 0)) continue;
    int fd = create_temporary(path, tmp, sizeof tmp);
    if (fd < 0) {
      rc = errno;
      if (!first[0]) { igprof_format(first, sizeof first, "%s", path); first_rc = rc; }
      continue;
    }
    rc = write_dump(d, fd);
    if (close(fd) != 0 && !rc) rc = errno;
    if (!rc && publish(tmp, path, sizeof path) != 0) rc = errno;
    if (rc) unlink(tmp);
    if (!rc && first[0])
      igprof_warn("cannot write %s (%s): dump written to %s instead", first,
                  strerrorname_np(first_rc) ? strerrorname_np(first_rc) : "error", path);
    igprof_format(target, cap, "%s", path);
    return rc;
  }
  if (first[0]) igprof_format(target, cap, "%s", first);
  return first_rc ? first_rc : rc;
}

/* Write the dump into `command`'s stdin. A command that fails or ends
 * early must not take the program with it: SIGPIPE is held back around the
 * writes, and the one an EPIPE raised is taken back. */
static int dump_to_command(struct dump_ctx *d, const char *command)
{
  int fd;
  pid_t child = spawn_command(command, &fd, &d->scratch);
  if (child < 0) return errno;
  struct igprof_pipe_guard guard;
  igprof_pipe_guard_begin(&guard);
  int rc = write_dump(d, fd);
  igprof_pipe_guard_end(&guard, rc == EPIPE);
  close(fd);
  int status;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR)
    ;
  if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) rc = ECHILD;
  return rc;
}

/* An output that is not a file to create: /dev/null (the dump is not
 * wanted: nothing is written), or a FIFO someone reads (written straight
 * into, like a |command). Returns -1 when `target` is an ordinary name. */
static int dump_to_special(struct dump_ctx *d, const char *target)
{
  struct stat st;
  if (strcmp(target, "/dev/null") == 0) return 0;
  if (lstat(target, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
  int fd = open(target, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  struct igprof_pipe_guard guard;
  igprof_pipe_guard_begin(&guard);
  int rc = write_dump(d, fd);
  igprof_pipe_guard_end(&guard, rc == EPIPE);
  close(fd);
  return rc;
}

int igprof_dump(enum igprof_dump_kind kind, const char *name, const char *why)
{
  char target[IGPROF_PATH_MAX];
  int saved_errno = errno;
  pthread_mutex_lock(&dump_lock);
  if (name && name[0]) {
    igprof_expand_name(target, sizeof target, name);
  } else {
    final_name(target, sizeof target);
    if (kind != IGPROF_DUMP_FINAL && target[0] != '|') {
      char tag[24], base[IGPROF_PATH_MAX];
      if (kind == IGPROF_DUMP_PEAK) igprof_format(tag, sizeof tag, "peak");
      else igprof_format(tag, sizeof tag, "%u", ++checkpoint_seq);
      igprof_format(base, sizeof base, "%s", target);
      suffixed(target, sizeof target, base, tag);
    }
  }

  struct dump_ctx *d;
  struct igprof_scratch scratch = {0};
  int rc = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  d = igprof_scratch_alloc(&scratch, sizeof *d);
  if (!d) { rc = ENOMEM; goto out; }
  d->scratch = scratch;

  if (target[0] == '|') rc = dump_to_command(d, target + 1);
  else if ((rc = dump_to_special(d, target)) < 0) rc = dump_to_file(d, target, sizeof target);
  if (rc == ECHILD) igprof_warn("dump command '%s' failed: the dump may be incomplete", target + 1);
  else if (rc) igprof_warn("could not write dump %s: %s", target, strerrorname_np(rc) ? strerrorname_np(rc) : "error");
  else {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long us = (long) ((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
    size_t resident = igprof_config.debug ? igprof_scratch_resident(&d->scratch) : 0;
    igprof_debug("dump written: %s (%s; %llu nodes, %llu live blocks, %ld us, %lld KB of working memory)", target,
                 why, (unsigned long long) d->nodes, (unsigned long long) d->leaks, us,
                 resident == (size_t) -1 ? -1LL : (long long) (resident / 1024));
    uint64_t table = igprof_live_table_bytes();
    if (table)
      igprof_debug("live table: %llu blocks in %llu KB", (unsigned long long) igprof_live_count(),
                   (unsigned long long) (table / 1024));
    igprof_walk_debug_stats();
  }
  scratch = d->scratch;
  igprof_scratch_release(&scratch);
out:
  pthread_mutex_unlock(&dump_lock);
  errno = saved_errno;
  return rc ? -1 : 0;
}

/* 0: not started; 1: being written; 2: written (or given up). A thread that
 * finds another one writing the final dump (a signal that ends the process
 * arriving in a second thread while the first one is in exit) waits for it,
 * or its own death would cut the dump short. */
static _Atomic int final_state;
static _Atomic pid_t final_writer;

void igprof_final_dump(const char *why)
{
  if (!igprof_is_own_process()) return;
  if (!igprof_counter_count()) return; /* only the tracer runs: no profile, it traces to the end */
  int expected = 1;
  if (!atomic_compare_exchange_strong(&igprof_state.active, &expected, 0)) {
    pid_t me = (pid_t) syscall(SYS_gettid);
    /* Up to 60 s: the writer may wait for something this thread holds (the
     * loader lock, in a dlopen it interrupted) and must not hang the exit. */
    for (int i = 0; i < 60000 && atomic_load(&final_state) == 1 && atomic_load(&final_writer) != me; ++i) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    return;
  }
  atomic_store(&final_writer, (pid_t) syscall(SYS_gettid));
  atomic_store(&final_state, 1);
  for (struct igprof_module *const *m = igprof_modules_begin(); m < igprof_modules_end(); ++m)
    if (*m && (*m)->enabled && (*m)->before_final_dump) (*m)->before_final_dump();
  igprof_dumper_flush();
  igprof_dump(IGPROF_DUMP_FINAL, NULL, why);
  atomic_store(&final_state, 2);
}

void igprof_dump_fork_prepare(void) { pthread_mutex_lock(&dump_lock); }
void igprof_dump_fork_parent(void) { pthread_mutex_unlock(&dump_lock); }
void igprof_dump_fork_child(void)
{
  pthread_mutex_init(&dump_lock, NULL);
  checkpoint_seq = 0;
  atomic_store(&final_state, 0);
}

/* The application's way to ask for a dump (inventory §2.4); dlsym-able. */
IGPROF_EXPORT int igprof_dump_now(const char *file)
{
  if (!atomic_load(&igprof_state.active)) return -1;
  int entered = igprof_enter();
  int rc = igprof_dump(IGPROF_DUMP_CHECKPOINT, file, "igprof_dump_now");
  if (entered) igprof_leave();
  return rc;
}
