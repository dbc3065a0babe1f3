/* The program's signal mask, and the signals the profiler keeps deliverable.
 *
 * A signal the profiler must receive whatever the program does (the -S dump
 * signal, a sampler's) is kept: the program's sigprocmask/pthread_sigmask
 * calls cannot block it.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "signal_mask.h"

static int (*real_sigprocmask)(int, const sigset_t *, sigset_t *);
static int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
static sigset_t kept;
static int any_kept;

void igprof_signal_mask_keep(int sig)
{
  sigaddset(&kept, sig);
  any_kept = 1;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  if (real_pthread_sigmask) real_pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  else pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

void igprof_signal_mask_action(int sig, const struct sigaction *act)
{
  (void) sig;
  (void) act;
}

static const sigset_t *filter_mask(int how, const sigset_t *set, sigset_t *copy)
{
  if (!any_kept || !set || how == SIG_UNBLOCK || !atomic_load(&igprof_state.active)) return set;
  *copy = *set;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sigismember(&kept, sig)) sigdelset(copy, sig);
  return copy;
}

static int hook_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
  sigset_t copy;
  return real_sigprocmask(how, filter_mask(how, set, &copy), old);
}

static int hook_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
  sigset_t copy;
  return real_pthread_sigmask(how, filter_mask(how, set, &copy), old);
}

void igprof_signal_mask_start(void)
{
  /* The mask hooks matter only for a signal the application must not block
   * (-S, a sampler's); each hook costs start-up time in every process. */
  if (any_kept || igprof_config.dump_signal) {
    real_sigprocmask = igprof_hook("core", "sigprocmask", (void *) hook_sigprocmask, 1);
    real_pthread_sigmask = igprof_hook("core", "pthread_sigmask", (void *) hook_pthread_sigmask, 1);
  }
  if (!real_sigprocmask) real_sigprocmask = sigprocmask;
  if (!real_pthread_sigmask) real_pthread_sigmask = pthread_sigmask;
}
