/* igprof_walk_fast_modules (walk_fast.h): each module of the current table
 * with its whole .eh_frame compiled (eh_frame_compile), for statistics and
 * tests. Not part of libigprof.so: the walker derives one address's recipe
 * at a time; this and eh_frame_table.c are the igprof_walk_tables library
 * the walker's tests link.
 */
#define _GNU_SOURCE
#include "walk_fast_internal.h"

/* Compile `r` from its load at `bias`, unless done already. The caller
 * holds rebuild_lock (so there is one compiler at a time) and the loader
 * lock (so the module stays mapped at `bias`). For statistics only. */
static void compile_record(struct table_record *r, uintptr_t bias)
{
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
static void compile_snapshot(void)
{
  struct module_snapshot *s = atomic_load_explicit(&current_snapshot, memory_order_relaxed);
  for (int i = 0; s && i < s->count; i++)
    compile_record(s->modules[i].record, s->modules[i].bias);
}

/* dl_iterate_phdr callback: runs compile_snapshot with the loader lock held. */
static int compile_current(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)info, (void)size, (void)arg;
  compile_snapshot();
  return 1; /* once is enough */
}

/* Compile every module of the current table now, with the loader lock held
 * so none is unloaded meanwhile. */
static void compile_all(void)
{
  pthread_mutex_lock(&rebuild_lock);
  in_rebuild = 1;
  atomic_signal_fence(memory_order_seq_cst);
  dl_iterate_phdr(compile_current, NULL);
  atomic_signal_fence(memory_order_seq_cst);
  in_rebuild = 0;
  pthread_mutex_unlock(&rebuild_lock);
}

int igprof_walk_fast_modules(void (*fn)(const struct walk_fast_module_info *, void *),
                             void *arg)
{
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
