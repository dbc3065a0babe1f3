/* The fast stack walker (see walk_fast.h and docs/stack-walking.md).
 *
 * Four pieces:
 *  - the module table: an immutable, sorted snapshot of the loaded modules'
 *    code ranges and where their .eh_frame_hdr and readable segments lie,
 *    published through one atomic pointer. Rebuilt outside signal context;
 *    snapshots are never unmapped once published, so a reader holding an
 *    old pointer is always safe;
 *  - the PC cache (walk_fast_cache.h): a direct-mapped table of 64-bit words
 *    each holding a PC and its compressed recipe, read with one atomic load.
 *    On a miss the recipe of that one PC is derived from the module's
 *    .eh_frame (eh_frame_find), in whatever context the walk runs;
 *  - the per-thread memo: the previous walk's frames and the stack slots
 *    they were read from, so a walk can join it where nothing changed;
 *  - the walk loop: recipes step most frames with two loads; a frame they
 *    cannot describe is stepped by libunwind (see unwinder_step), and the
 *    loop continues with recipes afterwards.
 */
#define _GNU_SOURCE
#include "walk_fast.h"

#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "../arch/frame.h"
#ifdef FRAME_EHABI_TABLES
#include "../arch/arm_prologue.h"
#include "hook.h"
#endif
#include "eh_frame.h"
#include "walk_fast_cache.h"

#define IE_TLS __thread __attribute__((tls_model("initial-exec")))

/* Frames skipped inside the profiler before the hook's caller is found. A
 * walk that does not meet caller_ret within this many frames gives up on
 * the skip rather than record profiler frames. */
#define HOOK_SKIP_LIMIT 64

/* ---- bump allocator for records that live forever ------------------------ */

static void *forever_alloc(size_t bytes) {
  static uint8_t *cur, *end;
  bytes = (bytes + 15) & ~(size_t)15;
  if (!cur || (size_t)(end - cur) < bytes) {
    size_t chunk = bytes > 65536 ? bytes : 65536;
    void *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return NULL;
    cur = p;
    end = cur + chunk;
  }
  void *p = cur;
  cur += bytes;
  return p;
}

/* ---- module files, keyed by file identity --------------------------------- */

/* One module file. Kept after the module is unloaded: a reader may still
 * hold it, and a module that is loaded again reuses it. Walks derive
 * recipes from the file's mapped unwind data (derive_recipe); the compiled
 * table is made only for igprof_walk_fast_modules (statistics). */
struct table_record {
  struct table_record *next;
  dev_t dev;
  ino_t ino;
  uintptr_t hdr_offset; /* .eh_frame_hdr (ARM32: .ARM.exidx) - bias: tells two files apart cheaply */
  uint32_t exidx_count; /* ARM32: entries of .ARM.exidx */
  uintptr_t anon_hdr;   /* for modules without a file: the absolute header address */
  /* Readable ranges as offsets from the load bias: every read of unwind
   * data stays inside them, at whichever address the file is loaded. */
  struct eh_frame_segment seg_offsets[16];
  int nsegs;
  /* 0 until status and table are final; set with a release store under
   * rebuild_lock, read with an acquire load (signal handlers included). */
  _Atomic int compiled;
  enum eh_frame_status status;
  struct eh_frame_table table;
  char name[];
};

static struct table_record *records; /* guarded by rebuild_lock */

struct fast_module {
  uintptr_t text_start, text_end, bias;
  struct table_record *record;
};

struct module_snapshot {
  int count;
  struct fast_module modules[];
};

static _Atomic(struct module_snapshot *) current_snapshot;
static pthread_mutex_t rebuild_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- PC cache (walk_fast_cache.h) ---------------------------------------- */

static _Atomic uint64_t pc_cache[PC_CACHE_SIZE];
#ifdef FRAME_EHABI_TABLES
/* ARM32: prologue readings of return addresses (prologue_shape), cleared
 * with pc_cache. */
#define SHAPE_CACHE_SIZE 4096u
static _Atomic uint64_t shape_cache[SHAPE_CACHE_SIZE];
#endif

/* ---- per-thread state ---------------------------------------------------- */

static IE_TLS uintptr_t stack_lo, stack_hi;
static IE_TLS int in_rebuild; /* this thread holds the loader lock in rebuild() */
/* dlclose calls under way (igprof_walk_fast_modules_changing), each until
 * the rebuild after it has published: while any is, the snapshot may name
 * a module that is no longer mapped, so no recipe is derived. */
static _Atomic unsigned closes_in_progress;
static IE_TLS unsigned closes_pending; /* this thread's share of closes_in_progress */
static IE_TLS struct walk_fast_stats thread_stats;

/* ---- per-thread stack memo ------------------------------------------------
 *
 * Consecutive walks on a thread usually share their outer frames (the same
 * loop calling malloc from the same call chain). Each walk records, for
 * every frame, its registers and the stack slots its recipe read. A later
 * walk that reaches a frame with the same pc, sp and fp as frame j of the
 * previous walk re-reads those slots; if every one still holds the value it
 * held, each later step would compute exactly what it computed then (a step
 * is a function of the registers, the recipe of pc and those slots), so the
 * previous walk's outer frames are copied instead of walked. The slot loads
 * are independent of each other, unlike a walk's chain of dependent loads.
 * Frames stepped by libunwind are never joined through (they read more).
 */
#define MEMO_FRAMES 256

struct memo_frame {
  uintptr_t pc, sp, fp; /* registers of the frame (pc raw) */
  uintptr_t ra_at;      /* slot its step read the return address from */
  uintptr_t fp_at;      /* slot its step read the saved FP from, or 0 */
};

struct walk_memo {
  const void *snapshot; /* the module table the recipes came from */
  int count;            /* frames recorded */
  int joinable_from;    /* no libunwind step from here on */
  int complete;         /* the walk reached the end of the stack */
  /* The highest slot the walk could read (its stack's top). Every slot of
   * a frame lies between that frame's sp and top (fast_run steps no frame
   * whose saved FP lies below its sp), and sp grows outwards: a join at a
   * frame whose sp is at or above the joining walk's lowest readable
   * address, on a stack with the same top, reads only what that walk may
   * read, and memo_verify needs no bounds check per slot. */
  uintptr_t top;
  struct memo_frame frames[MEMO_FRAMES];
};

/* The per-thread PC cache: a small direct-mapped table in front of the
 * shared one, indexed by the return address's low bits (no hash, no atomic,
 * no lock prefix). Its values are ready to use: no bit field is unpacked on
 * the chain of dependent loads. It belongs to the walk that holds the memo
 * (memo_busy), so a signal handler interrupting a walk never sees half an
 * entry, and it is emptied when the walk's module snapshot is not the one
 * its entries came from. Only simple CFA recipes are kept.
 *
 * Entries are TC_STRIDE words apart in the index's units: return addresses
 * are never one byte apart (a call instruction is longer), and on AArch64
 * they are 4-byte aligned, so the index skips the bits that never vary. */
#define TC_BITS 12
#define TC_SIZE (1u << TC_BITS)
#define TC_STRIDE (FRAME_CODE_ALIGN < 2 ? 2 : FRAME_CODE_ALIGN)
#define TC_INDEX_MASK ((uintptr_t)(TC_SIZE - 1) * TC_STRIDE)
#define TC_FP_BASE ((uint64_t)1 << 32) /* CFA = FP + offset (else SP + offset) */
#if FRAME_LINK_REGISTER
/* The callee saves the return address where its prologue puts it: the
 * value says where, from the register the CFA is computed from, and the
 * frame pointer, if saved, is just below it (a frame record). */
#define TC_FP_SAVED ((uint64_t)1 << 33)
#define TC_RA_SHIFT 40 /* the return address at base + (value >> 40) */
#ifdef FRAME_EHABI_TABLES
/* ARM32 pushes r7 (the frame pointer) wherever its register list puts it
 * (push {r4-r11, lr}: five words below lr): the value keeps how many
 * words below the return address's slot it is. */
#define TC_FP_GAP_SHIFT 34
#define TC_FP_GAP_MAX 31u /* bits 34-38 */
#define TC_R11_SAVED ((uint64_t)1 << 39) /* r11 just below the return address (FRAME_R11_SAVED) */
#define TC_FP_GAP(v) (((uintptr_t)((v) >> TC_FP_GAP_SHIFT) & TC_FP_GAP_MAX) * sizeof(uintptr_t))
#else
#define TC_FP_GAP(v) sizeof(uintptr_t) /* a frame record: just below it */
#endif

/* The thread-cache value of a compressed recipe; 0 if it has none (then
 * the walk takes its slow step). */
static inline uint64_t tc_value(uint32_t bits) {
  uint32_t form = recipe_form(bits);
  uint64_t cfa = recipe_cfa_bytes(bits), v = cfa, ra_off;
  uint64_t gap = 1; /* words from the return address's slot down to the FP's */
  if (form == RC_FORM_BASE) {
    ra_off = recipe_slot_bytes(bits);
  } else if (form == RC_FORM_CALL) {
    ra_off = cfa + FRAME_CALL_RA_OFFSET;
    if (bits & RC_FP_SAVED)
      gap = recipe_slot_bytes(bits) / sizeof(uintptr_t) - 1;
  } else {
    return 0;
  }
#ifdef FRAME_EHABI_TABLES
  if (gap < 1 || gap > TC_FP_GAP_MAX)
    return 0;
  v |= gap << TC_FP_GAP_SHIFT;
  if (bits & RC_R11_SAVED)
    v |= TC_R11_SAVED;
#else
  if (gap != 1)
    return 0;
#endif
  if (bits & RC_FP_BASE)
    v |= TC_FP_BASE;
  if (bits & RC_FP_SAVED)
    v |= TC_FP_SAVED;
  return v | ra_off << TC_RA_SHIFT;
}
#else
/* A call pushes the return address: it is at CFA - 8 in every frame. */
#define TC_FP_SHIFT 40 /* FP saved at CFA - (value >> 40); 0: not saved */

static inline uint64_t tc_value(uint32_t bits) {
  if (recipe_form(bits) != RC_FORM_CALL)
    return 0;
  uint64_t v = recipe_cfa_bytes(bits);
  if (bits & RC_FP_BASE)
    v |= TC_FP_BASE;
  if (bits & RC_FP_SAVED)
    v |= (uint64_t)recipe_slot_bytes(bits) << TC_FP_SHIFT;
  return v;
}
#endif

/* The memos of the last walks, MEMO_KEYS of them, each filed under the
 * place its walk started (the first frame's pc and sp): a walk that starts
 * where an earlier one did — the same function at the same stack depth,
 * most often reached along the same path — joins that walk's record, not
 * only the last walk's, so stacks that alternate between a few paths (a
 * compiler allocating from its parser, then its optimiser, then the parser
 * again) are stepped only where they differ. One buffer more than there
 * are keys: the walk records into the spare and files it at the end.
 * The slots are MEMO_WAYS-way associative: a start hashes to a set of
 * slots, and a new start evicts the set's least recently used one, so two
 * starts that hash alike do not keep evicting each other. */
#define MEMO_KEYS 8
#define MEMO_WAYS 2
_Static_assert(MEMO_WAYS == 2, "memo_begin picks the victim of a two-way set");

struct thread_memo {
  struct walk_memo buf[MEMO_KEYS + 1];
  struct walk_memo *slot[MEMO_KEYS]; /* by start; NULL until used */
  struct {
    uintptr_t pc, sp; /* slot[k]'s first frame, or 0 */
  } start[MEMO_KEYS];
  uint8_t way[MEMO_KEYS / MEMO_WAYS]; /* per set: the way used last */
  struct walk_memo *spare;
  int recent; /* slot of the last walk */
  unsigned gen; /* advanced whenever a walk ends (records may have changed) */
  const void *tc_snapshot; /* the module table tc came from */
  /* Entry i is tc[TC_STRIDE * i] (the return address, not minus 1; 0:
   * empty) and the word after it (tc_value() of its recipe): a lookup
   * touches one cache line, and with the index taken as pc & TC_INDEX_MASK
   * (already multiplied by the stride) the address is one scaled-index load
   * away from pc. */
  uint64_t tc[TC_STRIDE * TC_SIZE];
};

static IE_TLS struct thread_memo *thread_memo;
static IE_TLS int memo_busy; /* a walk on this thread is using the memo */
static pthread_key_t memo_key;
static pthread_once_t memo_key_once = PTHREAD_ONCE_INIT;

static void memo_release(void *memo) {
  thread_memo = NULL;
  atomic_signal_fence(memory_order_seq_cst); /* no signal walk sees it from here */
  munmap(memo, sizeof(struct thread_memo));
}

static void memo_key_create(void) { pthread_key_create(&memo_key, memo_release); }

static void memo_thread_init(void) {
  if (thread_memo)
    return;
  pthread_once(&memo_key_once, memo_key_create);
  void *m = mmap(NULL, sizeof(struct thread_memo), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return; /* walks work without it, only slower */
  thread_memo = m;
  pthread_setspecific(memo_key, m);
}

void igprof_walk_fast_thread_init(void) {
  memo_thread_init();
  pthread_attr_t attr;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) != 0)
    return;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
    stack_lo = (uintptr_t)addr;
    stack_hi = (uintptr_t)addr + size;
  }
  pthread_attr_destroy(&attr);
}

void igprof_walk_fast_stats(struct walk_fast_stats *out) { *out = thread_stats; }

/* ---- module table construction (outside signal context) ------------------ */

/* Compile `r` from its load at `bias`, unless done already. The caller
 * holds rebuild_lock (so there is one compiler at a time) and the loader
 * lock (so the module stays mapped at `bias`). For statistics only. */
static void compile_record(struct table_record *r, uintptr_t bias) {
  if (atomic_load_explicit(&r->compiled, memory_order_relaxed))
    return;
#ifdef FRAME_EHABI_TABLES
  /* Nothing to compile: an EHABI index entry is one function's row. */
  (void)bias;
  r->status = EH_FRAME_OK;
  r->table.count = r->table.fde_count = r->exidx_count;
  atomic_store_explicit(&r->compiled, 1, memory_order_release);
  return;
#endif
  struct eh_frame_segment segs[16];
  for (int i = 0; i < r->nsegs; i++)
    segs[i] = (struct eh_frame_segment){bias + r->seg_offsets[i].start,
                                        bias + r->seg_offsets[i].end};
  r->status = eh_frame_compile((const void *)(bias + r->hdr_offset), bias, segs, r->nsegs,
                               &r->table);
  atomic_store_explicit(&r->compiled, 1, memory_order_release);
}

/* Compile every module of the current snapshot (caller holds rebuild_lock;
 * the snapshot's modules are mapped, since rebuild holds the lock too). */
static void compile_snapshot(void) {
  struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_relaxed);
  for (int i = 0; s && i < s->count; i++)
    compile_record(s->modules[i].record, s->modules[i].bias);
}

static struct table_record *find_or_add_record(struct dl_phdr_info *info, const void *hdr,
                                            const struct eh_frame_segment *segs, int nsegs) {
  struct stat st;
  int have_file = info->dlpi_name[0] && stat(info->dlpi_name, &st) == 0;
  uintptr_t hdr_offset = (uintptr_t)hdr - info->dlpi_addr;
  for (struct table_record *r = records; r; r = r->next) {
    if (have_file ? (r->anon_hdr == 0 && r->dev == st.st_dev && r->ino == st.st_ino &&
                     r->hdr_offset == hdr_offset)
                  : r->anon_hdr == (uintptr_t)hdr)
      return r;
  }
  size_t name_len = strlen(info->dlpi_name);
  struct table_record *r = forever_alloc(sizeof *r + name_len + 1);
  if (!r)
    return NULL;
  memset(r, 0, sizeof *r);
  memcpy(r->name, info->dlpi_name, name_len + 1);
  if (have_file) {
    r->dev = st.st_dev;
    r->ino = st.st_ino;
  } else {
    r->anon_hdr = (uintptr_t)hdr;
  }
  r->hdr_offset = hdr_offset;
  for (int i = 0; i < nsegs; i++)
    r->seg_offsets[i] = (struct eh_frame_segment){segs[i].start - info->dlpi_addr,
                                                  segs[i].end - info->dlpi_addr};
  r->nsegs = nsegs;
  r->next = records;
  records = r;
  return r;
}

struct build_state {
  struct fast_module *modules;
  int count, capacity;
  int failed;
};

static int grow_modules(struct build_state *b) {
  int cap = b->capacity ? b->capacity * 2 : 64;
  struct fast_module *m = mmap(NULL, (size_t)cap * sizeof *m, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return 0;
  if (b->modules) {
    memcpy(m, b->modules, (size_t)b->count * sizeof *m);
    munmap(b->modules, (size_t)b->capacity * sizeof *m);
  }
  b->modules = m;
  b->capacity = cap;
  return 1;
}

/* Runs with the loader lock held: the module is mapped as described. */
static int collect_module(struct dl_phdr_info *info, size_t size, void *arg) {
  struct build_state *b = arg;
  struct eh_frame_segment segs[16];
  int nsegs = 0;
  const void *hdr = NULL;
  uintptr_t text_start = UINTPTR_MAX, text_end = 0;
  uint32_t exidx_count = 0;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
#ifdef FRAME_EHABI_TABLES
    if (ph->p_type == PT_ARM_EXIDX) {
      hdr = (const void *)start;
      exidx_count = (uint32_t)(ph->p_memsz / 8);
    }
#else
    if (ph->p_type == PT_GNU_EH_FRAME)
      hdr = (const void *)start;
#endif
    if (ph->p_type != PT_LOAD)
      continue;
    if ((ph->p_flags & PF_R) && nsegs < 16)
      segs[nsegs++] = (struct eh_frame_segment){start, end};
    if (ph->p_flags & PF_X) {
      text_start = start < text_start ? start : text_start;
      text_end = end > text_end ? end : text_end;
    }
  }
#ifdef FRAME_EHABI_TABLES
  /* ARM32 code without an index (qemu-arm's vDSO has only .eh_frame) is
   * read by its prologues (prologue_step): the module is listed with no
   * entries. */
  if (!hdr && text_start < text_end)
    hdr = (const void *)text_start;
#endif
  if (!hdr || text_start >= text_end)
    return 0; /* no code or no unwind table: its frames are libunwind's */
  if (b->count == b->capacity && !grow_modules(b)) {
    b->failed = 1;
    return 1;
  }
  struct table_record *rec = find_or_add_record(info, hdr, segs, nsegs);
  if (!rec)
    return 0;
  rec->exidx_count = exidx_count;
  b->modules[b->count++] = (struct fast_module){text_start, text_end, info->dlpi_addr, rec};
  return 0;
}

static int module_less(const struct fast_module *a, const struct fast_module *b) {
  return a->text_start < b->text_start;
}

static void sort_modules(struct fast_module *m, int n) {
  for (int i = 1; i < n; i++) { /* tens of modules: insertion sort is plenty */
    struct fast_module x = m[i];
    int j = i;
    for (; j > 0 && module_less(&x, &m[j - 1]); j--)
      m[j] = m[j - 1];
    m[j] = x;
  }
}

static int same_modules(const struct module_snapshot *s, const struct build_state *b) {
  if (!s || s->count != b->count)
    return 0;
  for (int i = 0; i < b->count; i++)
    if (memcmp(&s->modules[i], &b->modules[i], sizeof b->modules[i]) != 0)
      return 0;
  return 1;
}

/* Returns 0 if the module table could not be rebuilt (out of memory). */
static int rebuild(void) {
  struct build_state b = {0};
  int ok = 0;
  /* dl_iterate_phdr holds the loader lock while we list modules. A signal handler
   * running on this thread meanwhile must not enter libunwind, which may wait
   * for a lock held by a thread that is itself waiting for the loader lock:
   * such a walk stops at its first frame that recipes cannot step. Signals
   * stay unblocked, so the sampler loses nothing while a library loads. */
  pthread_mutex_lock(&rebuild_lock);
  in_rebuild = 1;
  atomic_signal_fence(memory_order_seq_cst);
  dl_iterate_phdr(collect_module, &b);
  sort_modules(b.modules, b.count);
  struct module_snapshot *old = atomic_load_explicit(&current_snapshot, memory_order_relaxed);
  if (!b.failed && same_modules(old, &b)) {
    ok = 1;
  } else if (!b.failed) {
    struct module_snapshot *s =
        forever_alloc(sizeof *s + (size_t)b.count * sizeof(struct fast_module));
    if (s) {
      s->count = b.count;
      if (b.count)
        memcpy(s->modules, b.modules, (size_t)b.count * sizeof *b.modules);
      /* The old snapshot stays mapped: a walk in another thread or a signal
       * handler may still be reading it. Publish first, then clear the
       * cache: a recipe cached from the old snapshot after the clear is
       * retracted by its writer (derive_recipe). The first snapshot finds
       * the cache empty: its pages are not touched. */
      atomic_store_explicit(&current_snapshot, s, memory_order_seq_cst);
      if (old) {
        cache_clear(pc_cache);
#ifdef FRAME_EHABI_TABLES
        for (uint32_t i = 0; i < SHAPE_CACHE_SIZE; i++)
          atomic_store_explicit(&shape_cache[i], 0, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
#endif
      }
      ok = 1;
    }
  }
  if (b.modules)
    munmap(b.modules, (size_t)b.capacity * sizeof *b.modules);
  atomic_signal_fence(memory_order_seq_cst);
  in_rebuild = 0;
  pthread_mutex_unlock(&rebuild_lock);
  return ok;
}

/* dl_iterate_phdr callback: runs compile_snapshot with the loader lock held. */
static int compile_current(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)info, (void)size, (void)arg;
  compile_snapshot();
  return 1; /* once is enough */
}

/* Compile every module of the current table now, with the loader lock held
 * so none is unloaded meanwhile. */
static void compile_all(void) {
  pthread_mutex_lock(&rebuild_lock);
  in_rebuild = 1;
  atomic_signal_fence(memory_order_seq_cst);
  dl_iterate_phdr(compile_current, NULL);
  atomic_signal_fence(memory_order_seq_cst);
  in_rebuild = 0;
  pthread_mutex_unlock(&rebuild_lock);
}

void igprof_walk_fast_init(void) {
  rebuild();
  igprof_walk_fast_thread_init();
}

void igprof_walk_fast_modules_changed(void) { (void)rebuild(); }

void igprof_walk_fast_modules_changing(void) {
  closes_pending++;
  atomic_fetch_add_explicit(&closes_in_progress, 1, memory_order_seq_cst);
}

void igprof_walk_fast_modules_closed(void) {
  /* The snapshot is published before the count drops, so a walk that sees
   * no close under way knows the current snapshot is right (recipe_for).
   * A rebuild in between (a dlopen from a destructor the dlclose runs)
   * lowers nothing: the closing module may still be mapped then. A failed
   * rebuild keeps the count up: walks then keep away from unwind data,
   * which is safe. */
  if (rebuild() && closes_pending) {
    closes_pending--;
    atomic_fetch_sub_explicit(&closes_in_progress, 1, memory_order_seq_cst);
  }
}

int igprof_walk_fast_modules(void (*fn)(const struct walk_fast_module_info *, void *),
                             void *arg) {
  compile_all(); /* the summary counts rows */
  const struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_acquire);
  if (!s)
    return 0;
  for (int i = 0; i < s->count; i++) {
    const struct fast_module *m = &s->modules[i];
    struct walk_fast_module_info info = {
        m->record->name, m->text_start, m->text_end, m->record->table.count,
        m->record->table.fde_count, m->record->table.complex_rows, m->record->table.bad_fdes,
        eh_frame_status_str(m->record->status)};
    fn(&info, arg);
  }
  return s->count;
}

/* ---- recipe lookup (signal-safe) ----------------------------------------- */

static const struct fast_module *module_of(const struct module_snapshot *s, uintptr_t pc) {
  int lo = 0, hi = s->count;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (pc < s->modules[mid].text_start)
      hi = mid;
    else if (pc >= s->modules[mid].text_end)
      lo = mid + 1;
    else
      return &s->modules[mid];
  }
  return NULL;
}

/* *known from recipe_for when the recipe was not derived: a dlclose is
 * under way. */
#define KNOWN_REFUSED 2

/* frame_is_sigreturn, counted: it asks the kernel whether pc is mapped. */
static int sigreturn_at(uintptr_t pc) {
  thread_stats.kernel_calls++;
  return frame_is_sigreturn(pc);
}

/* Whether [at, at + len) lies in one of module m's readable segments. */
static int module_readable(const struct fast_module *m, uintptr_t at, uintptr_t len) {
  const struct table_record *r = m->record;
  for (int i = 0; i < r->nsegs; i++)
    if (at >= m->bias + r->seg_offsets[i].start && at + len <= m->bias + r->seg_offsets[i].end &&
        at + len > at)
      return 1;
  return 0;
}

/* Whether a signal return trampoline that no unwind data describes (qemu's
 * AArch64 vDSO has none for it) starts at the return address pc + 1 or at
 * the interrupted PC pc, in module m's code: its caller was interrupted,
 * and its step reads the signal frame (signal_frame_step, or libunwind,
 * which knows the trampoline by its code). */
static int sigreturn_in_module(const struct fast_module *m, uintptr_t pc) {
  for (uintptr_t at = pc; at <= pc + 1; at++)
    if (at % FRAME_CODE_ALIGN == 0 && module_readable(m, at, FRAME_SIGRETURN_LEN) &&
        frame_code_is_sigreturn(at))
      return 1;
  return 0;
}

#ifdef FRAME_EHABI_TABLES
/* Module m's EHABI index as arm_ehabi.c reads it: its entries, and the
 * readable segment that holds them, where GCC and the linkers put
 * .ARM.extab too (an entry pointing elsewhere is refused as a bad table,
 * and its frame is libunwind's). */
static int module_ehabi(const struct fast_module *m, struct ehabi_table *t) {
  const struct table_record *r = m->record;
  if (r->exidx_count == 0)
    return 0;
  uintptr_t exidx = m->bias + r->hdr_offset, bytes = (uintptr_t)r->exidx_count * 8;
  for (int i = 0; i < r->nsegs; i++) {
    uintptr_t start = m->bias + r->seg_offsets[i].start, end = m->bias + r->seg_offsets[i].end;
    if (exidx >= start && exidx <= end && end - exidx >= bytes) {
      *t = (struct ehabi_table){(const uint32_t *)exidx, r->exidx_count, start, end};
      return 1;
    }
  }
  return 0;
}
#endif

/* Derive the recipe of `pc`, in module `m` of snapshot `s`, from the
 * module's unwind data, and cache it. Safe in a signal handler
 * (eh_frame_find is). The caller has checked, in this order, that no
 * dlclose is under way and that `s` is the current snapshot: then `s` is
 * right about every module whose code is on this thread's stack (see
 * igprof_walk_fast_modules_changed), and `pc` — the interrupted PC or a
 * return address on this stack — lies in a module that stays mapped while
 * the frame is live.
 *
 * Code without unwind information — `m` NULL (JIT code in an anonymous
 * mapping, a module without an unwind table) or no FDE for `pc` — gets the
 * frame-pointer chain's recipe (frame_arch.fp_chain), cached like any
 * other: every later frame there costs what a compiled frame costs, reads
 * only the stack within the walk's bounds (frame_step), and enters no
 * system call. Where the code keeps no frame pointer the bounds end the
 * walk, marked WALK_STOPPED. Caching it by address is safe because the
 * guess depends on nothing but the absence of unwind data there, which
 * only a module change alters, and a module change clears the cache.
 * Three kinds of module code without unwind data are known better: a signal
 * return trampoline (sigreturn_in_module), i386's PC thunks
 * (frame_code_is_pc_thunk), and, with a link register, any interrupted PC
 * there (see below). */
/* An interrupted PC in a module's code without unwind data: its return
 * address taken from the link register, as libunwind does (AArch64, and
 * ARM32 code outside its module's index entries). Not in an ARM32 module
 * without an index at all: qemu-arm's vDSO, whose functions push {r7, lr}
 * around the system call (the guess put the caller's frame 8 bytes off);
 * its code gets the outermost recipe and so prologue_step, which reads
 * where the function saved lr. */
#if FRAME_LINK_REGISTER && FRAME_CODE_ALIGN > 1
#define LR_GUESS 1
#else
#define LR_GUESS 0
#endif

static int lr_guess_in(const struct fast_module *m) {
#ifdef FRAME_EHABI_TABLES
  return m->record->exidx_count > 0;
#else
  (void)m;
  return LR_GUESS;
#endif
}

__attribute__((noinline)) static struct frame_recipe derive_recipe(const struct module_snapshot *s,
                                                                   const struct fast_module *m,
                                                                   uintptr_t pc) {
  struct frame_recipe rc = {0, 0, 0, FRAME_NO_INFO, 0};
#ifdef FRAME_EHABI_TABLES
  /* glibc's restorers have table entries (which pop every register from
   * the context): known by their code first, so that the frame they
   * return to is taken as interrupted. */
  struct ehabi_table t;
  if (m && sigreturn_in_module(m, pc))
    rc = (struct frame_recipe){0, 0, 0, FRAME_COMPLEX, FRAME_SIGNAL};
  else if (m && module_ehabi(m, &t)) {
    rc = frame_ehabi_recipe(&t, pc);
    thread_stats.derivations++;
  }
#else
  if (m) {
    const struct table_record *r = m->record;
    struct eh_frame_segment segs[16];
    for (int i = 0; i < r->nsegs; i++)
      segs[i] = (struct eh_frame_segment){m->bias + r->seg_offsets[i].start,
                                          m->bias + r->seg_offsets[i].end};
    (void)eh_frame_find((const void *)(m->bias + r->hdr_offset), m->bias, segs, r->nsegs, pc,
                        &rc);
    thread_stats.derivations++;
  }
#endif
  if (rc.flags & FRAME_SIGNAL) {
    /* A signal frame is read by the architecture's own code, whose layout
     * is the kernel's ABI (step_slow: signal_frame_step), never by its
     * unwind data: qemu-i386's vDSO describes its rt_sigreturn frame as
     * CFA = esp + 224, one word off (its "return address" is the saved
     * %cs), which a plain recipe would have followed. */
    rc = (struct frame_recipe){0, 0, 0, FRAME_COMPLEX, FRAME_SIGNAL};
  } else if (rc.kind == FRAME_NO_INFO && m && sigreturn_in_module(m, pc)) {
    rc = (struct frame_recipe){0, 0, 0, FRAME_COMPLEX, FRAME_SIGNAL};
  } else if (FRAME_PC_THUNK_AFTER && rc.kind == FRAME_NO_INFO && m &&
             module_readable(m, pc - FRAME_PC_THUNK_BEFORE,
                             FRAME_PC_THUNK_BEFORE + FRAME_PC_THUNK_AFTER) &&
             frame_code_is_pc_thunk(pc)) {
    /* Only ever an interrupted PC (a thunk calls nothing): the call's
     * return address is at the stack pointer. */
    rc = (struct frame_recipe){-FRAME_CALL_RA_OFFSET, 0, FRAME_CALL_RA_OFFSET, FRAME_CFA_SP, 0};
  } else if (rc.kind == FRAME_NO_INFO && m && LR_GUESS && lr_guess_in(m) && pc % FRAME_CODE_ALIGN == 0) {
    /* An interrupted PC (a return address minus 1 is never aligned) in a
     * module's code without unwind data: a PLT stub most often, which
     * AArch64 linkers emit without CFI. The return address is still in
     * the link register, as libunwind assumes for any such frame. */
    rc = (struct frame_recipe){0, 0, 0, FRAME_CFA_SP, FRAME_RA_IN_LR};
    thread_stats.guesses++;
  } else if (rc.kind == FRAME_NO_INFO) {
    rc = frame_arch.fp_chain;
    thread_stats.guesses++;
  }
  uint32_t bits;
  if (recipe_compress(rc, &bits)) {
    uint64_t stored = cache_put(pc_cache, pc, bits);
    if (stored && atomic_load_explicit(&current_snapshot, memory_order_seq_cst) != s)
      cache_retract(pc_cache, pc, stored); /* the clear of a newer snapshot may have missed it */
  }
  return rc;
}

/* Recipe for the instruction at `pc`; *known says whether pc lies in a
 * module's code (so its memory is mapped), KNOWN_REFUSED if its recipe is
 * not cached and a dlclose is under way. A miss is resolved with the
 * current snapshot, not the one the walk started with: a rebuild during
 * the walk (a dlopen on another thread) changes nothing for the frames on
 * this stack. */
static struct frame_recipe recipe_for(uintptr_t pc, int *known) {
  uint32_t bits;
  if (cache_get(pc_cache, pc, &bits)) {
    *known = 1;
    return recipe_expand(bits);
  }
  thread_stats.cache_misses++;
  struct frame_recipe none = {0, 0, 0, FRAME_NO_INFO, 0};
  if (atomic_load_explicit(&closes_in_progress, memory_order_seq_cst) != 0) {
    thread_stats.derivations_refused++;
    *known = KNOWN_REFUSED; /* nothing read, nothing cached */
    return none;
  }
  const struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_seq_cst);
  const struct fast_module *m = s ? module_of(s, pc) : NULL;
  *known = m != NULL;
  return derive_recipe(s, m, pc);
}

/* ---- the walk ------------------------------------------------------------ */

/* The stack region the walk may read: [lo, hi). */
struct region {
  uintptr_t lo, hi;
};

/* Which known stack holds `sp`: the thread's stack or its signal stack.
 * Reads are allowed from sp upwards, where the stack is mapped, and for an
 * interrupted frame also in the red zone below sp: an epilogue that has
 * popped a register still has its save slot described there, and the
 * kernel placed the signal frame below the red zone, so it is mapped. */
static int region_of_alt(uintptr_t sp, int interrupted, struct region *out);

/* The thread's own stack inline (every walk asks), the signal stack apart. */
static inline int region_of(uintptr_t sp, int interrupted, struct region *out) {
  if (__builtin_expect(sp >= stack_lo && sp < stack_hi, 1)) {
    *out = (struct region){sp - (interrupted ? frame_arch.red_zone : 0), stack_hi};
    return 1;
  }
  return region_of_alt(sp, interrupted, out);
}

__attribute__((noinline)) static int region_of_alt(uintptr_t sp, int interrupted,
                                                   struct region *out) {
  uintptr_t below = interrupted ? frame_arch.red_zone : 0;
  stack_t ss;
  thread_stats.kernel_calls++;
  if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) &&
      sp >= (uintptr_t)ss.ss_sp && sp < (uintptr_t)ss.ss_sp + ss.ss_size) {
    *out = (struct region){sp - below, (uintptr_t)ss.ss_sp + ss.ss_size};
    return 1;
  }
  return 0;
}

struct walk {
  struct frame_regs regs;
  int exact;             /* regs.pc is an interrupted PC, not a return address */
  struct region stack;
  const ucontext_t *uc;  /* full register set of frame 0, if the walk has one */
  int frame;             /* frames stepped so far */
  struct walk_memo *prev, *cur; /* memo of the last walk, and of this one (or NULL) */
  int key;               /* memo slot of this walk's start */
  int prev_keyed;        /* prev is that slot's record (a join may take it over) */
  int join_at;           /* next candidate frame in prev (sp ascending) */
  /* What this walk has checked of a record: the slots of its frames
   * verified_from .. last still hold what the record read (-1: not even
   * the outermost frame's). Stack slots above the walk's start do not
   * change during the walk, so a later join at frame q >= verified_from
   * has nothing left to check. verified_gen is the memo's generation when
   * it was checked (memo_repeat checks before the walk takes the memo). */
  const struct walk_memo *verified;
  int verified_from;
  unsigned verified_gen;
  /* pcs[placed_from .. count - 1] already hold the frames of record
   * `placed`, each at its own index (memo_repeat writes them as it checks
   * them). A join at frame p of that record, when the walk's own frame
   * there is pcs[p] too, need not write them again. */
  const struct walk_memo *placed;
  int placed_from;
  uint64_t *tc;          /* the thread's PC cache, if this walk holds it */
  int outermost;         /* step_slow ended the walk on an "outermost" recipe */
  int by_recipe;         /* step_slow's last step was a FRAME_CFA_DEREF recipe's */
};

enum step { STEP_OK, STEP_END, STEP_CUT };

/* The registers of a frame reached by recipes (or a join): its caller's
 * link register is unknown; r11 (ARM32, frame.h) is the caller's to set. */
static inline void regs_set(struct frame_regs *r, uintptr_t pc, uintptr_t sp, uintptr_t fp) {
  r->pc = pc;
  r->sp = sp;
  r->fp = fp;
#if FRAME_LINK_REGISTER
  r->lr = 0;
#endif
}

/* unw_step with a fault escape (walk_fast.h, igprof_unwind_escape_slot): a
 * fault inside it answers like a step that found no caller (-UNW_EINVAL).
 * The slot's previous value is put back, so a guarded walk may run inside
 * another one's (a hook walk from a signal handler). */
static int guarded_step(unw_cursor_t *c) {
  void **slot = igprof_unwind_escape_slot ? igprof_unwind_escape_slot() : NULL;
  if (!slot)
    return unw_step(c);
  void *outer = *slot;
  sigjmp_buf escape;
  volatile int stepped = -UNW_EINVAL;
  if (sigsetjmp(escape, 0) == 0) {
    *slot = &escape;
    stepped = unw_step(c);
  } else {
    thread_stats.unwinder_faults++;
  }
  *slot = outer;
  return stepped;
}

/* Move a libunwind cursor that starts at a full register context to the
 * walk's current frame (same pc and stack pointer). libunwind restores every
 * callee-saved register on the way, which a frame whose CFA is kept in, say,
 * %rbx (the loader's lazy-binding trampoline) needs. */
static int seek_frame(unw_cursor_t *c, const struct frame_regs *target, int limit) {
  for (int i = 0; i <= limit; i++) {
    unw_word_t ip, sp;
    if (unw_get_reg(c, UNW_REG_IP, &ip) < 0 || unw_get_reg(c, UNW_REG_SP, &sp) < 0)
      return 0;
    if (sp == target->sp && ip == target->pc)
      return 1;
    if (guarded_step(c) <= 0)
      return 0;
  }
  return 0;
}

/* Step one frame with libunwind. The cursor gets the best register set
 * available: the signal's own context for frame 0; for a signal trampoline
 * the tracked registers are enough (it restores everything from memory);
 * otherwise libunwind replays the walk from a full context (the signal's,
 * or this very function's, whose callers are the frames being walked) up
 * to this frame, falling back to the tracked registers alone. */
static enum step unwinder_step(struct walk *w, struct frame_recipe rc, int known) {
  /* libunwind reads the instructions at pc and, without unwind info, the
   * frame-pointer chain, and checks neither: prove both mapped first. */
  if (in_rebuild)
    return STEP_CUT;
  if (!known && (thread_stats.kernel_calls++, !frame_memory_mapped(w->regs.pc, 16)))
    return STEP_CUT;
  ucontext_t uc;
  unw_cursor_t cursor;
  int ready = 0;
  if (w->uc && w->frame == 0) {
    uc = *w->uc;
    ready = unw_init_local2(&cursor, UNW_CONTEXT(&uc), UNW_INIT_SIGNAL_FRAME) == 0;
  } else if (!(rc.flags & FRAME_SIGNAL)) {
    int started;
    if (w->uc) {
      uc = *w->uc;
      started = unw_init_local2(&cursor, UNW_CONTEXT(&uc), UNW_INIT_SIGNAL_FRAME) == 0;
    } else {
      started = unw_getcontext(UNW_CONTEXT(&uc)) == 0 && unw_init_local(&cursor, UNW_CONTEXT(&uc)) == 0;
    }
    thread_stats.unwinder_replays++;
    ready = started && seek_frame(&cursor, &w->regs, w->frame + HOOK_SKIP_LIMIT);
  }
  if (!ready) {
    memset(&uc, 0, sizeof uc);
    frame_regs_to_ucontext(&uc, &w->regs);
    if (unw_init_local2(&cursor, UNW_CONTEXT(&uc), w->exact ? UNW_INIT_SIGNAL_FRAME : 0) < 0)
      return STEP_CUT;
  }
  /* The frame a signal trampoline returns to was interrupted, not called:
   * our own reading of the CIE says so, or, when no recipe could be
   * derived, the trampoline's code. (libunwind only knows a frame is a
   * signal frame once it has stepped into it.) */
  int interrupted = known == KNOWN_REFUSED ? sigreturn_at(w->regs.pc)
                                           : (rc.flags & FRAME_SIGNAL) != 0;
  int stepped = guarded_step(&cursor);
  if (stepped == 0)
    return STEP_END;
  struct frame_regs next;
  if (stepped < 0 || !frame_regs_from_unwinder(&next, &cursor))
    return STEP_CUT;
#if FRAME_LINK_REGISTER
  if (!interrupted)
    next.lr = 0; /* only a signal frame restores the caller's link register */
#endif
  if (!region_of(next.sp, interrupted, &w->stack))
    return STEP_CUT;
  thread_stats.frames_unwinder++;
  w->regs = next;
  w->exact = interrupted;
  return STEP_OK;
}

/* Step a signal return trampoline by reading the interrupted context from
 * the signal frame (frame_regs_from_signal_frame: AArch64), within the
 * stack's bounds; 0 where that is left to libunwind. The interrupted frame
 * comes with its link register, and its PC is exact. */
static int signal_frame_step(struct walk *w) {
  struct frame_regs next = w->regs;
  struct region stack;
  if (!frame_regs_from_signal_frame(&next, w->stack.lo, w->stack.hi) ||
      !region_of(next.sp, 1, &stack))
    return 0;
  thread_stats.frames_fast++;
  w->regs = next;
  w->stack = stack;
  w->exact = 1;
  return 1;
}

#ifdef FRAME_EHABI_TABLES
/* Step a frame the recipes leave to the EHABI interpreter (FRAME_EHABI:
 * it saves r11, or its CFA is r11's, or it pops sp), from its module's
 * table, found again as recipe_for finds it: no close under way, then
 * the current snapshot. What the interpreter does not take is libunwind's;
 * a stack it cannot read ends the walk, as a recipe's step would. */
static enum step ehabi_interpret(struct walk *w, uintptr_t pc, struct frame_recipe rc, int known) {
  if (atomic_load_explicit(&closes_in_progress, memory_order_seq_cst) != 0) {
    thread_stats.derivations_refused++;
    return w->uc ? STEP_CUT : unwinder_step(w, rc, known);
  }
  const struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_seq_cst);
  const struct fast_module *m = s ? module_of(s, pc) : NULL;
  struct ehabi_table t;
  if (!m || !module_ehabi(m, &t))
    return unwinder_step(w, rc, known);
  struct frame_regs next = w->regs;
  switch (frame_ehabi_step(&t, pc, &next, w->stack.lo, w->stack.hi)) {
  case FRAME_STEP_OK: break;
  case FRAME_STEP_END: w->outermost = 1; return STEP_END;
  case FRAME_STEP_BAD_STACK: return STEP_CUT;
  default: return unwinder_step(w, rc, known);
  }
  thread_stats.frames_fast++;
  thread_stats.frames_interpreted++;
  w->regs = next;
  w->exact = 0;
  return STEP_OK;
}
#endif

static int read_prologues = 1;

void igprof_walk_fast_set_prologues(int on) { read_prologues = on; }

#ifdef FRAME_EHABI_TABLES
/* Whether `ra` (as a call leaves it in lr: with the Thumb bit of Thumb
 * callers) lies in a module's code just after a call. */
static int prologue_ra_valid(const struct module_snapshot *s, uintptr_t ra) {
  uintptr_t a = frame_code_address(ra);
  const struct fast_module *m = module_of(s, a);
  return m && a >= m->text_start + 4 && module_readable(m, a - 4, 4) && arm_follows_call(ra);
}

/* Registers of the caller of the frame in w->regs whose shape `pr` is
 * (from_lr: the return address is in lr; the caller's sp is then sp +
 * pr->cfa, or sp where no saving push was found at all), validated: the
 * caller's sp above this frame's (or equal, for a return address still in
 * lr) and on the stack, every slot read within the walk's bounds, the
 * return address after a call in a module's code. 0: not so. */
static int prologue_next(const struct walk *w, const struct module_snapshot *s,
                         const struct arm_prologue *pr, int from_lr, uintptr_t lr_raw,
                         struct frame_regs *next) {
  uintptr_t sp = w->regs.sp, lo = w->stack.lo, top = w->stack.hi - sizeof(uintptr_t);
  uintptr_t cfa = sp + (uintptr_t)(intptr_t)pr->cfa, ra;
  if (cfa < sp || cfa > w->stack.hi || (!from_lr && cfa == sp))
    return 0;
  if (from_lr) {
    ra = lr_raw;
    if (!ra || !prologue_ra_valid(s, ra))
      return 0;
  } else {
    uintptr_t ra_at = cfa + (uintptr_t)(intptr_t)pr->ra_at;
    if (ra_at < lo || ra_at < sp || ra_at > top)
      return 0;
    ra = *(const uintptr_t *)ra_at;
    if (!prologue_ra_valid(s, ra))
      return 0;
  }
  *next = w->regs;
  if (pr->r7_at) {
    uintptr_t at = cfa + (uintptr_t)(intptr_t)pr->r7_at;
    if (at < lo || at < sp || at > top)
      return 0;
    next->fp = *(const uintptr_t *)at;
  }
  if (pr->r11_at) {
    uintptr_t at = cfa + (uintptr_t)(intptr_t)pr->r11_at;
    if (at < lo || at < sp || at > top)
      return 0;
    next->r11 = *(const uintptr_t *)at;
  }
  next->pc = frame_code_address(ra);
  next->sp = cfa;
  next->lr = 0;
  return 1;
}

/* prologue_next with the return address in lr: the Thumb bit of lr is
 * that of the context where the walk has one (else lr was read without
 * it: tried as Thumb, then as A32). */
static int prologue_leaf_next(const struct walk *w, const struct module_snapshot *s,
                              const struct arm_prologue *pr, uintptr_t lr_raw, uintptr_t end,
                              struct frame_regs *next) {
  (void)end;
  if (lr_raw & 1)
    return prologue_next(w, s, pr, 1, lr_raw, next);
  return prologue_next(w, s, pr, 1, lr_raw | 1, next) || prologue_next(w, s, pr, 1, lr_raw, next);
}

/* arm_prologue_read's answer for a return address (what prologue_step uses
 * of it: the result, cfa, the save slots, ra_in_lr), from the shape cache
 * or read and cached: it depends on the code alone. An entry is one word:
 * bit 0 valid, 1 the mode, 2-3 the result, 4 ra_in_lr, 5-23 pc >> 13 (the
 * index and this name the pc and mode), 24-39 cfa / 4, 40-47, 48-55,
 * 56-63 minus ra_at, r7_at, r11_at / 4. Shapes that do not fit are not
 * cached. A writer that raced a module change takes its entry back, as
 * derive_recipe does. */
static enum arm_prologue_result prologue_shape(const struct module_snapshot *s, uintptr_t lo, uintptr_t end,
                                               int thumb, const struct arm_code_patch *patch, size_t npatch,
                                               struct arm_prologue *pr) {
  uint32_t i = (uint32_t)((end >> 1) ^ (thumb ? SHAPE_CACHE_SIZE / 2 : 0)) & (SHAPE_CACHE_SIZE - 1);
  uint64_t name = 1u | (uint64_t)(thumb != 0) << 1 | (uint64_t)((end >> 13) & 0x7ffff) << 5;
  const uint64_t name_mask = 3u | (uint64_t)0x7ffff << 5;
  uint64_t v = atomic_load_explicit(&shape_cache[i], memory_order_relaxed);
  if ((v & name_mask) == name) {
    memset(pr, 0, sizeof *pr);
    pr->ra_in_lr = (v >> 4) & 1;
    pr->cfa = (int32_t)((v >> 24) & 0xffff) * 4;
    pr->ra_at = -(int32_t)((v >> 40) & 0xff) * 4;
    pr->r7_at = -(int32_t)((v >> 48) & 0xff) * 4;
    pr->r11_at = -(int32_t)((v >> 56) & 0xff) * 4;
    return (enum arm_prologue_result)((v >> 2) & 3);
  }
  enum arm_prologue_result res = arm_prologue_read(lo, end, thumb, patch, npatch, pr);
  int32_t cfa = res == ARM_PROLOGUE_OK ? pr->cfa : 0, ra = res == ARM_PROLOGUE_OK ? -pr->ra_at : 0;
  int32_t r7 = res == ARM_PROLOGUE_OK ? -pr->r7_at : 0, r11 = res == ARM_PROLOGUE_OK ? -pr->r11_at : 0;
  if (((cfa | ra | r7 | r11) & 3) || cfa < 0 || cfa >= 0x40000 || ra < 0 || ra > 1020 || r7 < 0 ||
      r7 > 1020 || r11 < 0 || r11 > 1020)
    return res;
  v = name | (uint64_t)res << 2 | (uint64_t)(res == ARM_PROLOGUE_OK && pr->ra_in_lr) << 4 |
      (uint64_t)(cfa / 4) << 24 | (uint64_t)(ra / 4) << 40 | (uint64_t)(r7 / 4) << 48 | (uint64_t)(r11 / 4) << 56;
  atomic_store_explicit(&shape_cache[i], v, memory_order_relaxed);
  if (atomic_load_explicit(&current_snapshot, memory_order_seq_cst) != s)
    atomic_compare_exchange_strong(&shape_cache[i], &v, 0);
  return res;
}

/* Step a frame no EHABI entry describes (EXIDX_CANTUNWIND, or code
 * outside every entry: FRAME_OUTERMOST) by reading its function's
 * prologue (arm_prologue.c), under the same dlclose guard as a
 * derivation. The reading of a return address's frame is cached
 * (prologue_shape: it depends on the code alone); its validation is done
 * at each step, an interrupted frame's reading each time.
 * The prologue is looked for from the frame's PC back to the start of its
 * index entry (the functions before it have entries of their own) or of
 * its module's code. An interrupted frame may also have its return address
 * still in lr: taken first where no push was found or a return lies
 * between the push and the PC (the push may be another function's), last
 * otherwise. 0: the walk ends here, as before. */
static int prologue_step(struct walk *w, uintptr_t lookup_pc) {
  if (!read_prologues)
    return -1;
  if (atomic_load_explicit(&closes_in_progress, memory_order_seq_cst) != 0)
    return 0;
  const struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_seq_cst);
  const struct fast_module *m = s ? module_of(s, lookup_pc) : NULL;
  if (!m)
    return -1;
  uintptr_t end = w->regs.pc, lo = m->text_start;
  struct ehabi_table t;
  if (module_ehabi(m, &t)) {
    const uint32_t *entry = ehabi_find(&t, lookup_pc);
    if (entry && ehabi_prel31(entry) > lo && ehabi_prel31(entry) <= end)
      lo = ehabi_prel31(entry);
  }
  /* At a function's first instruction (end == lo) there is nothing to
   * read: the frame is a leaf's, its return address in lr. */
  if (end > lo && !module_readable(m, lo, end - lo))
    return -1;
  /* A hook's jump over the function's first instructions hides the push
   * the reader looks for (-mp patches malloc's): it reads what was there. */
  struct hook_original orig[4];
  struct arm_code_patch patch[4];
  size_t npatch = hook_original_code(lo, end, orig, 4);
  for (size_t i = 0; i < npatch; i++) {
    patch[i].at = orig[i].at;
    patch[i].len = orig[i].len;
    patch[i].bytes = orig[i].bytes;
  }
  /* The mode: an interrupted frame's from its context, else Thumb (Debian
   * armhf's code), then A32 where the PC allows. */
  int modes[2] = {1, 0}, nmodes = end % 4 == 0 ? 2 : 1;
  uintptr_t lr_raw = 0;
  if (w->exact && w->regs.lr) {
    lr_raw = w->regs.lr;
    if (w->frame == 0 && w->uc) {
      lr_raw = (uintptr_t)w->uc->uc_mcontext.arm_lr;
      modes[0] = (w->uc->uc_mcontext.arm_cpsr & 0x20) != 0;
      nmodes = 1;
    }
  }
  struct frame_regs next;
  int read_stack = 0;
  for (int i = 0; i < nmodes; i++) {
    struct arm_prologue pr;
    enum arm_prologue_result res = lr_raw ? arm_prologue_read(lo, end, modes[i], patch, npatch, &pr)
                                          : prologue_shape(s, lo, end, modes[i], patch, npatch, &pr);
    if (res == ARM_PROLOGUE_REFUSED)
      continue;
    struct arm_prologue leaf;
    memset(&leaf, 0, sizeof leaf);
    leaf.cfa = pr.leaf_cfa;
    int found = 0;
    /* A return address's frame called, so it saved lr: only the stack's
     * slot can be its return address. */
    read_stack |= lr_raw || (res == ARM_PROLOGUE_OK && !pr.ra_in_lr);
    if (!lr_raw) {
      found = res == ARM_PROLOGUE_OK && !pr.ra_in_lr && prologue_next(w, s, &pr, 0, 0, &next);
    } else if (res == ARM_PROLOGUE_LEAF) {
      found = pr.leaf_ok && prologue_leaf_next(w, s, &leaf, lr_raw, end, &next);
    } else if (pr.ra_in_lr) {
      found = prologue_leaf_next(w, s, &pr, lr_raw, end, &next); /* after an epilogue's pop */
    } else {
      /* A return between the push and the PC: the push may be an earlier
       * function's and this one a leaf. lr is its return address if the
       * call before it (a direct one) went to code between that return
       * and the PC, or (an indirect one) lr does not point between the
       * push and the PC, where it would be a return address of a call
       * this function made. */
      int as_leaf = 0;
      if (pr.crossed_return && pr.leaf_ok) {
        uintptr_t lr_at = frame_code_address(lr_raw), target;
        const struct fast_module *lm = module_of(s, lr_at);
        uintptr_t lr_call = lr_raw;
        if (lm && lr_at >= lm->text_start + 4 && module_readable(lm, lr_at - 4, 4) &&
            (arm_follows_call(lr_call) || (!(lr_call & 1) && arm_follows_call(lr_call |= 1)))) {
          if (arm_call_target(lr_call, &target))
            as_leaf = frame_code_address(target) > pr.return_at && frame_code_address(target) <= end;
          else
            as_leaf = lr_at < pr.push || lr_at > end;
        }
      }
      found = as_leaf ? prologue_leaf_next(w, s, &leaf, lr_raw, end, &next)
                      : prologue_next(w, s, &pr, 0, 0, &next);
    }
    if (found) {
      struct region stack;
      if (!region_of(next.sp, 0, &stack))
        return 0;
      thread_stats.frames_fast++;
      thread_stats.frames_prologue++;
      w->regs = next;
      w->stack = stack;
      w->exact = 0;
      return 1;
    }
  }
  return read_stack ? 0 : -1;
}
#endif

/* The general step: any recipe, libunwind for what recipes cannot do. */
__attribute__((noinline)) static enum step step_slow(struct walk *w) {
  int known;
  uintptr_t lookup_pc = w->exact ? w->regs.pc : w->regs.pc - 1;
  struct frame_recipe rc = recipe_for(lookup_pc, &known);
  if (__builtin_expect(known == KNOWN_REFUSED, 0)) {
    /* A dlclose is under way. A hook walk asks libunwind, which finds
     * unwind data under the loader lock; a signal walk must not wait for
     * that lock, and ends here. */
    if (w->uc)
      return STEP_CUT;
    enum step r = unwinder_step(w, rc, known);
    w->frame++;
    if (r == STEP_OK && w->regs.pc == 0)
      return STEP_END;
    return r;
  }
  enum step result;
  switch (frame_step(&w->regs, rc, w->stack.lo, w->stack.hi)) {
  case FRAME_STEP_OK:
    thread_stats.frames_fast++;
    w->exact = 0;
    w->by_recipe = rc.kind == FRAME_CFA_DEREF;
    result = STEP_OK;
    break;
  case FRAME_STEP_END:
#ifdef FRAME_EHABI_TABLES
    /* A frame no EHABI entry describes: its prologue may. Where the walk
     * still ends, the end is as certain as a recipe's only if no stack
     * word was read to decide it (the memo joins through certain ends). */
    if (rc.kind == FRAME_OUTERMOST) {
      int stepped = prologue_step(w, lookup_pc);
      if (stepped > 0) {
        result = STEP_OK;
        break;
      }
      w->outermost = stepped < 0;
      return STEP_END;
    }
#endif
    w->outermost = 1;
    return STEP_END;
  case FRAME_STEP_UNWINDER:
#ifdef FRAME_EHABI_TABLES
    if ((rc.flags & FRAME_EHABI) && !(rc.flags & FRAME_SIGNAL)) {
      result = ehabi_interpret(w, lookup_pc, rc, known);
      if (result == STEP_END)
        return result;
      break;
    }
#endif
    /* FRAME_COMPLEX: code without unwind data has the frame-pointer
     * recipe (derive_recipe), so libunwind is asked only about frames it
     * can step from their unwind data, never to guess. A signal frame the
     * architecture's code can read is read here (signal_frame_step). */
    result = (rc.flags & FRAME_SIGNAL) && signal_frame_step(w) ? STEP_OK
                                                                : unwinder_step(w, rc, known);
    break;
  default: return STEP_CUT;
  }
  w->frame++;
  if (result == STEP_OK && w->regs.pc == 0)
    return STEP_END; /* a null return address ends the chain, as in libunwind */
  return result;
}

/* The common case, inlined into the walk loop: a cached recipe that steps
 * with SP/FP arithmetic and two stack loads. Anything else goes through
 * step_slow, which starts over from the unchanged registers. */
static inline __attribute__((always_inline)) enum step step(struct walk *w,
                                                           uint64_t *fast_frames) {
  uint32_t bits;
  if (__builtin_expect(cache_get(pc_cache, w->regs.pc - (w->exact ? 0 : 1), &bits), 1) &&
      frame_step(&w->regs, recipe_expand(bits), w->stack.lo, w->stack.hi) == FRAME_STEP_OK) {
    ++*fast_frames;
    w->exact = 0;
    w->frame++;
    return w->regs.pc ? STEP_OK : STEP_END; /* a null return address ends the chain */
  }
  return step_slow(w);
}

enum run_end { RUN_SLOW, RUN_END, RUN_FULL };

/* The current frame (pcs[*n_io - 1], registers w->regs) is frame p of the
 * previous walk. Re-read the slots the previous walk read from p outwards;
 * if all still hold what they held, append the previous walk's outer frames
 * and return RUN_END or RUN_FULL. Otherwise change nothing and return
 * MEMO_RETRY(q) when the slots of frames q..last (q > p) still hold their
 * values — the stacks differ below frame q but may meet again there, where
 * the walk can join then —, or -1 when not even the outermost frame's do. */
#define MEMO_RETRY(q) (-2 - (q))

/* Whether the slots frame k of a record read (readable: the caller has
 * checked) still give frame k + 1's return address and frame pointer.
 * Without a saved FP, the next frame's FP is compared with itself. */
/* A frame the general step stepped by a FRAME_CFA_DEREF recipe (a frame
 * that realigned its stack: every i386 main, which is on every stack of
 * the main thread) records no slots: its ra_at is MEMO_RESTEP, and
 * checking it means taking that step again, from the recorded registers,
 * within the stack that may be read ([lo, lo + span]). A slot address is
 * word-aligned, so the marker is never one. Other steps of the general
 * step still end what is joinable (walk_memo.joinable_from): taking them
 * again in every check cost more than it saved (x86_64 walk_bench, depth
 * 10: 42 -> 60 ns). */
#define MEMO_RESTEP ((uintptr_t)1)

__attribute__((noinline)) static int memo_restep_holds(const struct memo_frame *f, int k,
                                                       uintptr_t lo, uintptr_t span) {
  int known;
  struct frame_recipe rc = recipe_for(f[k].pc - 1, &known);
  if (known != 1)
    return 0;
  struct frame_regs r;
  memset(&r, 0, sizeof r);
  r.pc = f[k].pc;
  r.sp = f[k].sp;
  r.fp = f[k].fp;
  if (frame_step(&r, rc, lo, lo + span + sizeof(uintptr_t)) != FRAME_STEP_OK)
    return 0;
  return frame_code_address(r.pc) == f[k + 1].pc && r.sp == f[k + 1].sp && r.fp == f[k + 1].fp;
}

static inline int memo_step_holds(const struct memo_frame *f, int k, uintptr_t lo,
                                  uintptr_t span) {
  if (__builtin_expect(f[k].ra_at == MEMO_RESTEP, 0))
    return memo_restep_holds(f, k, lo, span);
  const uintptr_t *fp_slot = f[k].fp_at ? (const uintptr_t *)f[k].fp_at : &f[k + 1].fp;
  return frame_code_address(*(const uintptr_t *)f[k].ra_at) == f[k + 1].pc &&
         *fp_slot == f[k + 1].fp;
}

/* Whether the outermost frame of a record, which read a null return
 * address from `ra_at` (0: it had none to read), would end there again. */
static inline int memo_end_holds(uintptr_t ra_at, uintptr_t lo, uintptr_t span) {
  return !ra_at || (ra_at - lo <= span && frame_code_address(*(const uintptr_t *)ra_at) == 0);
}

/* From the outside in, down to frame p at the lowest: the lowest frame k
 * of record m from which the slots of frames k .. last still hold what m's
 * walk read from them, frames from `from` on being known to (from =
 * last + 1: none yet); -1 when the outermost frame's own slot does not.
 * A slot s may be read if lo <= s <= lo + span: s - lo <= span, one
 * compare (a null slot fails it too, lo being far above 0). */
static inline int memo_verify(const struct walk_memo *m, int p, int from, uintptr_t lo,
                              uintptr_t span) {
  const struct memo_frame *f = m->frames;
  int last = m->count - 1;
  if (from > last) {
    /* the outermost frame read a null return address */
    if (!memo_end_holds(f[last].ra_at, lo, span))
      return -1;
    from = last;
  }
  int ok_from = from;
  if (m->top == lo + span && f[p].sp >= lo) {
    /* Every slot is known to be readable (walk_memo.top). */
    for (int k = from - 1; k >= p && memo_step_holds(f, k, lo, span); k--)
      ok_from = k;
    return ok_from;
  }
  for (int k = from - 1; k >= p; k--) {
    uintptr_t ra_at = f[k].ra_at, fp_at = f[k].fp_at;
    if (ra_at != MEMO_RESTEP && ra_at - lo > span)
      break; /* only the outermost frame may end without a slot */
    if ((fp_at && fp_at - lo > span) || !memo_step_holds(f, k, lo, span))
      break;
    ok_from = k;
  }
  return ok_from;
}
__attribute__((noinline)) static int memo_join(struct walk *w, struct walk_memo *prev, int p, uintptr_t *pcs,
                     int *n_io, int max, uintptr_t lo, uintptr_t top) {
  const struct memo_frame *f = prev->frames;
  int last = prev->count - 1;
  int n = *n_io, i = n - 1, tail = last - p + 1;
  int fits = tail - 1 <= max - n;
  int from = w->verified == prev ? w->verified_from : last + 1;
  int ok_from, copied = 0;
  if (from == last + 1 && fits && prev->top == top && f[p].sp >= lo) {
    /* Nothing checked yet, every slot readable (memo_verify's fast case),
     * and all the outer frames fit: the check writes each frame as it
     * passes it, at pcs[i + k - p] for frame k. A write past a changed
     * slot lands beyond *n_io, where the walk writes again. */
    uintptr_t *out = pcs + i - p;
    uintptr_t end_at = f[last].ra_at; /* the outermost frame read a null return address */
    ok_from = last;
    if (!memo_end_holds(end_at, lo, top - lo))
      ok_from = -1;
    else
      for (int k = last - 1; k >= p && memo_step_holds(f, k, lo, top - lo); k--) {
        out[k + 1] = f[k + 1].pc - 1;
        ok_from = k;
      }
    copied = 1;
  } else {
    ok_from = from < 0 ? -1 : memo_verify(prev, p, from, lo, top - lo);
  }
  w->verified = prev;
  w->verified_from = ok_from;
  if (ok_from < 0)
    return -1;
  if (ok_from > p)
    return ok_from + 1 <= last ? MEMO_RETRY(ok_from) : -1;
  int end = RUN_END;
  int copy = fits ? tail - 1 : max - n; /* outer frames that fit in pcs */
  if (!fits)
    end = RUN_FULL;
  /* The frames outward of p are already in pcs, each at its own index, if
   * this check or memo_repeat's (see struct walk) wrote them. */
  if (copied || (w->placed == prev && i == p && w->placed_from <= p + 1)) {
    n += copy;
  } else {
    for (int k = 1; k <= copy; k++)
      pcs[n++] = f[p + k].pc - 1;
  }
  const uintptr_t at_pc = f[p + copy].pc, at_sp = f[p + copy].sp, at_fp = f[p + copy].fp;
  struct walk_memo *cur = w->cur, *rec = prev;
  if (cur) {
    int keep = i + tail <= MEMO_FRAMES ? tail : MEMO_FRAMES - i;
    if (w->prev_keyed) {
      /* The record of this walk's own start, which this walk's record
       * replaces anyway: it becomes this walk's record, its tail moved to
       * where this walk joined it and the fresh inner frames in front. */
      if (keep > 0 && i != p)
        memmove(&rec->frames[i], &rec->frames[p], (size_t)keep * sizeof rec->frames[0]);
      if (i > 0)
        memcpy(rec->frames, cur->frames, (size_t)(i < MEMO_FRAMES ? i : MEMO_FRAMES) *
                                             sizeof rec->frames[0]);
      rec->joinable_from = cur->joinable_from;
      w->cur = rec;
    } else if (keep > 0) {
      /* Another start's record: it stays as it is, its tail is copied. */
      memcpy(&cur->frames[i], &prev->frames[p], (size_t)keep * sizeof cur->frames[0]);
    }
  }
  thread_stats.frames_memo += (uint64_t)copy;
  regs_set(&w->regs, at_pc, at_sp, at_fp);
#ifdef FRAME_EHABI_TABLES
  w->regs.r11 = 0; /* the walk ends here */
#endif
  *n_io = n;
  return end;
}

/* GCC's straight-line vectoriser packs the walk loop's pc and sp into one
 * vector register to store them into the memo with one instruction, and
 * then carries them from frame to frame in it: two register-file crossings
 * on the chain of dependent loads, which made each frame about twice as
 * slow (bench/walk). Plain scalar code is what the loop wants; memo_join,
 * above, keeps the vectoriser (its copy loops gain from it). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

/* The hot loop: step and record caller after caller while each return
 * address has a cached, compressed SP/FP recipe, with the registers in
 * locals. Stops at the first frame that needs step_slow (leaving the walk
 * on that frame, already recorded), at the end of the stack, or when `max`
 * frames are recorded and another one exists. Joins the previous walk of
 * the thread where it can (memo_join). Precondition: !w->exact.
 *
 * Per frame the hot path is: the thread cache's key and value (indexed by
 * the return address's low bits), the CFA, two stack loads, the memo
 * record and the output store; everything the rare cases need (the
 * previous walk, the shared cache) stays out of the loop's registers. The
 * previous walk is looked at only when sp reaches memo_sp, the stack
 * pointer of its next candidate frame. */
static inline __attribute__((always_inline)) enum run_end fast_run(struct walk *w, uintptr_t *pcs,
                                                                  int *n_io, int max) {
  uintptr_t pc = w->regs.pc, sp = w->regs.sp, fp = w->regs.fp;
#ifdef FRAME_EHABI_TABLES
  uintptr_t r11 = w->regs.r11;
#endif
  const uintptr_t lo = w->stack.lo, top = w->stack.hi - sizeof(uintptr_t);
  uintptr_t *out = pcs + *n_io, *start = out, *const out_end = pcs + max;
  struct memo_frame *rec = NULL, *rec_end = NULL;
  if (w->cur && *n_io - 1 < MEMO_FRAMES) {
    rec = &w->cur->frames[*n_io - 1];
    rec_end = &w->cur->frames[MEMO_FRAMES];
  }
  uintptr_t memo_sp = w->prev && w->join_at < w->prev->count ? w->prev->frames[w->join_at].sp
                                                              : UINTPTR_MAX;
  /* Without the thread's cache, a one-entry table that never matches. */
  static const uint64_t no_entry[2];
  const uint64_t *tc_key = w->tc ? w->tc : no_entry;
  /* A base of its own for the values, hidden from the optimiser: knowing
   * it is tc_key + 1, GCC adds the 1 (or scales) the index in a separate
   * instruction, an extra operation on the chain of dependent loads. */
  const uint64_t *tc_val = tc_key + 1;
  __asm__("" : "+r"(tc_val));
  const uintptr_t tc_mask = w->tc ? TC_INDEX_MASK : 0;
  enum run_end end;
  for (;;) {
    if (__builtin_expect(sp >= memo_sp, 0)) {
      struct walk_memo *prev = w->prev;
      int p = w->join_at;
      while (p < prev->count && prev->frames[p].sp < sp)
        p++;
      w->join_at = p;
      memo_sp = p < prev->count ? prev->frames[p].sp : UINTPTR_MAX;
      if (p < prev->count && prev->frames[p].sp == sp && prev->frames[p].pc == pc &&
          prev->frames[p].fp == fp && p >= prev->joinable_from) {
        thread_stats.frames_fast += (uint64_t)(out - start);
        w->frame += (int)(out - start);
        start = out;
        regs_set(&w->regs, pc, sp, fp);
#ifdef FRAME_EHABI_TABLES
        w->regs.r11 = r11;
#endif
        *n_io = (int)(out - pcs);
        int joined = memo_join(w, prev, p, pcs, n_io, max, lo, top);
        if (joined >= 0)
          return (enum run_end)joined;
        if (joined == -1) {
          w->prev = NULL; /* changed all the way out: walk on, and do not try again */
          memo_sp = UINTPTR_MAX;
        } else {
          /* Different up to frame q of the previous walk: try again if
           * this walk reaches that frame. */
          w->join_at = -2 - joined;
          memo_sp = prev->frames[w->join_at].sp;
        }
      }
    }
    uintptr_t ti = pc & tc_mask;
    uint64_t v = tc_val[ti];
    if (__builtin_expect(tc_key[ti] != pc, 0)) {
      uint32_t bits;
      if (!cache_get(pc_cache, pc - 1, &bits) || (v = tc_value(bits)) == 0) {
        end = RUN_SLOW;
        break;
      }
      if (w->tc) {
        w->tc[ti] = pc;
        w->tc[ti + 1] = v;
      }
    }
    /* A branch, not a conditional move: the kind of frame is predictable
     * and a branch keeps the test off the chain of dependent loads. */
    uintptr_t base = sp;
    if (v & TC_FP_BASE) {
      base = fp;
      __asm__("" : "+r"(base)); /* keeps it a branch */
    }
    uintptr_t cfa = base + (uint32_t)v;
    uintptr_t next_fp = fp, fp_at = 0;
#if FRAME_LINK_REGISTER
    uintptr_t ra_at = base + (uintptr_t)(v >> TC_RA_SHIFT);
    if (cfa <= sp || ra_at < sp || ra_at > top) {
      end = RUN_SLOW; /* step_slow decides: bad stack or not */
      break;
    }
    if (v & TC_FP_SAVED) {
      fp_at = ra_at - TC_FP_GAP(v);
      if (fp_at < sp) { /* step_slow decides (and see walk_memo.top) */
        end = RUN_SLOW;
        break;
      }
      next_fp = *(const uintptr_t *)fp_at;
    }
#else
    uintptr_t ra_at = cfa - sizeof(uintptr_t);
    if (cfa <= sp || ra_at < lo || ra_at > top) {
      end = RUN_SLOW; /* step_slow decides: bad stack or not */
      break;
    }
    if (v >> TC_FP_SHIFT) {
      fp_at = cfa - (uintptr_t)(v >> TC_FP_SHIFT);
      if (fp_at < sp || fp_at > ra_at) { /* step_slow decides (and see walk_memo.top) */
        end = RUN_SLOW;
        break;
      }
      next_fp = *(const uintptr_t *)fp_at;
    }
#endif
#ifdef FRAME_EHABI_TABLES
    uintptr_t next_r11 = r11;
    if (v & TC_R11_SAVED) { /* off the chain of dependent loads */
      if (ra_at - sizeof(uintptr_t) < sp) {
        end = RUN_SLOW;
        break;
      }
      next_r11 = *(const uintptr_t *)(ra_at - sizeof(uintptr_t));
    }
#endif
    uintptr_t next_pc = frame_code_address(*(const uintptr_t *)ra_at);
    if (rec < rec_end)
      *rec++ = (struct memo_frame){pc, sp, fp, ra_at, fp_at};
    if (next_pc == 0) {
      end = RUN_END; /* a null return address ends the chain, as in libunwind */
      break;
    }
    if (out == out_end) {
      end = RUN_FULL;
      break;
    }
    pc = next_pc;
    sp = cfa;
    fp = next_fp;
#ifdef FRAME_EHABI_TABLES
    r11 = next_r11;
#endif
    *out++ = pc - 1;
  }
  thread_stats.frames_fast += (uint64_t)(out - start);
  w->frame += (int)(out - start);
  regs_set(&w->regs, pc, sp, fp);
#ifdef FRAME_EHABI_TABLES
  w->regs.r11 = r11;
#endif
  *n_io = (int)(out - pcs);
  return end;
}

/* Whole walk by libunwind, for a thread whose stack bounds are unknown. */
static int unwinder_walk(struct walk *w, const struct module_snapshot *s, uintptr_t *pcs,
                         int max, uintptr_t skip_until, int *truncated) {
  ucontext_t uc;
  unw_cursor_t cursor;
  thread_stats.walks_unwinder++;
  if (in_rebuild)
    return 0; /* see rebuild(): no libunwind while this thread holds the loader lock */
  if (w->uc) {
    uc = *w->uc;
  } else {
    memset(&uc, 0, sizeof uc);
    frame_regs_to_ucontext(&uc, &w->regs);
  }
  if (unw_init_local2(&cursor, UNW_CONTEXT(&uc), w->exact ? UNW_INIT_SIGNAL_FRAME : 0) < 0)
    return 0;
  int n = 0, skipping = skip_until != 0, skipped = 0, exact = w->exact;
  for (;;) {
    unw_word_t ip;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    ip = frame_code_address(ip);
    if (skipping && ip == skip_until)
      skipping = 0;
    if (!skipping) {
      if (n == max) {
        if (truncated)
          *truncated = WALK_TRUNCATED;
        break;
      }
      pcs[n++] = exact ? ip : ip - 1;
    } else if (++skipped > HOOK_SKIP_LIMIT) {
      break;
    }
#if FRAME_PC_THUNK_AFTER
    /* libunwind steps an interrupted PC thunk without unwind data by the
     * frame-pointer chain, which the thunk has not set up (frame.h): step
     * it by its definition. */
    if (exact && s && frame_memory_mapped(ip - FRAME_PC_THUNK_BEFORE,
                                          FRAME_PC_THUNK_BEFORE + FRAME_PC_THUNK_AFTER) &&
        frame_code_is_pc_thunk(ip)) {
      thread_stats.kernel_calls++;
      if (!frame_unwinder_pc_thunk_step(&cursor, &uc))
        break;
      exact = 0;
      continue;
    }
#endif
    /* As in step(): the frame after a signal trampoline was interrupted. */
    if (s) {
      int known;
      struct frame_recipe rc = recipe_for(exact ? ip : ip - 1, &known);
      exact = known == KNOWN_REFUSED ? sigreturn_at(ip) : (rc.flags & FRAME_SIGNAL) != 0;
    } else {
      exact = 0;
    }
#ifdef FRAME_UNWINDER_SIGNAL_STEP
    /* The signal frame read by the walker (frame.h: libunwind 1.6 misreads
     * ARM's sigreturn frame, and i386's interrupted frame). */
    if (exact) {
      thread_stats.kernel_calls++;
      if (!frame_unwinder_signal_step(&cursor, &uc, ip))
        break;
      continue;
    }
#endif
    if (guarded_step(&cursor) <= 0)
      break;
  }
  return n;
}

/* The first slot of the set a start (pc, sp) belongs to. */
static inline unsigned memo_set_of(uintptr_t pc, uintptr_t sp) {
  uint64_t h = ((uint64_t)pc ^ (uint64_t)sp * 0x9e3779b97f4a7c15ull) * 0xc2b2ae3d27d4eb4full;
  return (unsigned)(h >> 58) % (MEMO_KEYS / MEMO_WAYS) * MEMO_WAYS;
}

/* The slot whose record starts at (pc, sp), or -1. */
static inline int memo_find(const struct thread_memo *tm, uintptr_t pc, uintptr_t sp,
                            unsigned set) {
  for (unsigned k = set; k < set + MEMO_WAYS; k++)
    if (tm->start[k].pc == pc && tm->start[k].sp == sp)
      return (int)k;
  return -1;
}

static inline int memo_usable(const struct walk_memo *m, const struct module_snapshot *s) {
  return m && m->snapshot == s && m->complete && m->count > 0;
}

/* Take this thread's memos for the walk, unless a walk interrupted by this
 * signal handler holds them. The walk starts at w->regs. */
static void memo_begin(struct walk *w, const struct module_snapshot *s) {
  struct thread_memo *tm = thread_memo;
  w->prev = w->cur = NULL;
  w->join_at = 0;
  w->tc = NULL;
  if (!tm || memo_busy)
    return;
  memo_busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (tm->tc_snapshot != s) {
    if (tm->tc_snapshot) /* a fresh memo is zero: its pages stay untouched until used */
      memset(tm->tc, 0, sizeof tm->tc);
    tm->tc_snapshot = s;
  }
  if (!tm->spare) { /* first walk: buffers to slots */
    tm->spare = &tm->buf[MEMO_KEYS];
    for (int k = 0; k < MEMO_KEYS; k++)
      tm->slot[k] = &tm->buf[k];
  }
  w->tc = tm->tc;
  unsigned set = memo_set_of(w->regs.pc, w->regs.sp);
  int k = memo_find(tm, w->regs.pc, w->regs.sp, set);
  struct walk_memo *recent = tm->slot[tm->recent];
  w->prev_keyed = 0;
  if (k >= 0 && memo_usable(tm->slot[k], s)) {
    w->key = k;
    w->prev = tm->slot[k];
    w->prev_keyed = 1;
  } else {
    /* A start of its own: the set's least recently used slot. */
    w->key = k >= 0 ? k : (int)(set + (MEMO_WAYS - 1 - tm->way[set / MEMO_WAYS]));
    if (memo_usable(recent, s))
      w->prev = recent;
  }
  if (w->verified && (w->verified != w->prev || w->verified_gen != tm->gen))
    w->verified = NULL; /* a signal handler's walk ended in between: records may have changed */
  if (w->placed != w->verified)
    w->placed = NULL;
  w->cur = tm->spare;
  w->cur->snapshot = s;
  w->cur->joinable_from = 0;
  w->cur->top = w->stack.hi - sizeof(uintptr_t);
}

static void memo_end(struct walk *w, int n, int complete) {
  if (!w->cur)
    return;
  struct thread_memo *tm = thread_memo;
  struct walk_memo *rec = w->cur;
  rec->count = n < MEMO_FRAMES ? n : MEMO_FRAMES;
  rec->complete = complete && n <= MEMO_FRAMES;
  int k = w->key;
  if (rec == tm->spare) { /* else it is slot k's own record, taken over by a join */
    tm->spare = tm->slot[k];
    tm->slot[k] = rec;
  }
  tm->start[k].pc = rec->count > 0 ? rec->frames[0].pc : 0;
  tm->start[k].sp = rec->count > 0 ? rec->frames[0].sp : 0;
  tm->way[k / MEMO_WAYS] = (uint8_t)(k % MEMO_WAYS);
  tm->recent = k;
  tm->gen++;
  atomic_signal_fence(memory_order_seq_cst);
  memo_busy = 0;
}

/* The common loop: record from the first frame whose pc is `skip_until`
 * (0: from the start), at most `max` frames. */
static int walk_run(struct walk *w, uintptr_t *pcs, int max, uintptr_t skip_until,
                    int *truncated) {
  const struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_acquire);
  thread_stats.walks++;
  if (truncated)
    *truncated = 0;
  if (max <= 0)
    return 0;
  if (!s || !region_of(w->regs.sp, w->uc != NULL, &w->stack)) {
    /* A thread without known bounds, or code on a stack of its own making
     * (coroutines): libunwind walks it, if the stack pointer is mapped at
     * all. A wild stack pointer on a thread we know gives the PC alone. */
    if (!s || stack_hi == 0 ||
        (thread_stats.kernel_calls++, frame_memory_mapped(w->regs.sp, sizeof(uintptr_t))))
      return unwinder_walk(w, s, pcs, max, skip_until, truncated);
    thread_stats.walks_cut++;
    if (truncated)
      *truncated = WALK_STOPPED;
    if (skip_until)
      return 0;
    pcs[0] = w->exact ? w->regs.pc : w->regs.pc - 1;
    return 1;
  }
  int n = 0, skipped = 0;
  uint64_t fast_frames = 0;
  if (skip_until) {
    /* The profiler's own frames stepped over are no frames of the stack
     * (the -d accounting counts recorded frames only). */
    uint64_t fast_before = thread_stats.frames_fast, unwinder_before = thread_stats.frames_unwinder;
    while (w->regs.pc != skip_until || w->exact) {
      if (++skipped > HOOK_SKIP_LIMIT || step(w, &fast_frames) != STEP_OK) {
        /* Our own frames could not be walked: keep the one frame known for
         * certain, as the libunwind method does. */
        thread_stats.frames_fast += fast_frames;
        thread_stats.walks_cut++;
        if (truncated)
          *truncated = WALK_STOPPED;
        pcs[0] = skip_until - 1;
        return 1;
      }
    }
    thread_stats.frames_fast = fast_before;
    thread_stats.frames_unwinder = unwinder_before;
    fast_frames = 0;
  }
  thread_stats.frames_fast += fast_frames;
  memo_begin(w, s);
  int complete = 0;
  pcs[n++] = w->exact ? w->regs.pc : w->regs.pc - 1;
  for (;;) {
    if (!w->exact) {
      enum run_end end = fast_run(w, pcs, &n, max);
      if (end == RUN_END) {
        complete = 1;
        break;
      }
      if (end == RUN_FULL) {
        if (truncated)
          *truncated = WALK_TRUNCATED;
        break;
      }
    }
    int recorded = w->cur && n - 1 < MEMO_FRAMES, joinable = recorded ? w->cur->joinable_from : 0;
    int from_return = !w->exact;
    if (recorded) {
      w->cur->frames[n - 1] = (struct memo_frame){w->regs.pc, w->regs.sp, w->regs.fp, 0, 0};
      w->cur->joinable_from = n;
    }
    w->outermost = 0;
    w->by_recipe = 0;
    enum step r = step_slow(w);
    if (r == STEP_OK && recorded && from_return && w->by_recipe) {
      /* A realigned frame's step from a return address: a later walk may
       * join through it, taking it again (memo_restep_holds). */
      w->cur->frames[n - 1].ra_at = MEMO_RESTEP;
      w->cur->joinable_from = joinable;
    }
    if (r != STEP_OK) {
      if (r == STEP_CUT) {
        thread_stats.walks_cut++;
        if (truncated)
          *truncated = WALK_STOPPED;
      } else if (w->outermost && w->cur)
        w->cur->joinable_from = n - 1; /* an end by recipe is as certain as a step */
      complete = r == STEP_END;
      break;
    }
    if (n == max) {
      if (truncated)
        *truncated = WALK_TRUNCATED;
      break;
    }
    pcs[n++] = w->exact ? w->regs.pc : w->regs.pc - 1;
  }
  memo_end(w, n, complete);
  return n;
}

/* Every field set one by one: an initializer zeroes the whole structure,
 * which GCC does with a `rep stos`, whose start-up alone costs several
 * nanoseconds per walk. */
static inline void walk_init(struct walk *w, int exact, const ucontext_t *uc) {
  w->exact = exact;
  w->stack.lo = w->stack.hi = 0;
  w->uc = uc;
  w->frame = 0;
  w->prev = w->cur = NULL;
  w->join_at = 0;
  w->key = 0;
  w->prev_keyed = 0;
  w->outermost = 0;
  w->tc = NULL;
  w->verified = NULL;
  w->verified_from = -1;
  w->verified_gen = 0;
  w->placed = NULL;
  w->placed_from = 0;
}

/* The commonest hook walk: a loop allocating again from where it did
 * before. When the walk starts at exactly the registers (pc, sp, fp) of
 * the first frame of the record filed under its start, and every stack
 * slot that record's walk read still holds what it held, the record is the
 * walk: memo_join's test for p = 0, with nothing set up for a step. When
 * a slot has changed, what was checked is left in *checked (the frames
 * from the first changed one outwards hold: struct walk's verified), and
 * the walk that follows joins the record without checking those again. Only for walks whose stack region
 * starts at sp (hook walks): the record's slots then lie at or above sp,
 * and below the top of the same thread's stack. Returns the frame count,
 * or -1 to walk. */
struct repeat_check {
  const struct walk_memo *record; /* NULL: nothing checked */
  int ok_from;
  unsigned gen;
  int placed_from; /* pcs[placed_from .. record's last] hold its frames */
};

static inline int memo_repeat(uintptr_t pc, uintptr_t sp, uintptr_t fp, uintptr_t *pcs, int max,
                              struct repeat_check *checked) {
  struct thread_memo *tm = thread_memo;
  checked->record = NULL;
  if (!tm || memo_busy || !tm->spare || sp < stack_lo || sp >= stack_hi)
    return -1;
  const struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_acquire);
  int key = memo_find(tm, pc, sp, memo_set_of(pc, sp));
  if (key < 0)
    return -1;
  const struct walk_memo *m = tm->slot[key];
  if (m->snapshot != s || !s || !m->complete || m->joinable_from != 0 || m->count > max ||
      m->count <= 0 || m->frames[0].pc != pc || m->frames[0].sp != sp || m->frames[0].fp != fp)
    return -1;
  memo_busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  const struct memo_frame *f = m->frames;
  const int last = m->count - 1;
  const uintptr_t top = stack_hi - sizeof(uintptr_t);
  int ok_from, placed = m->count;
  if (m->top == top) {
    /* memo_verify's loop for this case, writing the frames as it goes:
     * all of them are written when every slot holds. */
    ok_from = last;
    if (!memo_end_holds(f[last].ra_at, sp, top - sp))
      ok_from = -1;
    for (int k = last - 1; ok_from >= 0 && k >= 0 && memo_step_holds(f, k, sp, top - sp); k--) {
      pcs[k + 1] = f[k + 1].pc - 1;
      ok_from = k;
    }
    if (ok_from >= 0)
      placed = ok_from + 1;
  } else {
    ok_from = memo_verify(m, 0, last + 1, sp, top - sp);
    if (ok_from == 0)
      for (int k = 1; k <= last; k++)
        pcs[k] = f[k].pc - 1;
  }
  int n = -1;
  if (ok_from == 0) {
    pcs[0] = pc - 1;
    n = last + 1;
    tm->recent = key;
    tm->way[key / MEMO_WAYS] = (uint8_t)(key % MEMO_WAYS);
    thread_stats.walks++;
    thread_stats.frames_memo += (uint64_t)last;
    thread_stats.walks_repeat++;
  } else {
    *checked = (struct repeat_check){m, ok_from, tm->gen, placed};
  }
  atomic_signal_fence(memory_order_seq_cst);
  memo_busy = 0;
  return n;
}

/* A hook walk from the registers of the hook's caller, if `caller` is at
 * caller_ret (memo_repeat first), else stepping on to it. */
static int walk_from_caller(const struct frame_regs *caller, uintptr_t *pcs, int max,
                            void *caller_ret, int *truncated) {
  struct repeat_check checked = {NULL, -1, 0, 0};
  if (caller->pc == (uintptr_t)caller_ret) {
    int n = memo_repeat(caller->pc, caller->sp, caller->fp, pcs, max, &checked);
    if (n >= 0) {
      if (truncated)
        *truncated = 0;
      return n;
    }
  }
  struct walk w;
  walk_init(&w, 0, NULL);
  w.regs = *caller;
  w.verified = checked.record;
  w.verified_from = checked.ok_from;
  w.verified_gen = checked.gen;
  w.placed = checked.record;
  w.placed_from = checked.placed_from;
  return walk_run(&w, pcs, max, (uintptr_t)caller_ret, truncated);
}

#ifdef FRAME_RECORD_CALLER_SP
/* A walk from a frame record (frame.h): from the registers of the caller
 * of the function that owns the record. */
static int walk_from_record(const uintptr_t *record, uintptr_t *pcs, int max, void *caller_ret,
                            int *truncated) {
  struct frame_regs caller;
  frame_regs_from_record(&caller, record);
  return walk_from_caller(&caller, pcs, max, caller_ret, truncated);
}
#else
/* Where a frame record does not give the caller's stack pointer (AArch64:
 * GCC puts the record at the bottom of the frame), a hook walk starts from
 * registers captured in the profiler's own frame (`here`, an exact PC) and
 * steps out of the profiler's frames to caller_ret with cached recipes
 * only, then goes on as from a record. A recipe not cached yet sends it
 * the general way, which derives it. The frame `here` describes must still
 * be live: the caller does not return (or tail-call) before the walk ends. */
static int walk_from_here(const struct frame_regs *here, uintptr_t *pcs, int max,
                          void *caller_ret, int *truncated) {
  struct region stack;
  struct frame_regs r = *here;
  /* A code address, as the walk's PCs are (ARM32: without the Thumb bit). */
  caller_ret = (void *)frame_code_address((uintptr_t)caller_ret);
  if (region_of(r.sp, 0, &stack)) {
    for (int i = 0; i <= HOOK_SKIP_LIMIT; i++) {
      if (i > 0 && r.pc == (uintptr_t)caller_ret)
        return walk_from_caller(&r, pcs, max, caller_ret, truncated);
      uint32_t bits;
      if (!cache_get(pc_cache, i == 0 ? r.pc : r.pc - 1, &bits) ||
          frame_step(&r, recipe_expand(bits), stack.lo, stack.hi) != FRAME_STEP_OK)
        break;
    }
  }
  struct walk w;
  walk_init(&w, 1, NULL);
  w.regs = *here;
  return walk_run(&w, pcs, max, (uintptr_t)caller_ret, truncated);
}
#endif

#if defined(FRAME_RECORD_CALLER_SP) && defined(__GNUC__) && !defined(__clang__)
/* With a frame pointer of its own (GCC's optimize attribute: this file is
 * built without), this function knows its caller's registers without a
 * step: they follow from its frame record. That saves a lookup and a step
 * (about a fifth of a 10-frame walk) on every hook walk. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int
igprof_walk_fast_from_hook(uintptr_t *pcs, int max, void *caller_ret, int *truncated) {
  int n = walk_from_record(__builtin_frame_address(0), pcs, max, caller_ret, truncated);
  /* Not a tail call: that would pop this frame's record before the walk
   * reads it, and the callee's pushes would overwrite it. */
  __asm__ volatile("" : "+r"(n));
  return n;
}
#elif !defined(FRAME_RECORD_CALLER_SP)
__attribute__((noinline)) int igprof_walk_fast_from_hook(uintptr_t *pcs, int max,
                                                         void *caller_ret, int *truncated) {
  struct frame_regs here;
  FRAME_REGS_HERE(&here);
  int n = walk_from_here(&here, pcs, max, caller_ret, truncated);
  __asm__ volatile("" : "+r"(n)); /* not a tail call: the walk steps through this frame */
  return n;
}
#else
__attribute__((noinline)) int igprof_walk_fast_from_hook(uintptr_t *pcs, int max,
                                                         void *caller_ret, int *truncated) {
  struct walk w;
  walk_init(&w, 1, NULL);
  FRAME_REGS_HERE(&w.regs);
  return walk_run(&w, pcs, max, (uintptr_t)caller_ret, truncated);
}
#endif

/* A replacement compiled with a frame pointer keeps a frame record at its
 * own frame address (frame.h). Where the record gives the caller's stack
 * pointer, the walk starts from the registers it holds: no step through
 * the profiler's own frames. Elsewhere the record only vouches for the
 * caller, and the walk steps out to it from here, as a hook walk does. */
int igprof_walk_fast_from_frame(uintptr_t *pcs, int max, void *caller_ret, const void *frame,
                                int *truncated) {
#if FRAME_RECORD_AT_FP
  const uintptr_t *f = frame;
  if (!f || frame_code_address(f[FRAME_RECORD_RA]) != (uintptr_t)caller_ret)
    return -1;
#ifdef FRAME_RECORD_CALLER_SP
  return walk_from_record(f, pcs, max, caller_ret, truncated);
#else
  return igprof_walk_fast_from_hook(pcs, max, caller_ret, truncated);
#endif
#else
  (void)pcs, (void)max, (void)caller_ret, (void)frame, (void)truncated;
  return -1;
#endif
}

/* walk.h's igprof_walk_from_hook_frame: from the record where it vouches
 * for the caller and gives its stack pointer, else from the hook. Both are
 * tail calls: the hook's walk keeps nothing of this frame (a fallback
 * after igprof_walk_fast_from_frame's refusal would save the arguments). */
int igprof_walk_fast_from_hook_frame(uintptr_t *pcs, int max, void *caller_ret, const void *frame,
                                     int *truncated) {
#if FRAME_RECORD_AT_FP && defined(FRAME_RECORD_CALLER_SP)
  const uintptr_t *f = frame;
  if (f && frame_code_address(f[FRAME_RECORD_RA]) == (uintptr_t)caller_ret)
    return walk_from_record(f, pcs, max, caller_ret, truncated);
#else
  (void)frame;
#endif
  return igprof_walk_fast_from_hook(pcs, max, caller_ret, truncated);
}

int igprof_walk_fast_from_signal(uintptr_t *pcs, int max, const ucontext_t *uc, int *truncated) {
  struct walk w;
  walk_init(&w, 1, uc);
  frame_regs_from_ucontext(&w.regs, uc);
  return walk_run(&w, pcs, max, 0, truncated);
}
