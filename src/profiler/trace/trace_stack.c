/* Stacks of trace events: capture, symbols, -r filters, printing.
 *
 * Capture is the runtime's walker from the hook's caller (walk.h), so frame
 * 0 is the function that made the call - for a throw, the throwing function
 * itself - with no skip counts.
 *
 * Symbols come from the runtime's ELF reader (symbols.h): one snapshot of
 * the loaded modules, kept while the loader's add/remove counters say
 * nothing was loaded or unloaded, and read under one lock. Names are copied
 * into the event before the lock is dropped.
 *
 * Demangling uses __cxa_demangle, which allocates with malloc: it runs with
 * the guard held (so its allocations are not traced) and never under the
 * symbol lock, and never for an event raised inside malloc itself (a mapping
 * malloc makes while holding its arena lock), where a nested malloc could
 * deadlock.
 */
#define _GNU_SOURCE
#include "trace.h"
#include "symbols.h"
#include "walk.h"

#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_CHARS 512

static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static struct igprof_scratch sym_scratch;
static struct symbols *sym_snapshot;
static unsigned long long sym_adds, sym_subs;
static uintptr_t self_lo, self_hi; /* libigprof.so: its frames are never shown */

/* One resolved frame in the event's scratch area. */
struct frame {
  uintptr_t pc;
  uintptr_t sym_off, lib_off;
  int has_sym, has_lib;
  unsigned name_at, lib_at; /* offsets of NUL-terminated strings in the scratch */
};

struct resolved {
  int count, truncated, extra_ok;
  unsigned strings;          /* next free byte after the frames */
  const char *last_path;     /* the module name copied last, and where */
  unsigned last_path_at;
  struct frame extra;
  struct frame frames[];
};

struct trace_stack {
  uintptr_t *pcs; /* innermost first, call sites (return address - 1) */
  int depth;
  int truncated;
};

/* The fork gate. Walking (libunwind) and symbol snapshots call
 * dl_iterate_phdr, which holds the loader's module-list lock; a child forked
 * meanwhile inherits that lock held by a thread it does not have, and its
 * first walk hangs. So walkers register here and fork_prepare waits until
 * none is inside. No lock: the gate must never be waited for by a thread
 * that holds one of libc's allocator locks (see trace_output.c). */
static _Atomic int walkers;
static _Atomic int fork_pending;

static int gate_enter(int may_wait)
{
  for (;;) {
    if (atomic_load(&fork_pending)) {
      if (!may_wait) return -1;
      sched_yield();
      continue;
    }
    atomic_fetch_add(&walkers, 1);
    if (!atomic_load(&fork_pending)) break;
    atomic_fetch_sub(&walkers, 1);
  }
  trace_tls.walking = 1;
  return 0;
}

static void gate_leave(void)
{
  trace_tls.walking = 0;
  atomic_fetch_sub(&walkers, 1);
}

void trace_stack_fork_prepare(void)
{
  atomic_store(&fork_pending, 1);
  /* A signal handler that forks may have interrupted this very thread's walk. */
  int self = trace_tls.walking;
  while (atomic_load(&walkers) > self) sched_yield();
}

void trace_stack_fork_parent(void) { atomic_store(&fork_pending, 0); }

static void capture(struct trace_stack *s, void *caller)
{
  s->depth = 0;
  s->truncated = 0;
  s->pcs = NULL;
  if (igprof_thread_prepare() != 0) return;
  s->pcs = igprof_tls.walk_pcs;
  s->depth = igprof_walk_from_hook(s->pcs, igprof_config.depth, caller, &s->truncated);
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  unsigned long long *c = arg;
  c[0] = info->dlpi_adds;
  c[1] = info->dlpi_subs;
  return 1;
}

/* Under sym_lock: a snapshot that matches the modules loaded now. */
static struct symbols *current_symbols(void)
{
  unsigned long long c[2] = {0, 0};
  dl_iterate_phdr(read_counters, c);
  if (sym_snapshot && c[0] == sym_adds && c[1] == sym_subs) return sym_snapshot;
  if (sym_snapshot) {
    symbols_close(sym_snapshot);
    igprof_scratch_release(&sym_scratch);
  }
  sym_snapshot = symbols_snapshot(&sym_scratch);
  sym_adds = c[0];
  sym_subs = c[1];
  return sym_snapshot;
}

static unsigned put_string(struct trace_event *e, struct resolved *r, const char *s)
{
  size_t n = strnlen(s, NAME_MAX_CHARS);
  if (r->strings + n + 1 > e->scratch_cap) return 0; /* offset 0 is never a string: "" */
  unsigned at = r->strings;
  memcpy(e->scratch + at, s, n);
  e->scratch[at + n] = 0;
  r->strings += (unsigned) n + 1;
  return at;
}

static void resolve_one(struct trace_event *e, struct resolved *r, struct symbols *syms, uintptr_t pc,
                        struct frame *f)
{
  struct symbol_info si;
  memset(f, 0, sizeof *f);
  f->pc = pc;
  if (!syms) return;
  symbols_lookup(syms, pc, &si);
  if (si.module < 0) return;
  f->lib_off = pc - si.module_base;
  if (si.path != r->last_path) { /* neighbouring frames share their module's name */
    r->last_path = si.path;
    r->last_path_at = put_string(e, r, si.path[0] ? si.path : "?");
  }
  f->lib_at = r->last_path_at;
  f->has_lib = f->lib_at != 0;
  if (si.name) {
    f->sym_off = pc - si.symbol_start;
    f->name_at = put_string(e, r, si.name);
    f->has_sym = f->name_at != 0;
  }
}

static void resolve(struct trace_event *e, const struct trace_stack *s, uintptr_t extra)
{
  struct resolved *r = (struct resolved *) e->scratch;
  size_t room = (e->scratch_cap - sizeof *r) / 2 / sizeof(struct frame);
  int n = s->depth < (int) room ? s->depth : (int) room;
  r->count = n;
  r->truncated = s->truncated || n < s->depth;
  r->extra_ok = 0;
  r->last_path = NULL;
  r->last_path_at = 0;
  r->strings = (unsigned) (sizeof *r + sizeof(struct frame) * (size_t) n);
  e->scratch[r->strings++] = 0; /* the "" at the first string offset */
  pthread_mutex_lock(&sym_lock);
  struct symbols *syms = current_symbols();
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    /* A hook of the runtime between the program and the traced call (the
     * thread-stack mmap inside pthread_create) is not the program's frame. */
    if (s->pcs[i] >= self_lo && s->pcs[i] < self_hi) continue;
    resolve_one(e, r, syms, s->pcs[i], &r->frames[kept++]);
  }
  r->count = kept;
  if (extra) {
    resolve_one(e, r, syms, extra, &r->extra);
    r->extra_ok = r->extra.has_sym;
  }
  pthread_mutex_unlock(&sym_lock);
  e->resolved = 1;
}

int trace_stack_take(struct trace_event *e, void *caller, uintptr_t extra, int in_malloc)
{
  struct trace_stack s;
  if (gate_enter(!in_malloc) != 0) return -1;
  capture(&s, caller);
  resolve(e, &s, extra);
  gate_leave();
  return 0;
}

static const char *string_at(struct trace_event *e, unsigned at) { return e->scratch + at; }

const char *trace_extra_name(struct trace_event *e)
{
  struct resolved *r = (struct resolved *) e->scratch;
  if (!e->resolved) return NULL;
  return r->extra_ok ? string_at(e, r->extra.name_at) : NULL;
}

int trace_rejected(struct trace_event *e, const char *type, const char *type2)
{
  struct resolved *r = (struct resolved *) e->scratch;
  for (int k = 0; k < trace_config.nfilters; ++k) {
    const struct trace_filter *f = &trace_config.filters[k];
    if (f->type[0] && ((type && strstr(type, f->type)) || (type2 && strstr(type2, f->type)))) return 1;
    if (!e->resolved || (!f->function[0] && !f->library[0])) continue;
    for (int i = 0; i < r->count; ++i) {
      const struct frame *fr = &r->frames[i];
      if (f->function[0] && fr->has_sym && strstr(string_at(e, fr->name_at), f->function)) return 1;
      if (f->library[0] && fr->has_lib && strstr(string_at(e, fr->lib_at), f->library)) return 1;
    }
  }
  return 0;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static _Atomic(demangle_fn) cxa_demangle; /* set on dlopen while others may read it */

void trace_stack_init(const char *library)
{
  /* There only if the program uses libstdc++; `library` names where it came
   * from when it was loaded later (then it is not in the global scope).
   * Looked up outside any hook: lookups take the loader lock and may allocate. */
  size_t size;
  if (!self_hi) igprof_module_span_at((uintptr_t) trace_stack_init, &self_lo, &self_hi);
  if (atomic_load(&cxa_demangle)) return;
  atomic_store(&cxa_demangle, (demangle_fn) hook_lookup("__cxa_demangle", NULL, library, &size));
}

void trace_demangle(const char *name, char *out, size_t cap)
{
  int status = -1;
  demangle_fn demangle = atomic_load(&cxa_demangle);
  char *d = demangle ? demangle(name, NULL, NULL, &status) : NULL;
  igprof_format(out, cap, "%s", status == 0 && d ? d : name);
  free(d); /* guard held: goes straight to libc, untraced */
}

void trace_stack_print(struct trace_event *e, int may_demangle)
{
  struct resolved *r = (struct resolved *) e->scratch;
  char demangled[NAME_MAX_CHARS + 1];
  if (!e->resolved) {
    trace_event_printf(e, "  ... (no stack: taken while the process forked)\n");
    return;
  }
  for (int i = 0; i < r->count; ++i) {
    const struct frame *f = &r->frames[i];
    const char *name = f->has_sym ? string_at(e, f->name_at) : NULL;
    if (name && may_demangle && trace_config.demangle && name[0] == '_' && name[1] == 'Z') {
      trace_demangle(name, demangled, sizeof demangled);
      name = demangled;
    }
    trace_event_printf(e, "  %d: %p ", i, (void *) f->pc);
    if (name) trace_event_printf(e, "%s + 0x%lx", name, (unsigned long) f->sym_off);
    else trace_event_printf(e, "@?%p", (void *) f->pc);
    if (f->has_lib)
      trace_event_printf(e, " [%s + 0x%lx]\n", string_at(e, f->lib_at), (unsigned long) f->lib_off);
    else
      trace_event_printf(e, " [?]\n");
  }
  if (r->truncated) trace_event_printf(e, "  ... (stack deeper than %d frames)\n", r->count);
}

/* In a forked child (see trace_output_fork_child for why no lock is held
 * across fork): a snapshot another thread was replacing is dropped. */
void trace_stack_fork_child(void)
{
  atomic_store(&walkers, trace_tls.walking);
  atomic_store(&fork_pending, 0);
  if (pthread_mutex_trylock(&sym_lock) != 0) {
    sym_snapshot = NULL;
    sym_scratch.head = NULL;
  }
  pthread_mutex_init(&sym_lock, NULL);
}
