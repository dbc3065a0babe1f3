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
 *  - the per-thread PC cache: a small table in front of the shared one,
 *    holding each recipe in the form the walk loop uses;
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

/* ---- per-thread PC cache ------------------------------------------------ */

/* The per-thread PC cache: a small direct-mapped table in front of the
 * shared one, indexed by the return address's low bits (no hash, no atomic,
 * no lock prefix). Its values are ready to use: no bit field is unpacked on
 * the chain of dependent loads. It belongs to the walk that holds it
 * (tc_busy), so a signal handler interrupting a walk never sees half an
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
/* TC_END: the frame is its stack's outermost (its recipe says the return
 * address is undefined): the walk ends there. Its CFA offset is 0 and its
 * base SP, so the loop's first bounds test fails, and only that branch
 * looks at the flag: nothing is added to the loop. ARM32 has none (0: the
 * outermost recipe is left to the general step, which reads the frame's
 * prologue). */
#ifdef FRAME_EHABI_TABLES
#define TC_END ((uint64_t)0)
#else
#define TC_END ((uint64_t)1 << 39)
#endif
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
  } else if (form == RC_FORM_OTHER && (bits & 0xf) == FRAME_OUTERMOST) {
    return TC_END;
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
  if (recipe_form(bits) == RC_FORM_OTHER && (bits & 0xf) == FRAME_OUTERMOST)
    return TC_END;
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

struct thread_cache {
  const void *snapshot; /* the module table tc came from */
  /* Entry i is tc[TC_STRIDE * i] (the return address, not minus 1; 0:
   * empty) and the word after it (tc_value() of its recipe): a lookup
   * touches one cache line, and with the index taken as pc & TC_INDEX_MASK
   * (already multiplied by the stride) the address is one scaled-index load
   * away from pc. */
  uint64_t tc[TC_STRIDE * TC_SIZE];
};

static IE_TLS struct thread_cache *thread_cache;
static IE_TLS int tc_busy; /* a walk on this thread is using the thread cache */
static pthread_key_t tc_key;
static pthread_once_t tc_key_once = PTHREAD_ONCE_INIT;

static void tc_release(void *tc)
{
  thread_cache = NULL;
  atomic_signal_fence(memory_order_seq_cst); /* no signal walk sees it from here */
  igprof_pages_free(tc, sizeof(struct thread_cache));
}

static void tc_key_create(void) { pthread_key_create(&tc_key, tc_release); }

static void tc_thread_init(void)
{
  if (thread_cache)
    return;
  pthread_once(&tc_key_once, tc_key_create);
  void *m = igprof_pages_alloc(sizeof(struct thread_cache));
  if (!m)
    return; /* walks work without it, only slower */
  thread_cache = m;
  pthread_setspecific(tc_key, m);
}

void igprof_walk_fast_thread_init(void)
{
  tc_thread_init();
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

/* The registers of a frame reached by recipes: its caller's
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
    result = STEP_OK;
    break;
  case FRAME_STEP_END:
#ifdef FRAME_EHABI_TABLES
    /* A frame no EHABI entry describes: its prologue may. */
    if (rc.kind == FRAME_OUTERMOST && prologue_step(w, lookup_pc) > 0) {
      result = STEP_OK;
      break;
    }
#endif
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

/* GCC's straight-line vectoriser once packed the walk loop's pc and sp into
 * one vector register to store them with one instruction, and then carried
 * them from frame to frame in it: two register-file crossings on the chain
 * of dependent loads, which made each frame about twice as slow
 * (bench/walk). Plain scalar code is what the loop wants. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

/* A thread-cache miss: the value of pc's recipe from the shared cache,
 * stored in the thread's cache (if the walk holds it); 0 if the shared
 * cache has none, or none the loop can use. Out of line, so that the loop
 * keeps nothing for it in its registers. */
__attribute__((noinline)) static uint64_t tc_fill(uint64_t *tc, uintptr_t pc)
{
  uint32_t bits;
  uint64_t v;
  if (!cache_get(pc_cache, pc - 1, &bits) || (v = tc_value(bits)) == 0)
    return 0;
  if (tc) {
    uintptr_t ti = pc & TC_INDEX_MASK;
    tc[ti] = pc;
    tc[ti + 1] = v;
  }
  return v;
}

/* The hot loop: step and record caller after caller while each return
 * address has a cached, compressed SP/FP recipe, with the registers in
 * locals. Stops at the first frame that needs step_slow (leaving the walk
 * on that frame, already recorded), at the end of the stack, or when `max`
 * frames are recorded and another one exists. Precondition: !w->exact.
 *
 * Per frame the hot path is: the thread cache's key and value (indexed by
 * the return address's low bits), the CFA, two stack loads and the output
 * store; everything the rare cases need (the shared cache) stays out of
 * the loop's registers. */
static inline __attribute__((always_inline)) enum run_end fast_run(struct walk *w, uintptr_t *pcs,
                                                                  int *n_io, int max)
{
  uintptr_t pc = w->regs.pc, sp = w->regs.sp, fp = w->regs.fp;
#ifdef FRAME_EHABI_TABLES
  uintptr_t r11 = w->regs.r11;
#endif
  const uintptr_t top = w->stack.hi - sizeof(uintptr_t);
  uintptr_t *out = pcs + *n_io, *start = out, *const out_end = pcs + max;
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
    uintptr_t ti = pc & tc_mask;
    uint64_t v = tc_val[ti];
    if (__builtin_expect(tc_key[ti] != pc, 0) && (v = tc_fill(w->tc, pc)) == 0) {
      end = RUN_SLOW;
      break;
    }
    /* A branch, not a conditional move: the kind of frame is predictable
     * and a branch keeps the test off the chain of dependent loads. */
    uintptr_t base = sp;
    if (v & TC_FP_BASE) {
      base = fp;
      __asm__("" : "+r"(base)); /* keeps it a branch */
    }
    uintptr_t cfa = base + (uint32_t)v;
    uintptr_t next_fp = fp;
#if FRAME_LINK_REGISTER
    uintptr_t ra_at = base + (uintptr_t)(v >> TC_RA_SHIFT);
    if (cfa <= sp || ra_at < sp || ra_at > top) {
      end = (v & TC_END) ? RUN_END : RUN_SLOW; /* an end, or step_slow decides */
      break;
    }
    if (v & TC_FP_SAVED) {
      uintptr_t fp_at = ra_at - TC_FP_GAP(v);
      if (fp_at < sp) { /* step_slow decides */
        end = RUN_SLOW;
        break;
      }
      next_fp = *(const uintptr_t *)fp_at;
    }
#else
    /* The return address's slot lies between sp (so at or above lo, and
     * the CFA above sp) and top; a CFA less than a word above sp goes to
     * step_slow, which takes the same step where it is one. */
    uintptr_t ra_at = cfa - sizeof(uintptr_t);
    if (ra_at < sp || ra_at > top) {
      end = (v & TC_END) ? RUN_END : RUN_SLOW; /* an end, or step_slow decides */
      break;
    }
    if (v >> TC_FP_SHIFT) {
      /* A whole number of words, at least one, below the CFA: at or below
       * the return address's slot. */
      uintptr_t fp_at = cfa - (uintptr_t)(v >> TC_FP_SHIFT);
      if (fp_at < sp) { /* step_slow decides */
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

/* Take this thread's cache for the walk, unless a walk interrupted by
 * this signal handler holds it. */
static void tc_begin(struct walk *w, const struct module_snapshot *s)
{
  struct thread_cache *tm = thread_cache;
  w->tc = NULL;
  if (!tm || tc_busy)
    return;
  tc_busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (tm->snapshot != s) {
    if (tm->snapshot) /* a fresh cache is zero: its pages stay untouched until used */
      memset(tm->tc, 0, sizeof tm->tc);
    tm->snapshot = s;
  }
  w->tc = tm->tc;
}

static void tc_end(struct walk *w)
{
  if (!w->tc)
    return;
  atomic_signal_fence(memory_order_seq_cst);
  tc_busy = 0;
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
  tc_begin(w, s);
  pcs[n++] = w->exact ? w->regs.pc : w->regs.pc - 1;
  for (;;) {
    if (!w->exact) {
      enum run_end end = fast_run(w, pcs, &n, max);
      if (end == RUN_END)
        break;
      if (end == RUN_FULL) {
        if (truncated)
          *truncated = WALK_TRUNCATED;
        break;
      }
    }
    enum step r = step_slow(w);
    if (r != STEP_OK) {
      if (r == STEP_CUT) {
        thread_stats.walks_cut++;
        if (truncated)
          *truncated = WALK_STOPPED;
      }
      break;
    }
    if (n == max) {
      if (truncated)
        *truncated = WALK_TRUNCATED;
      break;
    }
    pcs[n++] = w->exact ? w->regs.pc : w->regs.pc - 1;
  }
  tc_end(w);
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
  w->tc = NULL;
}

/* A hook walk from the registers of the hook's caller, stepping on to
 * caller_ret if `caller` is not there yet. */
static int walk_from_caller(const struct frame_regs *caller, uintptr_t *pcs, int max,
                            void *caller_ret, int *truncated)
{
  struct walk w;
  walk_init(&w, 0, NULL);
  w.regs = *caller;
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
