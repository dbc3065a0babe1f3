/* Internal API of libigprof.so, shared by the core and the profiler modules.
 *
 * Everything here is hidden (the library is built with -fvisibility=hidden);
 * only igprof.h is exported. src/profiler/INTERNALS.md explains how a module
 * plugs in; this header is the contract.
 *
 * Invariants (design.md §3): no libc allocation on any path below (memory
 * comes from arena.c), no printf family (format.c), and every hook brackets
 * its work with igprof_enter()/igprof_leave() so that what the profiler does
 * is never profiled.
 */
#ifndef IGPROF_INTERNAL_H
#define IGPROF_INTERNAL_H

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hook.h"

struct dl_phdr_info;
/* The address range [*lo, *hi) a loaded module's PT_LOAD segments cover
 * (*lo >= *hi when it has none). In symbols.c. */
void igprof_module_span(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi);
/* The same for the module holding `addr` (*lo = *hi = 0 if none). */
void igprof_module_span_at(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

#define IGPROF_EXPORT __attribute__((visibility("default")))
#define IGPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define IGPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------ */
/* Per-thread state and the re-entrancy guard                          */
/* ------------------------------------------------------------------ */

struct igprof_node;
struct igprof_counter_value;

/* What a thread is doing, as far as the profiler is concerned (the guard).
 * BUSY is the profiler's own work: its per-thread buffers are in use and it
 * may hold a lock (a live-table shard, the dump lock), so nothing of the
 * profiler may run again on this thread, and a signal that would make it
 * dump is held back until the work is done (signals.c). THROUGH is a hook
 * running the original function (or the process ending after its final
 * dump): the profiler's data is consistent and it holds no lock, so a dump
 * may run, but hooks still pass straight through (inner calls of the
 * original are not the application's). */
enum igprof_guard { IGPROF_GUARD_OFF = 0, IGPROF_GUARD_BUSY = 1, IGPROF_GUARD_THROUGH = 2 };

/* Signals held back while the thread was BUSY, delivered again when it
 * leaves the profiler (signals.c). Two keep their siginfo; more are rare. */
#define IGPROF_DEFERRED_SLOTS 2
struct igprof_deferred {
  uint64_t pending;             /* bit (sig - 1) for each signal held back */
  int sig[IGPROF_DEFERRED_SLOTS];
  siginfo_t info[IGPROF_DEFERRED_SLOTS];
};

/* Lives in initial-exec TLS, so touching it never allocates or takes the
 * loader lock, in a hook or in a signal handler. */
struct igprof_thread {
  int guard;                    /* enum igprof_guard: non-zero inside the profiler */
  int ready;                    /* buffers below allocated */
  char *arena_next, *arena_end; /* this thread's bump chunk (arena.c) */
  uintptr_t *walk_pcs;          /* igprof_config.depth + slack entries, innermost first */
  uintptr_t *cache_pcs;         /* last stack pushed, outermost first */
  struct igprof_node **cache_nodes;
  int cache_depth;
  int walk_capacity;            /* entries in walk_pcs */
  uint64_t walk_failures;       /* hook walks that never met the caller's frame */
  /* The sigjmp_buf of a libunwind walk under way on this thread, which a
   * fault inside libunwind leaves by (walk.c); NULL otherwise. */
  void *unwind_escape;
  uint64_t unwind_faults;       /* libunwind walks ended by a fault */
  void *altstack;               /* the signal stack the runtime gave this thread (altstack.c) */
  /* A block a hook took out of the live table, not yet released from its
   * node's MEM_LIVE: the original (free, realloc) runs in between. A dump
   * made on this thread meanwhile (a fatal signal inside the original)
   * releases it first (igprof_mem_settle), so the dump's figures agree. */
  struct igprof_node *releasing;
  uint64_t releasing_size;
  int64_t releasing_blocks;     /* its blocks: 1, or its weight when sampled */
  uintptr_t last_alloc;         /* --lifetimes: this thread's latest allocation (mem.c) */
  struct igprof_deferred deferred;
  /* --sample (mem_sample.c): bytes left before the next sampled allocation,
   * this thread's random state, and whether it was seeded. */
  int64_t sample_left;
  uint64_t sample_rng;
  int sample_seeded;
};

extern __thread struct igprof_thread igprof_tls __attribute__((tls_model("initial-exec")));

/* Try to enter the profiler. Returns 0 (and does nothing) if this thread is
 * already inside it: the caller must then go straight to the original. */
static inline int igprof_enter(void)
{
  if (igprof_tls.guard) return 0;
  igprof_tls.guard = IGPROF_GUARD_BUSY;
  atomic_signal_fence(memory_order_seq_cst);
  return 1;
}

/* Deliver again the signals held back while this thread was BUSY. */
void igprof_signals_redeliver(void);

static inline void igprof_leave(void)
{
  atomic_signal_fence(memory_order_seq_cst);
  igprof_tls.guard = IGPROF_GUARD_OFF;
  atomic_signal_fence(memory_order_seq_cst);
  if (IGPROF_UNLIKELY(igprof_tls.deferred.pending)) igprof_signals_redeliver();
}

/* Around a hook's call of the original function (guard held): the thread is
 * not doing the profiler's work meanwhile, so a fatal signal there (abort()
 * inside free on a double free, a fault inside the original) still dumps. */
static inline void igprof_through_begin(void)
{
  atomic_signal_fence(memory_order_seq_cst);
  igprof_tls.guard = IGPROF_GUARD_THROUGH;
  atomic_signal_fence(memory_order_seq_cst);
}

static inline void igprof_through_end(void)
{
  atomic_signal_fence(memory_order_seq_cst);
  igprof_tls.guard = IGPROF_GUARD_BUSY;
  atomic_signal_fence(memory_order_seq_cst);
}

/* Allocate this thread's walk and cache buffers if not done yet. Call with
 * the guard held. Returns 0 on success, -1 if memory could not be had. */
int igprof_thread_prepare(void);

/* ------------------------------------------------------------------ */
/* Global configuration and state                                      */
/* ------------------------------------------------------------------ */

#define IGPROF_DEPTH_DEFAULT 256
#define IGPROF_DEPTH_MAX 65536
#define IGPROF_PATH_MAX 4096

struct igprof_config {
  int debug;                          /* -d */
  int gzip;                           /* -z */
  int depth;                          /* frames kept per stack */
  int dump_signal;                    /* -S, 0 if none */
  int unwind_method;                  /* enum walk_method */
  char output[IGPROF_PATH_MAX];       /* -o as given ("" = default name) */
  char dump_flag[IGPROF_PATH_MAX];    /* -D flag file ("" = none) */
  char target[256];                   /* -t ("" = every process) */
};

extern struct igprof_config igprof_config;

/* Process-wide run state. */
struct igprof_state {
  _Atomic int active;     /* hooks record events; 0 before start and after the final dump */
  pid_t pid;              /* pid this state belongs to (updated in a forked child) */
  char program[256];      /* basename of program_invocation_name */
  char invocation[1024];  /* program_invocation_name at start-up (a program may later
                           * overwrite its argv area, e.g. to set its title) */
  char exe[IGPROF_PATH_MAX]; /* /proc/self/exe at start-up */
  char start_dir[IGPROF_PATH_MAX]; /* the working directory at start-up ("" if unknown):
                                    * where relative dump names go (dump.c) */
  double tick_period;     /* T= in the dump header (0 unless a sampler sets it) */
};

extern struct igprof_state igprof_state;

/* 0 while the thread that started the process is the only one that can run
 * the profiler's code; 1 from the first pthread_create (set before the new
 * thread exists, never cleared but in a forked child, which has one thread).
 * With one thread, the counters and the live table skip their locked
 * read-modify-writes: nothing else can touch them at the same time (a signal
 * handler on the same thread never enters while the guard is held). A thread
 * made with a raw clone() and no pthread_create is not seen: see
 * docs/running.md. */
extern _Atomic int igprof_threaded;

static inline int igprof_one_thread(void)
{
  return !atomic_load_explicit(&igprof_threaded, memory_order_relaxed);
}

/* Note that a second thread is about to exist (call before creating it). */
void igprof_note_threads(void);

/* Is the caller the process whose state this is (not a vfork/clone child
 * sharing our memory)? */
int igprof_is_own_process(void);

/* ------------------------------------------------------------------ */
/* Modules                                                             */
/* ------------------------------------------------------------------ */

/* A profiler module ("mem", "perf", "trace", ...). Every callback is
 * optional. Register with IGPROF_MODULE(var) at file scope: the core finds
 * modules through a linker section, so adding a module means adding its .c
 * file to the library's sources and nothing else. */
struct igprof_module {
  const char *name;  /* token in $IGPROF that enables it: "mem" */
  /* "name:key" or "name:key=value" token. Return 0, or -1 after writing a
   * one-line reason into err (capacity errlen). value is NULL without '='. */
  int (*option)(const char *key, const char *value, char *err, size_t errlen);
  /* A module configured from an environment variable of its own (the
   * tracer: "IGTRACE") names it in `environment`: the runtime starts when
   * it is set, even without $IGPROF, and calls configure(value) before
   * $IGPROF is read. Return 1 if this process is to run the module (set
   * `enabled`), 0 if not, -1 if the value is malformed (said on stderr). */
  const char *environment;
  int (*configure)(const char *value);
  /* Called once when enabled, after every option was parsed: define
   * counters, install hooks. Return -1 to disable the module (after saying
   * why on stderr). */
  int (*start)(void);
  void (*thread_start)(void);  /* in a new thread, before its start routine */
  void (*thread_exit)(void);   /* in an exiting thread (pthread key destructor) */
  void (*fork_prepare)(void);  /* take this module's locks */
  void (*fork_parent)(void);   /* release them */
  void (*fork_child)(void);    /* release/reinitialise them and reset per-process data */
  void (*before_exec)(void);   /* disarm anything that must not survive exec */
  void (*exec_failed)(void);   /* exec returned: re-arm */
  void (*before_final_dump)(void); /* stop producing events (timers off) */
  /* A library was just loaded (dlopen) at `path`: hook its own definitions
   * of functions this module hooks, if it has any (igprof_hook_at). */
  void (*library_loaded)(const char *path);
  int enabled;                 /* set by the core */
};

#define IGPROF_MODULE(var)                                                        \
  static struct igprof_module *const igprof_module_entry_##var                    \
      __attribute__((used, section("igprof_modules"), aligned(sizeof(void *)))) = &var

/* Iterate enabled modules: for (m = igprof_modules_begin(); ...) */
struct igprof_module *const *igprof_modules_begin(void);
struct igprof_module *const *igprof_modules_end(void);

/* Install one hook for a module; logs the status with -d and warns on
 * stderr (even without -d) when `required` and it failed. An
 * already-hooked function whose existing chain is ours counts as success
 * (e.g. aligned_alloc and memalign sharing one address).
 * Returns the chain to call the original, or NULL on failure. */
void *igprof_hook(const char *module, const char *function, void *replacement, int required);
/* The same for a definition found by address (e.g. in a library loaded later). */
void *igprof_hook_at(const char *module, const char *function, void *address, size_t size,
                     void *replacement, int required);
/* Is `address` the entry of a function we hooked? */
int igprof_hook_is_installed(void *address);

/* Was libunwind.so.8 opened (privately, see unwind_private.c)? */
int igprof_unwind_available(void);

/* ------------------------------------------------------------------ */
/* Counters and the call tree                                          */
/* ------------------------------------------------------------------ */

#define IGPROF_MAX_COUNTERS 12

enum igprof_counter_kind {
  IGPROF_COUNTER_TICK, /* value += amount; peak = high-water mark of value */
  IGPROF_COUNTER_MAX,  /* value = max(value, amount); peak stays 0 */
  IGPROF_COUNTER_SUM,  /* value += amount, never released: peak is written as value
                        * (saves tracking it on every event; MEM_TOTAL, PERF_TICKS) */
  IGPROF_COUNTER_SNAPSHOT, /* its block entry is the module's own state; the dump asks
                            * the counter's reader for (ticks, value, peak) (MEM_PEAK) */
};

/* A SNAPSHOT counter's figures for one node at dump time, from its counter
 * block (which exists). */
typedef void (*igprof_counter_reader)(const struct igprof_node *n, const struct igprof_counter_value *block,
                                      int64_t out[3]);

/* Define a counter (in module start only). Counters are written in
 * definition order. `leaks` asks the dump writer to list the live table's
 * blocks of each node as ;LK=(addr,size) after this counter.
 * Returns the counter id, or -1 if too many. */
int igprof_counter_define(const char *name, enum igprof_counter_kind kind, int leaks);
/* The same for a SNAPSHOT counter. */
int igprof_counter_define_snapshot(const char *name, igprof_counter_reader reader);
/* The reader of counter `id`, NULL unless it is a SNAPSHOT counter. */
igprof_counter_reader igprof_counter_reader_of(int id);
/* The counter's entry in a node's counter block (not its id: see tree.c),
 * fixed once the first block is made (every module has started). */
extern int igprof_counter_slots[IGPROF_MAX_COUNTERS];
static inline int igprof_counter_slot(int id) { return igprof_counter_slots[id]; }
int igprof_counter_count(void);
const char *igprof_counter_name(int id);
int igprof_counter_has_leaks(int id); /* its nodes carry ;LK= entries */
int igprof_counter_is_sum(int id);    /* a SUM counter: its peak is its value */

struct igprof_counter_value {
  _Atomic int64_t ticks, value, peak;
};

/* A call-tree node: one frame of one distinct stack. Created lock-free
 * (CAS on the parent's child list), never freed. */
struct igprof_node {
  uintptr_t pc;                             /* call site, or IGPROF_PC_TRUNCATED */
  struct igprof_node *parent;
  struct igprof_node *sibling;              /* immutable once published */
  struct igprof_node *hash_next;            /* chain in the (parent, pc) index; immutable once published */
  _Atomic(struct igprof_node *) children;
  _Atomic(struct igprof_counter_value *) counters; /* NULL until first tick */
  uint32_t dump_gen, dump_index;            /* the dump writer's (dump.c) */
  /* The heap maximum this node's saved MEM_LIVE belongs to (heap.h): on the
   * node's line, which an event reads anyway, not in its counter block. */
  uint64_t peak_gen;
};

/* Nodes created so far (a bound on the tree's size, for the dump). */
uint64_t igprof_tree_node_count(void);

/* Synthetic outermost frame of a stack deeper than igprof_config.depth. */
#define IGPROF_PC_TRUNCATED ((uintptr_t) 1)
/* The one frame of every allocation outside --min-size/--max-size: no
 * stack walked, written as N=(@igprof_size_filtered). */
#define IGPROF_PC_SIZE_FILTERED ((uintptr_t) 2)

struct igprof_node *igprof_tree_root(void);

/* The node's counter block (one entry per counter defined), allocated on
 * first use; NULL if out of memory. For a module that updates several
 * counters per event (then use igprof_counter_block_add). */
struct igprof_counter_value *igprof_node_counters(struct igprof_node *n);
void igprof_counter_block_add(struct igprof_counter_value *block, int id, int64_t ticks, int64_t amount);

/* Add ticks/amount to counter `id` of node n (lock-free, any thread). */
void igprof_counter_add(struct igprof_node *n, int id, int64_t ticks, int64_t amount);

/* Push a stack (innermost first, as the walker returns it) into the tree and
 * return the leaf node. Uses the thread's cache of the previous stack, so a
 * common prefix costs one compare per frame. Guard must be held. */
struct igprof_node *igprof_tree_push(const uintptr_t *pcs, int n, int truncated);

/* Walk from a hook (caller_ret = __builtin_return_address(0) of the
 * replacement) or from a signal context and push: the usual event path.
 * Guard must be held. Return NULL if no memory. */
struct igprof_node *igprof_capture_from_hook(void *caller_ret, const void *frame);
struct igprof_node *igprof_capture_from_signal(const void *ucontext);
/* The node of a one-frame stack `pc` (a synthetic frame), no walk. */
struct igprof_node *igprof_capture_synthetic(uintptr_t pc);

/* Call fn for every node, parents before children (lock-free: nodes added
 * meanwhile may or may not be seen). */
void igprof_tree_foreach(void (*fn)(void *arg, struct igprof_node *n), void *arg);
/* Zero the counters whose ids are set in mask (bit id), in every node:
 * a module's fork_child uses it to start the child from zero. */
void igprof_tree_reset_counters(uint32_t mask);

/* ------------------------------------------------------------------ */
/* Live table: address -> (node, size), sharded, for MEM_LIVE leaks     */
/* ------------------------------------------------------------------ */

void igprof_live_insert(uintptr_t addr, struct igprof_node *node, uint64_t size);
/* --lifetimes: the same with the block's allocation time, which remove_born
 * gives back; only after igprof_live_keep_births (before the first insert),
 * and then for every block. */
void igprof_live_keep_births(void);
void igprof_live_insert_born(uintptr_t addr, struct igprof_node *node, uint64_t size, int64_t birth);
/* Hint: an insert for addr is coming (see live.c). */
void igprof_live_prefetch(uintptr_t addr);
/* Returns 1 and the record if addr was live, else 0. */
int igprof_live_remove(uintptr_t addr, struct igprof_node **node, uint64_t *size);
int igprof_live_remove_born(uintptr_t addr, struct igprof_node **node, uint64_t *size, int64_t *birth);
/* Call fn for every live block, one shard locked at a time. */
void igprof_live_foreach(void (*fn)(void *arg, uintptr_t addr, struct igprof_node *node, uint64_t size),
                         void *arg);
void igprof_live_fork_prepare(void);
void igprof_live_fork_parent(void);
void igprof_live_fork_child(void); /* unlock and empty */
uint64_t igprof_live_count(void);
/* Bytes the live table's slots take (shards, births, the wide table). */
uint64_t igprof_live_table_bytes(void);

/* ------------------------------------------------------------------ */
/* Allocation events for other modules (mem.c)                         */
/* ------------------------------------------------------------------ */

enum igprof_alloc_fn {
  IGPROF_ALLOC_MALLOC, IGPROF_ALLOC_CALLOC, IGPROF_ALLOC_REALLOC, IGPROF_ALLOC_REALLOCARRAY,
  IGPROF_ALLOC_MEMALIGN, IGPROF_ALLOC_POSIX_MEMALIGN, IGPROF_ALLOC_ALIGNED_ALLOC,
  IGPROF_ALLOC_VALLOC, IGPROF_ALLOC_PVALLOC, IGPROF_ALLOC_FREE,
};

/* One malloc-family call. n is the size (calloc/reallocarray: the count, m
 * the element size; else m = 0); old is realloc's or free's block; result
 * is NULL when the call failed (and for free); align for the memalign family. */
struct igprof_alloc_call {
  enum igprof_alloc_fn fn;
  void *result, *old;
  size_t n, m, align;
  void *caller;
};

/* Told about every successful malloc-family allocation and every free,
 * after the real call, with the guard held, on the allocating thread.
 * `caller` is the return address into the application (as for
 * igprof_capture_from_hook). realloc is a free of the old block (if any)
 * followed by an allocation. */
struct igprof_alloc_listener {
  void (*on_alloc)(void *ptr, size_t size, void *caller);
  void (*on_free)(void *ptr, void *caller);
  /* Optional: every call as the application made it, failed ones too (a
   * tracer's view). free() is told before the real free, the others after
   * the real call; errno is preserved around the listener. */
  void (*on_call)(const struct igprof_alloc_call *call);
};

/* Register from a module's start(); installs the malloc-family hooks if the
 * memory profiler has not. Up to 4 listeners. Returns 0 or -1. */
int igprof_mem_listen(const struct igprof_alloc_listener *l);

/* Release the block this thread's hook was freeing when a fatal signal
 * interrupted the original (see igprof_thread.releasing); before a dump
 * made from a signal handler on this thread. */
void igprof_mem_settle(void);

/* ------------------------------------------------------------------ */
/* Private memory                                                      */
/* ------------------------------------------------------------------ */

/* Bump allocation from the calling thread's mmap'd chunk; zeroed, 16-byte
 * aligned, never freed. Lock-free and async-signal-safe (a signal handler
 * must not use it while the interrupted code holds the guard). */
void *igprof_arena_alloc(size_t size);
/* The same, starting on a cache line and taking whole lines (tree nodes,
 * counter blocks: read on every event, so never split across two lines). */
#define IGPROF_CACHE_LINE 64
void *igprof_arena_alloc_lines(size_t size);

/* The mmap system call itself, for a hook of mmap called before its chain
 * is stored (the engine maps while it patches): 32-bit targets have mmap2,
 * whose offset counts 4096-byte units. */
void *igprof_mmap_syscall(void *addr, size_t len, int prot, int flags, int fd, long long off);

/* Whole pages straight from mmap (zeroed), and back: igprof_pages_alloc,
 * igprof_pages_free (page_alloc.h, shared with the walker). */
#include "page_alloc.h"

/* A scratch region for one job (a dump): bump allocation, released at once. */
struct igprof_scratch {
  struct scratch_block *head;
};
void *igprof_scratch_alloc(struct igprof_scratch *s, size_t size);
void igprof_scratch_release(struct igprof_scratch *s);
/* The bytes of a scratch region's pages that are resident (mincore), or
 * (size_t) -1 when the kernel does not say: the working memory of a dump,
 * for -d. */
size_t igprof_scratch_resident(const struct igprof_scratch *s);

/* ------------------------------------------------------------------ */
/* Formatting and messages (format.c): no allocation, signal-safe       */
/* ------------------------------------------------------------------ */

/* snprintf subset: %s %c %d %i %u %x %p %% with l, ll, z modifiers, and
 * %.*s. Always terminates (cap > 0); returns the length it wanted. */
size_t igprof_vformat(char *buf, size_t cap, const char *fmt, va_list ap);
size_t igprof_format(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "igprof(<pid>): message\n" on fd 2, in one write(). */
void igprof_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, only with -d. */
#define igprof_debug(...) do { if (igprof_config.debug) igprof_warn(__VA_ARGS__); } while (0)

/* Buffered output sink for dumps: plain fd or zlib deflate. */
struct igprof_out {
  char *buf;
  size_t len, cap;
  int fd;
  int failed;          /* errno of the first write error, 0 if none */
  void *zstream;       /* z_stream * when compressing */
  char *zbuf;
  size_t zcap;
};
void igprof_out_flush(struct igprof_out *o);
void igprof_out_finish(struct igprof_out *o); /* Z_FINISH when compressing, then flush */
void igprof_out_bytes(struct igprof_out *o, const char *s, size_t n);
void igprof_out_str(struct igprof_out *o, const char *s);
void igprof_out_char(struct igprof_out *o, char c);
void igprof_out_hex(struct igprof_out *o, uint64_t v);      /* lower-case, no 0x */
void igprof_out_shex(struct igprof_out *o, int64_t v);      /* '-' then hex if negative */
void igprof_out_dec(struct igprof_out *o, uint64_t v);
void igprof_out_name(struct igprof_out *o, const char *s);  /* dump_format.h escape */

/* Writing into a pipe whose reader may be gone (a `|command` dump, a trace
 * piped into `head`) must not kill the program with SIGPIPE: begin blocks
 * SIGPIPE in this thread (raw system calls, not the application's hooked
 * sigprocmask); end, told whether a write failed with EPIPE, takes back the
 * SIGPIPE that write raised (unless one was already pending) and restores
 * the mask. */
struct igprof_pipe_guard {
  sigset_t old;
  int was_pending;
};
void igprof_pipe_guard_begin(struct igprof_pipe_guard *g);
void igprof_pipe_guard_end(struct igprof_pipe_guard *g, int got_epipe);

/* ------------------------------------------------------------------ */
/* Signals the profiler owns                                           */
/* ------------------------------------------------------------------ */

enum igprof_signal_result {
  IGPROF_SIGNAL_CHAIN, /* now apply the application's disposition of the signal */
  IGPROF_SIGNAL_DONE,  /* handled; the application does not see it */
};

/* `app` is the action the application believes is installed. */
typedef enum igprof_signal_result (*igprof_signal_fn)(int sig, siginfo_t *si, void *uc,
                                                      const struct sigaction *app);

/* Own signal `sig`: our dispatcher stays installed whatever the application
 * does; its sigaction() calls are recorded and answered from a shadow table,
 * and with `unblock` its attempts to block the signal (sigprocmask,
 * pthread_sigmask) leave it unblocked. Returns 0, or -1 with errno. */
int igprof_signal_own(int sig, igprof_signal_fn fn, int unblock);
/* Apply the application's disposition to a signal we received: run its
 * handler, or for SIG_DFL reset the kernel action and re-raise. */
void igprof_signal_chain(int sig, siginfo_t *si, void *uc);
/* An owned signal that arrives while its thread is BUSY (see enum
 * igprof_guard) is held back and delivered again, with its siginfo, when the
 * thread leaves the profiler: for the signals whose callback dumps (the
 * fatal ones), which must not run over the profiler's half-done work or a
 * lock this thread holds. A fault the kernel raises cannot wait. */
void igprof_signal_defer_while_busy(int sig);

/* The core's side of the signals (signals.c), called by the lifecycle
 * hooks (lifecycle.c): start (fatal signals, the -S signal), before and
 * after an exec that failed, in a forked child. */
int igprof_signals_start(void);
void igprof_signals_before_exec(void);
void igprof_signals_exec_failed(void);
void igprof_signals_fork_child(void);

/* An alternate signal stack for every thread that has none (altstack.c). */
void igprof_altstack_start(void);
void igprof_altstack_thread_start(void);
void igprof_altstack_thread_exit(void);

/* ------------------------------------------------------------------ */
/* Process lifecycle (lifecycle.c)                                     */
/* ------------------------------------------------------------------ */

/* Install the hooks on every way a process ends, forks, starts a thread,
 * execs, loads or unloads a library (after the modules started). */
int igprof_lifecycle_start(void);

/* ------------------------------------------------------------------ */
/* Dumps                                                               */
/* ------------------------------------------------------------------ */

enum igprof_dump_kind {
  IGPROF_DUMP_FINAL,      /* process end: exit, _exit, exec, fatal signal */
  IGPROF_DUMP_CHECKPOINT, /* -D flag file, -S signal, igprof_dump_now(NULL) */
  IGPROF_DUMP_PEAK,       /* --dump-at-peak: <final name>.peak */
};

/* Write a dump. `name` NULL selects the configured name for the kind.
 * Takes the dump lock; safe to call from any thread with the guard held.
 * Returns 0 on success. */
int igprof_dump(enum igprof_dump_kind kind, const char *name, const char *why);

/* Expand %p (this process's pid) and %% in a user-given file name. */
void igprof_expand_name(char *dst, size_t cap, const char *pattern);

/* The final dump, once per process: marks the profiler inactive first. */
void igprof_final_dump(const char *why);

void igprof_dump_fork_prepare(void);
void igprof_dump_fork_parent(void);
void igprof_dump_fork_child(void);

/* The -D / -S service thread (dump_thread.c). */
int igprof_dumper_start(void);
void igprof_dumper_poke(void); /* async-signal-safe: request a checkpoint dump */
void igprof_dumper_flush(void); /* write checkpoints still pending (before the final dump) */
int igprof_dumper_fork_child(void); /* the thread again in a forked child, if it ran */

/* Environment without libc's getenv (some programs replace it). */
const char *igprof_getenv(const char *name);

#endif
