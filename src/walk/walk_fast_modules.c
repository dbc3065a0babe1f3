/* The fast walker's module table (walk_fast_internal.h): the loaded
 * modules' code ranges and unwind data, rebuilt outside signal context when
 * libraries come and go and published as an immutable snapshot; and the
 * per-module statistics are walk_fast_tables.c's (tests only).
 */
#define _GNU_SOURCE
#include "walk_fast_internal.h"

#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* ---- bump allocator for records that live forever ------------------------ */

static void *forever_alloc(size_t bytes)
{
  static uint8_t *cur, *end;
  bytes = (bytes + 15) & ~(size_t)15;
  if (!cur || (size_t)(end - cur) < bytes) {
    size_t chunk = bytes > 65536 ? bytes : 65536;
    void *p = igprof_pages_alloc(chunk);
    if (!p)
      return NULL;
    cur = p;
    end = cur + chunk;
  }
  void *p = cur;
  cur += bytes;
  return p;
}

static struct table_record *records; /* guarded by rebuild_lock */

_Atomic(struct module_snapshot *) current_snapshot;
pthread_mutex_t rebuild_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- module table construction (outside signal context) ------------------ */

static struct table_record *find_or_add_record(struct dl_phdr_info *info, const void *hdr,
                                            const struct eh_frame_segment *segs, int nsegs)
{
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

static int grow_modules(struct build_state *b)
{
  int cap = b->capacity ? b->capacity * 2 : 64;
  struct fast_module *m = igprof_pages_alloc((size_t)cap * sizeof *m);
  if (!m)
    return 0;
  if (b->modules) {
    memcpy(m, b->modules, (size_t)b->count * sizeof *m);
    igprof_pages_free(b->modules, (size_t)b->capacity * sizeof *m);
  }
  b->modules = m;
  b->capacity = cap;
  return 1;
}

/* Runs with the loader lock held: the module is mapped as described. */
static int collect_module(struct dl_phdr_info *info, size_t size, void *arg)
{
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

static int module_less(const struct fast_module *a, const struct fast_module *b)
{
  return a->text_start < b->text_start;
}

static void sort_modules(struct fast_module *m, int n)
{
  for (int i = 1; i < n; i++) { /* tens of modules: insertion sort is plenty */
    struct fast_module x = m[i];
    int j = i;
    for (; j > 0 && module_less(&x, &m[j - 1]); j--)
      m[j] = m[j - 1];
    m[j] = x;
  }
}

static int same_modules(const struct module_snapshot *s, const struct build_state *b)
{
  if (!s || s->count != b->count)
    return 0;
  for (int i = 0; i < b->count; i++)
    if (memcmp(&s->modules[i], &b->modules[i], sizeof b->modules[i]) != 0)
      return 0;
  return 1;
}

/* Returns 0 if the module table could not be rebuilt (out of memory). */
static int rebuild(void)
{
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
    igprof_pages_free(b.modules, (size_t)b.capacity * sizeof *b.modules);
  atomic_signal_fence(memory_order_seq_cst);
  in_rebuild = 0;
  pthread_mutex_unlock(&rebuild_lock);
  return ok;
}

void igprof_walk_fast_init(void)
{
  rebuild();
  igprof_walk_fast_thread_init();
}

void igprof_walk_fast_modules_changed(void) { (void)rebuild(); }

void igprof_walk_fast_modules_changing(void)
{
  closes_pending++;
  atomic_fetch_add_explicit(&closes_in_progress, 1, memory_order_seq_cst);
}

void igprof_walk_fast_modules_closed(void)
{
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

