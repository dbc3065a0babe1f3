/* The frames recipes cannot step, and whole walks of threads whose stack
 * is unknown, by libunwind (walk_fast_internal.h), guarded against its
 * faults.
 */
#define _GNU_SOURCE
#include "walk_fast_internal.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>

/* unw_step with a fault escape (walk_fast.h, igprof_unwind_escape_slot): a
 * fault inside it answers like a step that found no caller (-UNW_EINVAL).
 * The slot's previous value is put back, so a guarded walk may run inside
 * another one's (a hook walk from a signal handler). */
int guarded_step(unw_cursor_t *c)
{
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

/* Whether the frame a walk reaches from `ip` was interrupted, not called:
 * `ip` is a signal trampoline, by our own reading of its CIE or, when no
 * recipe could be derived, by its code. (libunwind only knows a frame is a
 * signal frame once it has stepped into it.) */
static int trampoline_at(struct frame_recipe rc, int known, uintptr_t ip)
{
  return known == KNOWN_REFUSED ? sigreturn_at(ip) : (rc.flags & FRAME_SIGNAL) != 0;
}

/* The same for a frame found by libunwind at `ip`, itself interrupted if
 * `exact`. */
static int trampoline_found(uintptr_t ip, int exact)
{
  int known;
  struct frame_recipe rc = recipe_for(exact ? ip : ip - 1, &known);
  return trampoline_at(rc, known, ip);
}

#ifdef FRAME_UNWINDER_SIGNAL_STEP
/* A signal trampoline stepped as the walker reads it, not by libunwind
 * (frame.h: libunwind 1.6 reads i386's interrupted frame with the row of
 * the instruction before its PC, and ARM's sigreturn frame from the wrong
 * place). */
static int signal_step(unw_cursor_t *c, ucontext_t *uc, uintptr_t ip)
{
  thread_stats.kernel_calls++;
  return frame_unwinder_signal_step(c, uc, ip);
}
#endif

/* Move a libunwind cursor that starts at a full register context to the
 * walk's current frame (same pc and stack pointer). libunwind restores every
 * callee-saved register on the way, which a frame whose CFA is kept in, say,
 * %rbx (the loader's lazy-binding trampoline) needs, and a signal
 * trampoline gives back all the interrupted frame's registers. The cursor
 * starts at an interrupted PC if `exact`; `uc` is the context it reads,
 * which a signal trampoline's step replaces. */
static int seek_frame(unw_cursor_t *c, ucontext_t *uc, int exact, const struct frame_regs *target,
                      int limit)
{
  (void)uc, (void)exact;
  for (int i = 0; i <= limit; i++) {
    unw_word_t ip, sp;
    if (unw_get_reg(c, UNW_REG_IP, &ip) < 0 || unw_get_reg(c, UNW_REG_SP, &sp) < 0)
      return 0;
    if (sp == target->sp && ip == target->pc)
      return 1;
#ifdef FRAME_UNWINDER_SIGNAL_STEP
    /* As in unwinder_walk, a signal trampoline is stepped by signal_step: a
     * frame past it whose CFA is in a register the fast walker does not
     * track (%ecx in libgcc's _Unwind_Resume as it switches to a landing
     * pad) is stepped from this cursor. */
    ip = frame_code_address(ip);
    exact = trampoline_found(ip, exact);
    if (exact) {
      if (!signal_step(c, uc, ip))
        return 0;
      continue;
    }
#endif
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
enum step unwinder_step(struct walk *w, struct frame_recipe rc, int known)
{
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
    ready = started && seek_frame(&cursor, &uc, w->uc != NULL, &w->regs, w->frame + HOOK_SKIP_LIMIT);
  }
  if (!ready) {
    memset(&uc, 0, sizeof uc);
    frame_regs_to_ucontext(&uc, &w->regs);
    if (unw_init_local2(&cursor, UNW_CONTEXT(&uc), w->exact ? UNW_INIT_SIGNAL_FRAME : 0) < 0)
      return STEP_CUT;
  }
  int interrupted = trampoline_at(rc, known, w->regs.pc);
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

/* Whole walk by libunwind, for a thread whose stack bounds are unknown. */
int unwinder_walk(struct walk *w, const struct module_snapshot *s, uintptr_t *pcs,
                         int max, uintptr_t skip_until, int *truncated)
{
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
    exact = s ? trampoline_found(ip, exact) : 0;
#ifdef FRAME_UNWINDER_SIGNAL_STEP
    if (exact) {
      if (!signal_step(&cursor, &uc, ip))
        break;
      continue;
    }
#endif
    if (guarded_step(&cursor) <= 0)
      break;
  }
  return n;
}
