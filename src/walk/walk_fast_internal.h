/* What the fast walker's files share (walk_fast.c: the walk; _modules.c:
 * the module table; _recipe.c: a PC's recipe; _unwinder.c: libunwind's
 * steps; _ehabi.c: ARM32's EHABI and prologue steps). Private to src/walk.
 */
#ifndef IGPROF_WALK_FAST_INTERNAL_H
#define IGPROF_WALK_FAST_INTERNAL_H

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
#include "../common/page_alloc.h"
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

struct fast_module {
  uintptr_t text_start, text_end, bias;
  struct table_record *record;
};

struct module_snapshot {
  int count;
  struct fast_module modules[];
};

/* The current module table (walk_fast_modules.c), and the lock of its
 * rebuilds. */
extern _Atomic(struct module_snapshot *) current_snapshot;
extern pthread_mutex_t rebuild_lock;

/* ---- PC cache (walk_fast_cache.h) ---------------------------------------- */

extern _Atomic uint64_t pc_cache[PC_CACHE_SIZE];
#ifdef FRAME_EHABI_TABLES
/* ARM32: prologue readings of return addresses (prologue_shape), cleared
 * with pc_cache. */
#define SHAPE_CACHE_SIZE 4096u
extern _Atomic uint64_t shape_cache[SHAPE_CACHE_SIZE];
#endif

/* ---- per-thread state (walk_fast.c) -------------------------------------- */

extern IE_TLS uintptr_t stack_lo, stack_hi;
extern IE_TLS int in_rebuild; /* this thread holds the loader lock in rebuild() */
/* dlclose calls under way (igprof_walk_fast_modules_changing), each until
 * the rebuild after it has published: while any is, the snapshot may name
 * a module that is no longer mapped, so no recipe is derived. */
extern _Atomic unsigned closes_in_progress;
extern IE_TLS unsigned closes_pending; /* this thread's share of closes_in_progress */
extern IE_TLS struct walk_fast_stats thread_stats;
extern int read_prologues; /* igprof_walk_fast_set_prologues */

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
int region_of_alt(uintptr_t sp, int interrupted, struct region *out);

/* The thread's own stack inline (every walk asks), the signal stack apart. */
static inline int region_of(uintptr_t sp, int interrupted, struct region *out)
{
  if (__builtin_expect(sp >= stack_lo && sp < stack_hi, 1)) {
    *out = (struct region){sp - (interrupted ? frame_arch.red_zone : 0), stack_hi};
    return 1;
  }
  return region_of_alt(sp, interrupted, out);
}


struct walk {
  struct frame_regs regs;
  int exact;             /* regs.pc is an interrupted PC, not a return address */
  struct region stack;
  const ucontext_t *uc;  /* full register set of frame 0, if the walk has one */
  int frame;             /* frames stepped so far */
  uint64_t *tc;          /* the thread's PC cache, if this walk holds it */
};

enum step { STEP_OK, STEP_END, STEP_CUT };

/* ---- across the files ---------------------------------------------------- */

/* *known from recipe_for when the recipe was not derived: a dlclose is
 * under way. */
#define KNOWN_REFUSED 2

/* walk_fast_recipe.c */
const struct fast_module *module_of(const struct module_snapshot *s, uintptr_t pc);
int sigreturn_at(uintptr_t pc);
int module_readable(const struct fast_module *m, uintptr_t at, uintptr_t len);
struct frame_recipe recipe_for(uintptr_t pc, int *known);
#ifdef FRAME_EHABI_TABLES
int module_ehabi(const struct fast_module *m, struct ehabi_table *t);
#endif

/* walk_fast_unwinder.c */
int guarded_step(unw_cursor_t *c);
enum step unwinder_step(struct walk *w, struct frame_recipe rc, int known);
int unwinder_walk(struct walk *w, const struct module_snapshot *s, uintptr_t *pcs, int max,
                  uintptr_t skip_until, int *truncated);

#ifdef FRAME_EHABI_TABLES
/* walk_fast_ehabi.c */
enum step ehabi_interpret(struct walk *w, uintptr_t pc, struct frame_recipe rc, int known);
int prologue_step(struct walk *w, uintptr_t lookup_pc);
#endif

#endif
