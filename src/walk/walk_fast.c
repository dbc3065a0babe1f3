/* The fast stack walker (see walk_fast.h and docs/stack-walking.md).
 *
 * Four pieces, the last two here:
 *  - the module table (walk_fast_modules.c): an immutable, sorted snapshot of the loaded modules'
 *    code ranges and where their .eh_frame_hdr and readable segments lie,
 *    published through one atomic pointer. Rebuilt outside signal context;
 *    snapshots are never unmapped once published, so a reader holding an
 *    old pointer is always safe;
 *  - the PC cache (walk_fast_cache.h, walk_fast_recipe.c): a direct-mapped table of 64-bit words
 *    each holding a PC and its compressed recipe, read with one atomic load.
 *    On a miss the recipe of that one PC is derived from the module's
 *    .eh_frame (eh_frame_find), in whatever context the walk runs;
 *  - the per-thread memo: the previous walk's frames and the stack slots
 *    they were read from, so a walk can join it where nothing changed;
 *  - the walk loop: recipes step most frames with two loads; a frame they
 *    cannot describe is stepped by libunwind (walk_fast_unwinder.c; ARM32:
 *    walk_fast_ehabi.c first), and the loop continues with recipes
 *    afterwards.
 */
#define _GNU_SOURCE
#include "walk_fast_internal.h"

/* ---- PC cache (walk_fast_cache.h) ---------------------------------------- */

_Atomic uint64_t pc_cache[PC_CACHE_SIZE];
#ifdef FRAME_EHABI_TABLES
_Atomic uint64_t shape_cache[SHAPE_CACHE_SIZE];
#endif

/* ---- per-thread state ---------------------------------------------------- */

IE_TLS uintptr_t stack_lo, stack_hi;
IE_TLS int in_rebuild;
_Atomic unsigned closes_in_progress;
IE_TLS unsigned closes_pending; /* this thread's share of closes_in_progress */
IE_TLS struct walk_fast_stats thread_stats;

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
static inline uint64_t tc_value(uint32_t bits)
{
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

static inline uint64_t tc_value(uint32_t bits)
{
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

static void memo_release(void *memo)
{
  thread_memo = NULL;
  atomic_signal_fence(memory_order_seq_cst); /* no signal walk sees it from here */
  igprof_pages_free(memo, sizeof(struct thread_memo));
}

static void memo_key_create(void) { pthread_key_create(&memo_key, memo_release); }

static void memo_thread_init(void)
{
  if (thread_memo)
    return;
  pthread_once(&memo_key_once, memo_key_create);
  void *m = igprof_pages_alloc(sizeof(struct thread_memo));
  if (!m)
    return; /* walks work without it, only slower */
  thread_memo = m;
  pthread_setspecific(memo_key, m);
}

void igprof_walk_fast_thread_init(void)
{
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

/* ---- the walk ------------------------------------------------------------ */

__attribute__((noinline)) int region_of_alt(uintptr_t sp, int interrupted,
                                                   struct region *out)
{
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

/* The registers of a frame reached by recipes (or a join): its caller's
 * link register is unknown; r11 (ARM32, frame.h) is the caller's to set. */
static inline void regs_set(struct frame_regs *r, uintptr_t pc, uintptr_t sp, uintptr_t fp)
{
  r->pc = pc;
  r->sp = sp;
  r->fp = fp;
#if FRAME_LINK_REGISTER
  r->lr = 0;
#endif
}




/* Step a signal return trampoline by reading the interrupted context from
 * the signal frame (frame_regs_from_signal_frame: AArch64), within the
 * stack's bounds; 0 where that is left to libunwind. The interrupted frame
 * comes with its link register, and its PC is exact. */
static int signal_frame_step(struct walk *w)
{
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


int read_prologues = 1;

void igprof_walk_fast_set_prologues(int on) { read_prologues = on; }


/* The general step: any recipe, libunwind for what recipes cannot do. */
__attribute__((noinline)) static enum step step_slow(struct walk *w)
{
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
                                                           uint64_t *fast_frames)
{
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
                                                       uintptr_t lo, uintptr_t span)
{
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
                                  uintptr_t span)
{
  if (__builtin_expect(f[k].ra_at == MEMO_RESTEP, 0))
    return memo_restep_holds(f, k, lo, span);
  const uintptr_t *fp_slot = f[k].fp_at ? (const uintptr_t *)f[k].fp_at : &f[k + 1].fp;
  return frame_code_address(*(const uintptr_t *)f[k].ra_at) == f[k + 1].pc &&
         *fp_slot == f[k + 1].fp;
}

/* Whether the outermost frame of a record, which read a null return
 * address from `ra_at` (0: it had none to read), would end there again. */
static inline int memo_end_holds(uintptr_t ra_at, uintptr_t lo, uintptr_t span)
{
  return !ra_at || (ra_at - lo <= span && frame_code_address(*(const uintptr_t *)ra_at) == 0);
}

/* From the outside in, down to frame p at the lowest: the lowest frame k
 * of record m from which the slots of frames k .. last still hold what m's
 * walk read from them, frames from `from` on being known to (from =
 * last + 1: none yet); -1 when the outermost frame's own slot does not.
 * A slot s may be read if lo <= s <= lo + span: s - lo <= span, one
 * compare (a null slot fails it too, lo being far above 0). */
static inline int memo_verify(const struct walk_memo *m, int p, int from, uintptr_t lo,
                              uintptr_t span)
{
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
                     int *n_io, int max, uintptr_t lo, uintptr_t top)
{
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
                                                                  int *n_io, int max)
{
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


/* The first slot of the set a start (pc, sp) belongs to. */
static inline unsigned memo_set_of(uintptr_t pc, uintptr_t sp)
{
  uint64_t h = ((uint64_t)pc ^ (uint64_t)sp * 0x9e3779b97f4a7c15ull) * 0xc2b2ae3d27d4eb4full;
  return (unsigned)(h >> 58) % (MEMO_KEYS / MEMO_WAYS) * MEMO_WAYS;
}

/* The slot whose record starts at (pc, sp), or -1. */
static inline int memo_find(const struct thread_memo *tm, uintptr_t pc, uintptr_t sp,
                            unsigned set)
{
  for (unsigned k = set; k < set + MEMO_WAYS; k++)
    if (tm->start[k].pc == pc && tm->start[k].sp == sp)
      return (int)k;
  return -1;
}

static inline int memo_usable(const struct walk_memo *m, const struct module_snapshot *s)
{
  return m && m->snapshot == s && m->complete && m->count > 0;
}

/* Take this thread's memos for the walk, unless a walk interrupted by this
 * signal handler holds them. The walk starts at w->regs. */
static void memo_begin(struct walk *w, const struct module_snapshot *s)
{
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

static void memo_end(struct walk *w, int n, int complete)
{
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
                    int *truncated)
{
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
static inline void walk_init(struct walk *w, int exact, const ucontext_t *uc)
{
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
                              struct repeat_check *checked)
{
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
                            void *caller_ret, int *truncated)
{
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
                            int *truncated)
{
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
                          void *caller_ret, int *truncated)
{
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
igprof_walk_fast_from_hook(uintptr_t *pcs, int max, void *caller_ret, int *truncated)
{
  int n = walk_from_record(__builtin_frame_address(0), pcs, max, caller_ret, truncated);
  /* Not a tail call: that would pop this frame's record before the walk
   * reads it, and the callee's pushes would overwrite it. */
  __asm__ volatile("" : "+r"(n));
  return n;
}
#elif !defined(FRAME_RECORD_CALLER_SP)
__attribute__((noinline)) int igprof_walk_fast_from_hook(uintptr_t *pcs, int max,
                                                         void *caller_ret, int *truncated)
{
  struct frame_regs here;
  FRAME_REGS_HERE(&here);
  int n = walk_from_here(&here, pcs, max, caller_ret, truncated);
  __asm__ volatile("" : "+r"(n)); /* not a tail call: the walk steps through this frame */
  return n;
}
#else
__attribute__((noinline)) int igprof_walk_fast_from_hook(uintptr_t *pcs, int max,
                                                         void *caller_ret, int *truncated)
{
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
                                int *truncated)
{
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
                                     int *truncated)
{
#if FRAME_RECORD_AT_FP && defined(FRAME_RECORD_CALLER_SP)
  const uintptr_t *f = frame;
  if (f && frame_code_address(f[FRAME_RECORD_RA]) == (uintptr_t)caller_ret)
    return walk_from_record(f, pcs, max, caller_ret, truncated);
#else
  (void)frame;
#endif
  return igprof_walk_fast_from_hook(pcs, max, caller_ret, truncated);
}

int igprof_walk_fast_from_signal(uintptr_t *pcs, int max, const ucontext_t *uc, int *truncated)
{
  struct walk w;
  walk_init(&w, 1, uc);
  frame_regs_from_ucontext(&w.regs, uc);
  return walk_run(&w, pcs, max, 0, truncated);
}
