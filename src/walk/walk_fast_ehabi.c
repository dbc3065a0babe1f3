/* ARM32 (FRAME_EHABI_TABLES): frames the recipes leave to the EHABI
 * interpreter, and frames without an index entry, stepped by reading their
 * prologue (walk_fast_internal.h).
 */
#define _GNU_SOURCE
#include "walk_fast_internal.h"

#ifdef FRAME_EHABI_TABLES
/* Step a frame the recipes leave to the EHABI interpreter (FRAME_EHABI:
 * it saves r11, or its CFA is r11's, or it pops sp), from its module's
 * table, found again as recipe_for finds it: no close under way, then
 * the current snapshot. What the interpreter does not take is libunwind's;
 * a stack it cannot read ends the walk, as a recipe's step would. */
enum step ehabi_interpret(struct walk *w, uintptr_t pc, struct frame_recipe rc, int known)
{
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
  case FRAME_STEP_END: return STEP_END;
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

#ifdef FRAME_EHABI_TABLES
/* Whether `ra` (as a call leaves it in lr: with the Thumb bit of Thumb
 * callers) lies in a module's code just after a call. */
static int prologue_ra_valid(const struct module_snapshot *s, uintptr_t ra)
{
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
                         struct frame_regs *next)
{
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
                              struct frame_regs *next)
{
  (void)end;
  if (lr_raw & 1)
    return prologue_next(w, s, pr, 1, lr_raw, next);
  return prologue_next(w, s, pr, 1, lr_raw | 1, next) || prologue_next(w, s, pr, 1, lr_raw, next);
}

/* arm_prologue_read over [lo, end), hooked functions read as they were: a
 * hook's jump over a function's first instructions hides the push the
 * reader looks for (-mp patches malloc's). Only a reading asks the hook
 * engine's log, not a cached shape. */
static enum arm_prologue_result read_prologue(uintptr_t lo, uintptr_t end, int thumb, struct arm_prologue *pr)
{
  struct hook_original orig[4];
  struct arm_code_patch patch[4];
  size_t npatch = hook_original_code(lo, end, orig, 4);
  for (size_t i = 0; i < npatch; i++) patch[i] = (struct arm_code_patch){orig[i].at, orig[i].len, orig[i].bytes};
  return arm_prologue_read(lo, end, thumb, patch, npatch, pr);
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
                                               int thumb, struct arm_prologue *pr)
{
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
  enum arm_prologue_result res = read_prologue(lo, end, thumb, pr);
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
int prologue_step(struct walk *w, uintptr_t lookup_pc)
{
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
    enum arm_prologue_result res = lr_raw ? read_prologue(lo, end, modes[i], &pr)
                                          : prologue_shape(s, lo, end, modes[i], &pr);
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
