/* The recipe of one address (walk_fast_internal.h): from the PC cache, or
 * derived from its module's unwind data and cached; signal-safe.
 */
#define _GNU_SOURCE
#include "walk_fast_internal.h"

/* ---- recipe lookup (signal-safe) ----------------------------------------- */

const struct fast_module *module_of(const struct module_snapshot *s, uintptr_t pc)
{
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


/* frame_is_sigreturn, counted: it asks the kernel whether pc is mapped. */
int sigreturn_at(uintptr_t pc)
{
  thread_stats.kernel_calls++;
  return frame_is_sigreturn(pc);
}

/* Whether [at, at + len) lies in one of module m's readable segments. */
int module_readable(const struct fast_module *m, uintptr_t at, uintptr_t len)
{
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
static int sigreturn_in_module(const struct fast_module *m, uintptr_t pc)
{
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
int module_ehabi(const struct fast_module *m, struct ehabi_table *t)
{
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

static int lr_guess_in(const struct fast_module *m)
{
#ifdef FRAME_EHABI_TABLES
  return m->record->exidx_count > 0;
#else
  (void)m;
  return LR_GUESS;
#endif
}

__attribute__((noinline)) static struct frame_recipe derive_recipe(const struct module_snapshot *s,
                                                                   const struct fast_module *m,
                                                                   uintptr_t pc)
{
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
struct frame_recipe recipe_for(uintptr_t pc, int *known)
{
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

