/* The program's signal mask and the signals the profiler keeps deliverable
 * (signal_mask.c), as seen by signals.c, which owns the signals, and by the
 * CPU sampler, whose signal moves when the program claims it.
 */
#ifndef IGPROF_SIGNAL_MASK_H
#define IGPROF_SIGNAL_MASK_H

#include <signal.h>
#include <stdint.h>

/* Keep `sig` deliverable whatever mask the program sets (igprof_signal_own
 * with unblock), and unblock it in the calling thread now. */
void igprof_signal_mask_keep(int sig);

/* The program is setting the action of owned signal `sig` to `act`
 * (hook_sigaction, before the kernel action changes). */
void igprof_signal_mask_action(int sig, const struct sigaction *act);

/* Install the mask hooks if some signal must stay deliverable; from
 * igprof_signals_start. */
void igprof_signal_mask_start(void);

/* ---- For a module whose kept signal can move (the CPU sampler) ------- */

struct igprof_signal_mover {
  /* The program claimed kept signal `sig`: move to another signal
   * (igprof_signal_mask_release(sig) once nothing sends `sig` any more).
   * Called with the guard held, never in a signal handler that interrupted
   * the profiler. */
  void (*claimed)(int sig);
  /* Is this siginfo one of the mover's own signals (a timer sample)? */
  int (*ours)(const siginfo_t *si);
};
void igprof_signal_mask_set_mover(const struct igprof_signal_mover *mover);

/* The program uses `sig` (a handler, blocked on its own, waited for): it is
 * never chosen for the profiler again. */
int igprof_signal_mask_claimed(int sig);

/* `sig` is no longer kept: every thread whose program view blocks it is
 * nudged (a signal `sig` that igprof_signal_mask_is_nudge recognises) to
 * catch up. */
void igprof_signal_mask_release(int sig);
int igprof_signal_mask_is_nudge(const siginfo_t *si);

/* The program uses the signals in `set`: it waits for them, or blocked
 * them before the profiler started. `blanket_claims` 0: a blanket set
 * (igprof_signal_mask_is_blanket) claims nothing. Guard held. */
void igprof_signal_mask_uses(const sigset_t *set, int blanket_claims);

/* A mask that blocks signals in general (all of the common asynchronous
 * ones), not any one signal in particular. */
int igprof_signal_mask_is_blanket(const sigset_t *set);

/* Has the kept set changed since this thread last caught up? */
int igprof_signal_mask_behind(void);
/* Make this thread's kernel mask the program's view minus the kept signals,
 * taking back the mover's own signals left pending on signals no longer
 * kept. `uc`: a signal handler's context, whose mask applies at its return;
 * NULL: now. Guard held. */
void igprof_signal_mask_catch_up(void *uc);

/* Does the program's view of this thread block `sig`, which the kernel does
 * not block (a kept signal)? */
int igprof_signal_mask_hidden(int sig);
/* A program signal `sig` the kernel delivered although the thread's view
 * blocks it: block it at the handler's return and queue it again, so it is
 * pending as the program expects. */
void igprof_signal_mask_hold(int sig, const siginfo_t *si, void *uc);

/* Before exec the new image must inherit the program's view of the mask;
 * if exec fails the kept signals are unblocked again. */
void igprof_signal_mask_before_exec(void);
void igprof_signal_mask_exec_failed(void);

#endif
