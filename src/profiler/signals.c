/* Signals the profiler owns: the fatal ones (dump before dying), the -S dump
 * signal, and whatever a sampler module claims.
 *
 * The kernel action of an owned signal is always our dispatcher. What the
 * application installs with sigaction()/signal() goes into a shadow table
 * and is what it reads back, so it sees exactly the behaviour it asked for:
 * after the owner's callback, the dispatcher runs the application's handler
 * (with its mask and flags, which we copy into the kernel action), or applies
 * the default action by resetting to SIG_DFL and re-raising, so death by a
 * signal still is death by that signal, with its core dump.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "signal_mask.h"
#include "walk.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct owned_signal {
  igprof_signal_fn fn;
  int owned, unblock;
  int defer;           /* held back while the thread is BUSY (igprof_signal_defer_while_busy) */
  struct sigaction app;
};

static struct owned_signal owned[NSIG];
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);

static int call_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
  if (real_sigaction) return real_sigaction(sig, act, old);
  return sigaction(sig, act, old);
}

static int is_app_handler(const struct sigaction *a)
{
  return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

static int default_is_ignore(int sig)
{
  return sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
}

static int is_fault(int sig)
{
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP;
}

/* A fault the kernel raised at the instruction that caused it: returning
 * from the handler runs that instruction again, so it cannot wait. */
static int is_kernel_fault(int sig, const siginfo_t *si)
{
  return is_fault(sig) && si && si->si_code > 0;
}

/* ---------------------------------------------------------------- */
/* Signals held back while the thread is BUSY                        */
/* ---------------------------------------------------------------- */

static void defer(int sig, const siginfo_t *si)
{
  struct igprof_deferred *d = &igprof_tls.deferred;
  uint64_t bit = 1ull << (sig - 1);
  if (d->pending & bit) return; /* already held: one pending instance, as the kernel keeps */
  for (int k = 0; k < IGPROF_DEFERRED_SLOTS; ++k)
    if (!d->sig[k]) {
      d->sig[k] = sig;
      d->info[k] = *si;
      break;
    }
  atomic_signal_fence(memory_order_seq_cst);
  d->pending |= bit;
}

/* Queue each held-back signal to this thread again, with its siginfo when a
 * slot kept it; the kernel delivers it as this system call returns (or when
 * the application's mask next allows it), and the dispatcher then finds the
 * thread no longer BUSY. Runs with the guard at THROUGH, so a dump it
 * triggers can run even from a caller that still holds the guard. */
void igprof_signals_redeliver(void)
{
  struct igprof_deferred *d = &igprof_tls.deferred;
  int saved_errno = errno, saved_guard = igprof_tls.guard;
  pid_t pid = (pid_t) syscall(SYS_getpid), tid = (pid_t) syscall(SYS_gettid);
  igprof_tls.guard = IGPROF_GUARD_THROUGH;
  while (d->pending) {
    int sig = __builtin_ctzll(d->pending) + 1;
    siginfo_t info;
    int with_info = 0;
    for (int k = 0; k < IGPROF_DEFERRED_SLOTS; ++k)
      if (d->sig[k] == sig) {
        info = d->info[k];
        d->sig[k] = 0;
        with_info = 1;
      }
    d->pending &= ~(1ull << (sig - 1));
    atomic_signal_fence(memory_order_seq_cst);
    if (!with_info || syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &info) != 0)
      syscall(SYS_tgkill, pid, tid, sig);
  }
  igprof_tls.guard = saved_guard;
  errno = saved_errno;
}

void igprof_signal_defer_while_busy(int sig)
{
  if (sig > 0 && sig < NSIG) owned[sig].defer = 1;
}

/* A forked child starts with no pending signal of its parent's. */
void igprof_signals_fork_child(void)
{
  memset(&igprof_tls.deferred, 0, sizeof igprof_tls.deferred);
}

static void dispatcher(int sig, siginfo_t *si, void *uc)
{
  int saved = errno;
  struct owned_signal *o = &owned[sig];
  /* libunwind reads the stack without checking: a fault inside a walk
   * ends that walk (walk.c), and only the walk. */
  if (IGPROF_UNLIKELY(igprof_tls.unwind_escape != NULL) && (sig == SIGSEGV || sig == SIGBUS) &&
      is_kernel_fault(sig, si))
    igprof_walk_escape(uc);
  if (IGPROF_UNLIKELY(igprof_tls.guard == IGPROF_GUARD_BUSY) && o->defer && !is_kernel_fault(sig, si)) {
    defer(sig, si);
    errno = saved;
    return;
  }
  enum igprof_signal_result r = o->fn ? o->fn(sig, si, uc, &o->app) : IGPROF_SIGNAL_CHAIN;
  if (r == IGPROF_SIGNAL_CHAIN) igprof_signal_chain(sig, si, uc);
  errno = saved;
}

/* What the kernel gets for owned signal `sig` when the application asks
 * for `app`. A signal the application ignores and that we only watch (to
 * dump before it kills) is really ignored: a handler, even one that does
 * nothing, would make poll, nanosleep or epoll_wait return EINTR where the
 * program never sees the signal at all. Faults stay with the dispatcher
 * (the kernel kills on an ignored fault anyway, and we dump first). */
static struct sigaction kernel_action(int sig, const struct sigaction *app)
{
  struct sigaction k;
  memset(&k, 0, sizeof k);
  if (app->sa_handler == SIG_IGN && !owned[sig].unblock && !is_fault(sig)) {
    k.sa_handler = SIG_IGN;
    return k;
  }
  k.sa_sigaction = dispatcher;
  k.sa_mask = app->sa_mask;
  /* A program handler runs on the stack its SA_ONSTACK chooses; without one,
   * the dispatcher runs on the signal stack (altstack.c), where a dump still
   * fits when the thread overflowed its own stack. */
  if (is_app_handler(app)) k.sa_flags = SA_SIGINFO | (app->sa_flags & (SA_ONSTACK | SA_NODEFER | SA_RESTART));
  else k.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART; /* our own use must not cause EINTR */
  return k;
}

void igprof_signal_chain(int sig, siginfo_t *si, void *uc)
{
  struct sigaction *a = &owned[sig].app;
  if (is_app_handler(a)) {
    struct sigaction run = *a;
    if (a->sa_flags & SA_RESETHAND) {
      memset(&a->sa_mask, 0, sizeof a->sa_mask);
      a->sa_handler = SIG_DFL;
      a->sa_flags = 0;
    }
    /* The handler is the application's code: outside the profiler, unless
     * it interrupted the profiler's own work (then its allocations must
     * not re-enter it). A handler that leaves by siglongjmp leaves the
     * thread in that state. */
    int guard = igprof_tls.guard;
    if (guard == IGPROF_GUARD_THROUGH) igprof_tls.guard = IGPROF_GUARD_OFF;
    if (run.sa_flags & SA_SIGINFO) run.sa_sigaction(sig, si, uc);
    else run.sa_handler(sig);
    igprof_tls.guard = guard;
    return;
  }
  /* A fault the kernel raised cannot be ignored: it kills like SIG_DFL. */
  int kernel_fault = is_kernel_fault(sig, si);
  if (a->sa_handler == SIG_IGN && !kernel_fault) return;
  if (default_is_ignore(sig)) return;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  call_sigaction(sig, &dfl, NULL);
  /* Pending until this handler returns, then the default action runs with
   * the very same signal. */
  syscall(SYS_tgkill, (pid_t) syscall(SYS_getpid), (pid_t) syscall(SYS_gettid), sig);
}

int igprof_signal_own(int sig, igprof_signal_fn fn, int unblock)
{
  if (sig <= 0 || sig >= NSIG) { errno = EINVAL; return -1; }
  struct owned_signal *o = &owned[sig];
  if (!o->owned && call_sigaction(sig, NULL, &o->app) != 0) return -1;
  o->fn = fn;
  o->unblock = unblock;
  struct sigaction k = kernel_action(sig, &o->app);
  if (call_sigaction(sig, &k, NULL) != 0) return -1;
  o->owned = 1;
  if (unblock) igprof_signal_mask_keep(sig);
  return 0;
}

/* Before exec: the new image must find the dispositions the application
 * set (ignored stays ignored), not our dispatcher. */
void igprof_signals_before_exec(void)
{
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!owned[sig].owned) continue;
    struct sigaction a = owned[sig].app;
    /* exec resets caught signals to SIG_DFL itself; until it does, a
     * sampler signal still queued for another thread must meet our
     * dispatcher, not a default action that kills. Only SIG_IGN must be
     * set by hand, since exec keeps it. */
    if (a.sa_handler != SIG_IGN) continue;
    call_sigaction(sig, &a, NULL);
  }
}

void igprof_signals_exec_failed(void)
{
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!owned[sig].owned) continue;
    struct sigaction k = kernel_action(sig, &owned[sig].app);
    call_sigaction(sig, &k, NULL);
  }
}

/* ---------------------------------------------------------------- */
/* Hooks                                                             */
/* ---------------------------------------------------------------- */

static int hook_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
  /* Answered from the shadow table even after the final dump: the
   * dispatcher stays installed, and the application's view must not change. */
  if (sig <= 0 || sig >= NSIG || !owned[sig].owned) return real_sigaction(sig, act, old);
  struct owned_signal *o = &owned[sig];
  struct sigaction prev = o->app;
  if (act) {
    igprof_signal_mask_action(sig, act);
    struct sigaction k = kernel_action(sig, act);
    if (real_sigaction(sig, &k, NULL) != 0) return -1;
    o->app = *act;
  }
  if (old) *old = prev;
  return 0;
}

int igprof_signals_start(void)
{
  real_sigaction = igprof_hook("core", "sigaction", (void *) hook_sigaction, 1);
  igprof_signal_mask_start(); /* sigprocmask, pthread_sigmask: signal_mask.c */
  return real_sigaction ? 0 : -1;
}
