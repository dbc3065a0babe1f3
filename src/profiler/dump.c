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
#include "internal.h"
#include "symbols.h"
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

int igprof_counter_has_leaks(int id);
int igprof_counter_is_sum(int id);

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

static void final_name(char *dst, size_t cap)
{
  if (igprof_config.output[0]) igprof_expand_name(dst, cap, igprof_config.output);
  else igprof_format(dst, cap, "igprof.%s.%d%s", igprof_state.program, (int) igprof_state.pid,
                     igprof_config.gzip ? ".gz" : "");
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
 * exec) try name-2, name-3, ... The chosen name goes back into name. */
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
 * array of the nodes that exist at that moment with their links as indexes.
 * Every later step (which nodes carry data, the leaks, the output order)
 * reads the array, not the nodes, so the tree's nodes are visited once (a
 * compiler's 30 000 nodes lie all over the arena: each visit is a cache
 * miss). The one write, on that visit, is the node's index in the array,
 * tagged with the dump's generation, so a live block can find its node's
 * entry; no pass is needed afterwards to clear it. */
struct node_info {
  struct igprof_node *node;
  uintptr_t pc;
  struct igprof_counter_value *counters;
  struct leak *leaks;
  uint32_t parent;      /* index, or NO_INDEX for the root's children */
  uint32_t first_child; /* in the tree's sibling order */
  uint32_t next_sibling;
  int has_data;
};

#define NO_INDEX UINT32_MAX

static int counters_nonzero(const struct igprof_counter_value *c)
{
  if (!c) return 0;
  for (int i = 0; i < igprof_counter_count(); ++i)
    if (atomic_load_explicit(&c[i].ticks, memory_order_relaxed) ||
        atomic_load_explicit(&c[i].peak, memory_order_relaxed) ||
        atomic_load_explicit(&c[i].value, memory_order_relaxed))
      return 1; /* every slot in use, whatever the order */
  return 0;
}

struct dump_ctx {
  struct igprof_scratch scratch;
  struct igprof_out out;
  struct symbols *symbols;
  /* the snapshot: infos[0..count); a node of it has dump_gen == gen */
  struct node_info *infos;
  uint32_t count, gen;
  /* pc -> FN id, open addressing */
  uintptr_t *fn_keys;
  uint32_t *fn_ids;
  uint64_t *fn_offsets; /* pc - symbol start, written after the FN id */
  size_t fn_mask;
  uint32_t next_fn;
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

/* The snapshot: one pre-order walk, at most `cap` nodes. */
static void take_snapshot(struct dump_ctx *d, struct igprof_node *root, uint64_t cap)
{
  d->infos = igprof_scratch_alloc(&d->scratch, sizeof *d->infos * (size_t) (cap ? cap : 1));
  if (!d->infos) { d->no_memory = 1; return; }
  /* A generation tells this dump's snapshot from older ones (0: never). */
  if (++dump_generation == 0) ++dump_generation;
  d->gen = dump_generation;
  /* The entry of the current node's parent, and of its previous sibling
   * (NO_INDEX: it is the first child), to link the current one in. */
  uint32_t parent = NO_INDEX, prev_sibling = NO_INDEX;
  struct igprof_node *n = atomic_load_explicit(&root->children, memory_order_acquire);
  while (n && d->count < cap) {
    uint32_t i = d->count++;
    struct node_info *info = &d->infos[i];
    info->node = n;
    info->pc = n->pc;
    info->counters = atomic_load_explicit(&n->counters, memory_order_acquire);
    /* Read in a second pass: by then the block has come, where reading it
     * here would wait for it on every node, in series with the node walk. */
    if (info->counters) __builtin_prefetch(info->counters);
    info->leaks = NULL;
    info->parent = parent;
    info->first_child = info->next_sibling = NO_INDEX;
    if (prev_sibling != NO_INDEX) d->infos[prev_sibling].next_sibling = i;
    else if (parent != NO_INDEX) d->infos[parent].first_child = i;
    n->dump_index = i;
    n->dump_gen = d->gen;
    struct igprof_node *c = atomic_load_explicit(&n->children, memory_order_acquire);
    if (c) { /* down */
      parent = i;
      prev_sibling = NO_INDEX;
      n = c;
      continue;
    }
    /* across, or up until a sibling is found */
    uint32_t at = i;
    while (n && !n->sibling) {
      n = n->parent == root ? NULL : n->parent;
      at = d->infos[at].parent;
    }
    if (!n) break;
    n = n->sibling;
    prev_sibling = at;
    parent = d->infos[at].parent;
  }
  for (uint32_t i = 0; i < d->count; ++i) d->infos[i].has_data = counters_nonzero(d->infos[i].counters);
}

static void attach_leak(void *arg, uintptr_t addr, struct igprof_node *node, uint64_t size)
{
  struct dump_ctx *d = arg;
  uint32_t i = index_of(d, node);
  if (i == NO_INDEX) return; /* node created after the snapshot began */
  struct leak *l = igprof_scratch_alloc(&d->scratch, sizeof *l);
  if (!l) { d->no_memory = 1; return; }
  l->addr = addr;
  l->size = size;
  l->next = d->infos[i].leaks;
  d->infos[i].leaks = l;
  d->infos[i].has_data = 1;
  d->leaks++;
}

/* The FN table slot of pc; *fresh says whether pc was new (then the slot
 * has its id, and the caller sets its offset). */
static size_t fn_slot(struct dump_ctx *d, uintptr_t pc, int *fresh)
{
  size_t i = (size_t) ((pc * 0x9e3779b97f4a7c15ull) >> 20) & d->fn_mask;
  while (d->fn_keys[i] && d->fn_keys[i] != pc) i = (i + 1) & d->fn_mask;
  *fresh = !d->fn_keys[i];
  if (*fresh) {
    d->fn_keys[i] = pc;
    d->fn_ids[i] = d->next_fn++;
  }
  return i;
}

static void write_fn(struct dump_ctx *d, uintptr_t pc)
{
  struct igprof_out *o = &d->out;
  int fresh;
  size_t slot = fn_slot(d, pc, &fresh);
  igprof_out_str(o, "FN");
  igprof_out_hex(o, d->fn_ids[slot]);
  if (!fresh) {
    /* Symbolised at its first node: only the offset is written again. */
    igprof_out_char(o, '+');
    igprof_out_hex(o, d->fn_offsets[slot]);
    return;
  }
  struct symbol_info si;
  if (pc == IGPROF_PC_TRUNCATED) {
    si = (struct symbol_info){.module = -1, .path = "", .name = "@igprof_truncated_stack"};
  } else {
    symbols_lookup(d->symbols, pc, &si);
  }
  d->fn_offsets[slot] = si.name && pc != IGPROF_PC_TRUNCATED ? pc - si.symbol_start : 0;
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
  igprof_out_hex(o, d->fn_offsets[slot]);
}

static void write_counters(struct dump_ctx *d, const struct node_info *info)
{
  struct igprof_out *o = &d->out;
  struct igprof_counter_value *c = info->counters;
  if (!c) return;
  for (int i = 0; i < igprof_counter_count(); ++i) {
    const struct igprof_counter_value *v = &c[igprof_counter_slot(i)];
    int64_t ticks = atomic_load_explicit(&v->ticks, memory_order_relaxed);
    int64_t value = atomic_load_explicit(&v->value, memory_order_relaxed);
    int64_t peak = igprof_counter_is_sum(i) ? value : atomic_load_explicit(&v->peak, memory_order_relaxed);
    int has_leaks = igprof_counter_has_leaks(i) && info->leaks;
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
      for (struct leak *l = info->leaks; l; l = l->next) {
        igprof_out_str(o, ";LK=(0x");
        igprof_out_hex(o, l->addr);
        igprof_out_char(o, ',');
        igprof_out_hex(o, l->size);
        igprof_out_char(o, ')');
      }
  }
}

/* Children in ascending pc order (indexes into d->infos). */
static void sort_kids(const struct dump_ctx *d, uint32_t *v, size_t n)
{
  static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
  for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; ++g) {
    size_t gap = gaps[g];
    if (gap >= n) continue;
    for (size_t i = gap; i < n; ++i) {
      uint32_t x = v[i];
      size_t j = i;
      while (j >= gap && d->infos[v[j - gap]].pc > d->infos[x].pc) { v[j] = v[j - gap]; j -= gap; }
      v[j] = x;
    }
  }
}

struct frame {
  uint32_t *kids;
  size_t count, next;
};

/* The kids of `first` (a sibling chain) that carry data, sorted. */
static uint32_t *collect_kids(struct dump_ctx *d, uint32_t first, size_t *count)
{
  size_t n = 0;
  for (uint32_t c = first; c != NO_INDEX; c = d->infos[c].next_sibling)
    if (d->infos[c].has_data) ++n;
  *count = n;
  if (!n) return NULL;
  uint32_t *kids = igprof_scratch_alloc(&d->scratch, sizeof *kids * n);
  if (!kids) { d->no_memory = 1; *count = 0; return NULL; }
  size_t k = 0;
  for (uint32_t c = first; c != NO_INDEX; c = d->infos[c].next_sibling)
    if (d->infos[c].has_data) kids[k++] = c;
  sort_kids(d, kids, n);
  return kids;
}

/* Depth-first output with an explicit stack (trees can be deeper than a
 * small thread stack allows recursion), children in ascending pc order. */
static void write_tree(struct dump_ctx *d)
{
  int cap = igprof_config.depth + 8;
  struct frame *stack = igprof_scratch_alloc(&d->scratch, sizeof *stack * (size_t) cap);
  if (!stack) { d->no_memory = 1; return; }
  int top = 0;
  /* The root's children are the snapshot's top-level sibling chain. */
  uint32_t first = d->count ? 0 : NO_INDEX;
  for (;;) {
    size_t count;
    uint32_t *kids = collect_kids(d, first, &count);
    if (d->no_memory) return;
    if (top < cap) stack[top++] = (struct frame){kids, count, 0};
    /* Next node to print: first unvisited child up the stack. */
    first = NO_INDEX;
    int found = 0;
    while (top > 0) {
      struct frame *f = &stack[top - 1];
      if (f->next < f->count) {
        uint32_t i = f->kids[f->next++];
        igprof_out_char(&d->out, 'C');
        igprof_out_hex(&d->out, (uint64_t) top);
        igprof_out_char(&d->out, ' ');
        write_fn(d, d->infos[i].pc);
        write_counters(d, &d->infos[i]);
        igprof_out_char(&d->out, '\n');
        d->nodes++;
        first = d->infos[i].first_child;
        found = 1;
        break;
      }
      --top;
    }
    if (!found) return;
  }
}

static void write_header(struct igprof_out *o)
{
  igprof_out_str(o, "P=(HEX ID=");
  igprof_out_dec(o, (uint64_t) igprof_state.pid);
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
  for (uint32_t i = d->count; i-- > 0;)
    if (d->infos[i].has_data && d->infos[i].parent != NO_INDEX) d->infos[d->infos[i].parent].has_data = 1;
  size_t slots = 64;
  while (slots < (size_t) d->count * 2) slots <<= 1;
  d->fn_keys = igprof_scratch_alloc(&d->scratch, sizeof *d->fn_keys * slots);
  d->fn_ids = igprof_scratch_alloc(&d->scratch, sizeof *d->fn_ids * slots);
  d->fn_offsets = igprof_scratch_alloc(&d->scratch, sizeof *d->fn_offsets * slots);
  d->fn_mask = slots - 1;
  d->symbols = symbols_snapshot(&d->scratch);
  int nmod = symbols_count(d->symbols);
  d->module_fid = igprof_scratch_alloc(&d->scratch, sizeof(int) * (size_t) (nmod + 1));
  if (!d->fn_keys || !d->fn_ids || !d->fn_offsets || !d->module_fid) d->no_memory = 1;
  if (!d->no_memory) {
    for (int i = 0; i < nmod; ++i) d->module_fid[i] = -1;
    d->nofile_fid = -1;
    write_header(&d->out);
    write_tree(d);
    igprof_out_finish(&d->out);
  }
  symbols_close(d->symbols);
  if (d->no_memory) return ENOMEM;
  return d->out.failed;
}

/* ---------------------------------------------------------------- */
/* Entry points                                                      */
/* ---------------------------------------------------------------- */

int igprof_dump(enum igprof_dump_kind kind, const char *name, const char *why)
{
  char target[IGPROF_PATH_MAX], tmp[IGPROF_PATH_MAX + 64];
  int saved_errno = errno;
  pthread_mutex_lock(&dump_lock);
  if (name && name[0]) {
    igprof_expand_name(target, sizeof target, name);
  } else {
    final_name(target, sizeof target);
    if (kind == IGPROF_DUMP_CHECKPOINT && target[0] != '|') {
      char tag[24], base[IGPROF_PATH_MAX];
      igprof_format(tag, sizeof tag, "%u", ++checkpoint_seq);
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

  if (target[0] == '|') {
    int fd;
    pid_t child = spawn_command(target + 1, &fd, &d->scratch);
    if (child < 0) { rc = errno; }
    else {
      rc = write_dump(d, fd);
      close(fd);
      int status;
      while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    }
  } else {
    igprof_format(tmp, sizeof tmp, "%s.igprof-tmp.%d", target, (int) igprof_state.pid);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) { rc = errno; }
    else {
      rc = write_dump(d, fd);
      if (close(fd) != 0 && !rc) rc = errno;
      if (!rc && publish(tmp, target, sizeof target) != 0) rc = errno;
      if (rc) unlink(tmp);
    }
  }
  if (rc) igprof_warn("could not write dump %s: %s", target, strerrorname_np(rc) ? strerrorname_np(rc) : "error");
  else {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long us = (long) ((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
    igprof_debug("dump written: %s (%s; %llu nodes, %llu live blocks, %ld us)", target, why,
                 (unsigned long long) d->nodes, (unsigned long long) d->leaks, us);
    igprof_walk_debug_stats();
  }
  scratch = d->scratch;
  igprof_scratch_release(&scratch);
out:
  pthread_mutex_unlock(&dump_lock);
  errno = saved_errno;
  return rc ? -1 : 0;
}

void igprof_final_dump(const char *why)
{
  if (!igprof_is_own_process()) return;
  if (!igprof_counter_count()) return; /* only the tracer runs: no profile, it traces to the end */
  int expected = 1;
  if (!atomic_compare_exchange_strong(&igprof_state.active, &expected, 0)) return;
  for (struct igprof_module *const *m = igprof_modules_begin(); m < igprof_modules_end(); ++m)
    if (*m && (*m)->enabled && (*m)->before_final_dump) (*m)->before_final_dump();
  igprof_dumper_flush();
  igprof_dump(IGPROF_DUMP_FINAL, NULL, why);
}

void igprof_dump_fork_prepare(void) { pthread_mutex_lock(&dump_lock); }
void igprof_dump_fork_parent(void) { pthread_mutex_unlock(&dump_lock); }
void igprof_dump_fork_child(void)
{
  pthread_mutex_init(&dump_lock, NULL);
  checkpoint_seq = 0;
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
