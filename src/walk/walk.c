/* Stack capture (walk.h): the fast walker (walk_fast.c), or libunwind
 * (--unwind libunwind) and the fast walker's fallback for the frames its
 * recipes cannot describe.
 */
#define UNW_LOCAL_ONLY
#include "walk.h"

#include <libunwind.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../arch/frame.h"
#include "internal.h"
#include "walk_fast.h"

/* Frames of the profiler itself between the walker and the hooked call:
 * the walk asks libunwind for this many more than the depth. */
#define PROFILER_FRAMES 32

static enum walk_method method = WALK_LIBUNWIND;

void igprof_walk_set_method(enum walk_method m) { method = m; }

int igprof_walk_slack(void) { return PROFILER_FRAMES; }

/* libunwind reads memory without checking it (its local unwinder
 * dereferences the saved-register locations it computes, and on ARM32 an
 * interrupted prologue gives it a wrong stack to read): a fault inside a
 * walk jumps back to the walk's start (signals.c calls igprof_walk_escape),
 * with the signal mask of the interrupted walk put back by hand, so the
 * normal path saves no mask (no system call). */
void igprof_walk_escape(void *ucv)
{
  ucontext_t *uc = ucv;
  sigjmp_buf *escape = igprof_tls.unwind_escape;
  igprof_tls.unwind_escape = NULL;
  igprof_tls.unwind_faults++;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &uc->uc_sigmask, NULL, _NSIG / 8);
  siglongjmp(*escape, 1);
}

/* The fast walker's own libunwind steps take the same escape
 * (walk_fast.h). */
void **igprof_unwind_escape_slot(void)
{
  return &igprof_tls.unwind_escape;
}

/* unw_backtrace fills raw return addresses, innermost (inside libunwind)
 * first. Everything up to and including the profiler's own frames is
 * dropped by looking for the caller's return address itself: no fixed skip
 * count, whatever the compiler inlined. */
static int libunwind_from_hook(uintptr_t *pcs, int max, void *caller_ret, int *truncated)
{
  void **raw = (void **) pcs; /* the caller gives max + PROFILER_FRAMES slots */
  sigjmp_buf escape;
  volatile int n = 0;
  if (sigsetjmp(escape, 0) == 0) {
    igprof_tls.unwind_escape = &escape;
    n = unw_backtrace(raw, max + PROFILER_FRAMES);
  }
  igprof_tls.unwind_escape = NULL;
  /* Return addresses, or (AArch64's libunwind) return addresses less one:
   * which, the caller's frame tells. (On ARM32 both may carry the Thumb
   * bit, which is not the address's.) */
  uintptr_t ret = frame_code_address((uintptr_t) caller_ret);
  int k = 0;
  while (k < n && frame_code_address((uintptr_t) raw[k]) != ret && frame_code_address((uintptr_t) raw[k]) + 1 != ret)
    ++k;
  uintptr_t less = k < n && frame_code_address((uintptr_t) raw[k]) == ret ? 1 : 0;
  if (k == n) {
    /* The caller's frame was not found (no unwind info on the way): keep
     * the one frame we know for certain. */
    igprof_tls.walk_failures++;
    pcs[0] = ret - 1;
    if (truncated) *truncated = 0;
    return 1;
  }
  int out = n - k;
  if (truncated) *truncated = out > max || n == max + PROFILER_FRAMES ? WALK_TRUNCATED : WALK_COMPLETE;
  if (out > max) out = max;
  for (int i = 0; i < out; ++i) pcs[i] = frame_code_address((uintptr_t) raw[k + i]) - less;
  return out;
}

static int libunwind_from_signal(uintptr_t *pcs, int max, const ucontext_t *uc, int *truncated)
{
  unw_cursor_t cursor;
  unw_word_t ip;
  volatile int n = 0;
  if (truncated) *truncated = 0;
  if (unw_init_local2(&cursor, UNW_CONTEXT(uc), UNW_INIT_SIGNAL_FRAME) < 0) return 0;
  if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0) return 0;
  pcs[n++] = frame_code_address((uintptr_t) ip);
  volatile int stepped = 0;
  sigjmp_buf escape;
  if (sigsetjmp(escape, 0) == 0) {
    igprof_tls.unwind_escape = &escape;
    while ((stepped = unw_step(&cursor)) > 0) {
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
      if (n == max) {
        if (truncated) *truncated = WALK_TRUNCATED;
        break;
      }
      pcs[n++] = frame_code_address((uintptr_t) ip) - 1;
    }
  } else {
    stepped = -1; /* a fault: the stack goes on beyond the last frame */
  }
  igprof_tls.unwind_escape = NULL;
  if (stepped < 0 && truncated) *truncated = WALK_STOPPED;
  return n;
}

int igprof_walk_from_hook(uintptr_t *pcs, int max, void *caller_ret, int *truncated)
{
  if (method == WALK_FAST) return igprof_walk_fast_from_hook(pcs, max, caller_ret, truncated);
  return libunwind_from_hook(pcs, max, caller_ret, truncated);
}

int igprof_walk_from_hook_frame(uintptr_t *pcs, int max, void *caller_ret, const void *frame,
                                int *truncated)
{
  if (method == WALK_FAST)
    return igprof_walk_fast_from_hook_frame(pcs, max, caller_ret, frame, truncated);
  return igprof_walk_from_hook(pcs, max, caller_ret, truncated);
}

void igprof_walk_debug_stats(void)
{
  if (!igprof_config.debug || method != WALK_FAST) return;
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  igprof_debug("fast walker, this thread: %llu walks, %llu frames stepped, "
               "%llu by libunwind, %llu walks stopped; %llu recipes derived, "
               "%llu addresses without unwind data stepped by frame pointer, %llu frames stepped by their prologue; "
               "%llu system calls",
               (unsigned long long) st.walks, (unsigned long long) st.frames_fast,
               (unsigned long long) st.frames_unwinder, (unsigned long long) st.walks_cut,
               (unsigned long long) st.derivations, (unsigned long long) st.guesses,
               (unsigned long long) st.frames_prologue, (unsigned long long) st.kernel_calls);
}

int igprof_walk_from_signal(uintptr_t *pcs, int max, const ucontext_t *uc, int *truncated)
{
  if (method == WALK_FAST) return igprof_walk_fast_from_signal(pcs, max, uc, truncated);
  return libunwind_from_signal(pcs, max, uc, truncated);
}

void igprof_walk_init(void)
{
  if (!igprof_unwind_available())
    igprof_warn("%s: stacks stop where the fast walker's recipes stop", igprof_unwind_unavailable_reason());
  /* No libunwind cache. Debian's libunwind is built without its per-thread
   * cache: asking for it gives the global one, whose lock is held across a
   * step that may call dl_iterate_phdr. A walk on one thread holding that
   * lock and waiting for the loader's lock, against a thread inside dlopen
   * whose malloc walks and waits for libunwind's lock, would hang the
   * program. Without a cache there is no lock (and no sigprocmask pair per
   * step); libunwind only steps the few frames the fast walker's recipes
   * cannot, so re-reading their unwind entries costs little. */
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE);
  igprof_walk_fast_init();
  /* IGPROF_WALK_PROLOGUES=0: frames without unwind entries end the walk
   * (ARM32), as libunwind's do: for comparing the two walkers
   * (walk.igprof_methods_agree). */
  const char *prologues = igprof_getenv("IGPROF_WALK_PROLOGUES");
  if (prologues) igprof_walk_fast_set_prologues(strcmp(prologues, "0") != 0);
}

void igprof_walk_thread_init(void)
{
  igprof_walk_fast_thread_init();
}

void igprof_walk_modules_changing(void)
{
  igprof_walk_fast_modules_changing();
}

void igprof_walk_modules_closed(void)
{
  unw_flush_cache(unw_local_addr_space, 0, 0);
  igprof_walk_fast_modules_closed();
}

void igprof_walk_modules_changed(void)
{
  unw_flush_cache(unw_local_addr_space, 0, 0);
  igprof_walk_fast_modules_changed();
}
