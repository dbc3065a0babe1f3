/* The program's signal mask, and the signals the profiler keeps deliverable.
 *
 * A signal the profiler must receive whatever the program does (the -S dump
 * signal, the CPU sampler's) is kept: the kernel never blocks it. The
 * program still sees exactly the mask it set: when it blocks a kept signal,
 * the bit is remembered per thread (the thread's "hidden" bits) and shown
 * in every mask it reads back (sigprocmask, pthread_sigmask, sigsetjmp's
 * saved mask), and sigpending never shows a kept signal.
 *
 * Signals the program uses are claimed, and the sampler never takes a
 * claimed signal: a handler or SIG_IGN set for it, a mask that blocks it on
 * its own, a wait for it (sigwaitinfo, sigtimedwait, sigwait, signalfd). A
 * blanket mask (one that also blocks all of the common asynchronous
 * signals, as sigfillset does for a worker thread) says nothing about any
 * one signal and claims nothing. When the program claims the sampler's own
 * signal, the mover (perf.c) moves the sampler to a free signal and
 * releases the old one; every thread whose view blocks the released signal
 * must then block it in the kernel too, and that can only be done by the
 * thread itself: such threads are nudged with the released signal and catch
 * up in its handler (or at their next hook, whichever comes first).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "signal_mask.h"

#include <errno.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define IE_TLS __thread __attribute__((tls_model("initial-exec")))
#define MAX_SIG 64 /* the kernel's signals, 1..64: one bit each (sig - 1) */

static int (*real_sigprocmask)(int, const sigset_t *, sigset_t *);
static int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
static int (*real_sigpending)(sigset_t *);
static int (*real_signalfd)(int, const sigset_t *, int);

static _Atomic uint64_t kept;      /* never blocked in the kernel */
static _Atomic int any_kept;       /* kept was ever non-empty: the view differs from the kernel's */
static _Atomic unsigned kept_gen;  /* changes whenever kept does */
static _Atomic uint64_t claimed;   /* the program's own signals */
static _Atomic int claim_pending;  /* a claim seen where it could not be acted on */
static const struct igprof_signal_mover *mover;
static const int nudge_cookie = 0x6e756467;

/* Threads whose view hides a kept signal: a release nudges them. A slot
 * whose thread is gone is reused. */
#define MAX_HIDERS 512
struct hider {
  _Atomic pid_t tid;
  _Atomic uint64_t hidden;
};
static struct hider hiders[MAX_HIDERS];

struct thread_view {
  int known;
  unsigned gen;          /* the kept_gen this thread's kernel mask follows */
  uint64_t hidden;       /* kept signals the program believes blocked here */
  struct hider *hider;   /* this thread's entry, once it hid something */
  pid_t hider_pid;       /* the process that entry belongs to (fork) */
  int in_handler;        /* catching up from a signal handler: the kernel's
                          * mask now is the handler's, not the thread's */
};
static IE_TLS struct thread_view view;

static uint64_t bit(int sig) { return 1ull << (sig - 1); }

static uint64_t to_bits(const sigset_t *set)
{
  uint64_t b = 0;
  for (int sig = 1; sig <= MAX_SIG; ++sig)
    if (sigismember(set, sig) == 1) b |= bit(sig);
  return b;
}

static void edit_set(sigset_t *set, uint64_t add, uint64_t remove)
{
  for (int sig = 1; sig <= MAX_SIG; ++sig) {
    if (add & bit(sig)) sigaddset(set, sig);
    if (remove & bit(sig)) sigdelset(set, sig);
  }
}

/* Raw calls: the profiler's own changes go past the hooks, and the kernel
 * mask of this thread is all they touch. */
static int raw_sigmask(int how, const sigset_t *set, sigset_t *old)
{
  return (int) syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

static pid_t my_tid(void) { return (pid_t) syscall(SYS_gettid); }

int igprof_signal_mask_is_blanket(const sigset_t *set)
{
  static const int common[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD};
  uint64_t k = atomic_load(&kept);
  for (size_t i = 0; i < sizeof common / sizeof common[0]; ++i)
    if (sigismember(set, common[i]) != 1 && !(k & bit(common[i]))) return 0;
  return 1;
}

/* ---------------------------------------------------------------- */
/* The thread's view                                                 */
/* ---------------------------------------------------------------- */

static struct hider *take_hider(void)
{
  pid_t tid = my_tid();
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < MAX_HIDERS; ++i) {
      struct hider *h = &hiders[i];
      pid_t t = atomic_load(&h->tid);
      /* Second pass: a slot whose thread has exited. */
      if (t && (pass == 0 || syscall(SYS_tgkill, igprof_state.pid, t, 0) == 0 || errno != ESRCH)) continue;
      if (!atomic_compare_exchange_strong(&h->tid, &t, tid)) continue;
      atomic_store(&h->hidden, 0);
      return h;
    }
  return NULL; /* more hiding threads than slots: this one is not nudged */
}

static void set_hidden(uint64_t hidden)
{
  view.hidden = hidden;
  if (!hidden && !view.hider) return;
  if (!view.hider || view.hider_pid != igprof_state.pid) {
    view.hider = take_hider();
    view.hider_pid = igprof_state.pid;
  }
  if (view.hider) atomic_store(&view.hider->hidden, hidden);
}

/* A thread made after start-up inherited its creator's kernel mask, which
 * lacks the kept signals even where its creator's view blocked them. A
 * blanket mask is the one case where that view is known: it blocked them. */
static void view_init(void)
{
  if (view.known) return;
  view.known = 1;
  view.gen = atomic_load(&kept_gen) - 1; /* catch up at the first chance */
  view.hider = NULL;
  view.hidden = 0;
  if (!atomic_load(&igprof_state.active)) return; /* start-up: the kernel's mask is the program's */
  sigset_t now;
  if (raw_sigmask(SIG_BLOCK, NULL, &now) == 0 && igprof_signal_mask_is_blanket(&now))
    set_hidden(atomic_load(&kept));
}

int igprof_signal_mask_hidden(int sig)
{
  if (sig <= 0 || sig > MAX_SIG) return 0;
  view_init();
  return (view.hidden & bit(sig)) != 0;
}

int igprof_signal_mask_behind(void)
{
  view_init();
  return view.gen != atomic_load(&kept_gen) || atomic_load_explicit(&claim_pending, memory_order_relaxed);
}

/* ---------------------------------------------------------------- */
/* Pending signals                                                   */
/* ---------------------------------------------------------------- */

int igprof_signal_mask_is_nudge(const siginfo_t *si)
{
  return si->si_code == SI_QUEUE && si->si_value.sival_ptr == (void *) &nudge_cookie &&
         si->si_pid == igprof_state.pid;
}

static int ours(const siginfo_t *si)
{
  return igprof_signal_mask_is_nudge(si) || (mover && mover->ours(si));
}

/* Queue a program signal again, to this thread if it was sent to it with
 * tgkill, else to the process (what sigqueue, kill and most timers do). */
static void requeue(const siginfo_t *si)
{
  pid_t pid = igprof_state.pid;
  siginfo_t copy = *si;
  if (si->si_code == SI_TKILL) {
    if (syscall(SYS_rt_tgsigqueueinfo, pid, my_tid(), si->si_signo, &copy) != 0)
      syscall(SYS_tgkill, pid, my_tid(), si->si_signo);
    return;
  }
  /* The kernel takes a positive si_code from the process's own threads
   * only through kill(): the siginfo is then the one kill() makes. */
  if (syscall(SYS_rt_sigqueueinfo, pid, si->si_signo, &copy) != 0) kill(pid, si->si_signo);
}

/* Take back the profiler's own signals (timer samples of a timer since
 * deleted, nudges) pending on `bits`, which are about to be blocked in
 * this thread and would then stay pending where the program can see them
 * (sigpending, sigwaitinfo, signalfd). Program signals met on the way are
 * queued again. Leaves `bits` blocked. */
static void drain(uint64_t bits)
{
  sigset_t set;
  sigemptyset(&set);
  edit_set(&set, bits, 0);
  raw_sigmask(SIG_BLOCK, &set, NULL);
  struct timespec zero = {0, 0};
  siginfo_t theirs[8];
  int n = 0;
  siginfo_t si;
  while (n < 8 && syscall(SYS_rt_sigtimedwait, &set, &si, &zero, _NSIG / 8) > 0)
    if (!ours(&si)) theirs[n++] = si;
  for (int i = 0; i < n; ++i) requeue(&theirs[i]);
}

/* ---------------------------------------------------------------- */
/* Claims, keeping and releasing                                     */
/* ---------------------------------------------------------------- */

static void claim_bits(uint64_t bits)
{
  if (!bits) return;
  atomic_fetch_or(&claimed, bits);
  uint64_t k = atomic_load(&kept) & bits;
  for (int sig = 1; sig <= MAX_SIG && mover; ++sig)
    if (k & bit(sig)) mover->claimed(sig);
}

int igprof_signal_mask_claimed(int sig)
{
  return sig > 0 && sig <= MAX_SIG && (atomic_load(&claimed) & bit(sig));
}

void igprof_signal_mask_set_mover(const struct igprof_signal_mover *m) { mover = m; }

void igprof_signal_mask_catch_up(void *uc)
{
  view_init();
  view.in_handler = uc != NULL;
  if (atomic_exchange(&claim_pending, 0)) {
    uint64_t all = atomic_load(&claimed);
    claim_bits(all & atomic_load(&kept));
  }
  unsigned gen = atomic_load(&kept_gen);
  uint64_t k = atomic_load(&kept);
  sigset_t now, *mask = uc ? &((ucontext_t *) uc)->uc_sigmask : &now;
  if (!uc && raw_sigmask(SIG_BLOCK, NULL, &now) != 0) { view.in_handler = 0; return; }
  uint64_t kernel = to_bits(mask), program = kernel | view.hidden;
  uint64_t to_block = program & ~k & ~kernel; /* hidden until now, no longer kept */
  if (to_block) drain(to_block);
  edit_set(mask, to_block, k);
  if (!uc) raw_sigmask(SIG_SETMASK, &now, NULL);
  set_hidden(program & k);
  view.gen = gen;
  view.in_handler = 0;
}

void igprof_signal_mask_keep(int sig)
{
  if (sig <= 0 || sig > MAX_SIG) return;
  atomic_fetch_or(&kept, bit(sig));
  atomic_store(&any_kept, 1);
  atomic_fetch_add(&kept_gen, 1);
  /* Unblocked here now; from a handler, at its return (its caller catches up). */
  if (!view.in_handler) igprof_signal_mask_catch_up(NULL);
}

void igprof_signal_mask_release(int sig)
{
  if (sig <= 0 || sig > MAX_SIG) return;
  atomic_fetch_and(&kept, ~bit(sig));
  atomic_fetch_add(&kept_gen, 1);
  pid_t pid = igprof_state.pid, me = my_tid();
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = sig;
  si.si_code = SI_QUEUE;
  si.si_pid = pid;
  si.si_uid = getuid();
  si.si_value.sival_ptr = (void *) &nudge_cookie;
  for (int i = 0; i < MAX_HIDERS; ++i) {
    pid_t tid = atomic_load(&hiders[i].tid);
    if (tid && tid != me && (atomic_load(&hiders[i].hidden) & bit(sig)))
      syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &si);
  }
}

void igprof_signal_mask_hold(int sig, const siginfo_t *si, void *uc)
{
  atomic_fetch_or(&claimed, bit(sig));
  atomic_store(&claim_pending, 1);
  /* Outside the profiler the claim is acted on now; inside it, by the next
   * catch-up of any thread, and meanwhile the signal is held here. */
  if (igprof_enter()) {
    igprof_signal_mask_catch_up(uc);
    igprof_leave();
  }
  if (view.hidden & bit(sig)) {
    sigaddset(&((ucontext_t *) uc)->uc_sigmask, sig);
    set_hidden(view.hidden & ~bit(sig));
  }
  requeue(si);
}

void igprof_signal_mask_uses(const sigset_t *set, int blanket_claims)
{
  if (!set || (!blanket_claims && igprof_signal_mask_is_blanket(set))) return;
  claim_bits(to_bits(set));
  if (igprof_signal_mask_behind()) igprof_signal_mask_catch_up(NULL);
}

void igprof_signal_mask_action(int sig, const struct sigaction *act)
{
  if (act->sa_handler == SIG_DFL || !igprof_enter()) return;
  int saved_errno = errno;
  claim_bits(bit(sig));
  if (igprof_signal_mask_behind()) igprof_signal_mask_catch_up(NULL);
  errno = saved_errno;
  igprof_leave();
}

void igprof_signal_mask_before_exec(void)
{
  view_init();
  sigset_t set;
  sigemptyset(&set);
  edit_set(&set, view.hidden, 0);
  raw_sigmask(SIG_BLOCK, &set, NULL);
}

void igprof_signal_mask_exec_failed(void)
{
  sigset_t set;
  sigemptyset(&set);
  edit_set(&set, atomic_load(&kept), 0);
  raw_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* ---------------------------------------------------------------- */
/* Hooks                                                             */
/* ---------------------------------------------------------------- */

/* One mask change of the program's: claims first (a blanket mask claims
 * nothing), then the change without the kept signals; the old mask it
 * reads back is its own view. A change made while the thread is BUSY is
 * the profiler's own (libunwind blocks everything around its locks while a
 * sample is walked, and restores what it read): it goes to the kernel as
 * it is and leaves the program's view alone; inside a sample's handler the
 * kernel blocks the sampler's own signal, and that bit would otherwise
 * become part of the view. */
static int set_mask(int (*real)(int, const sigset_t *, sigset_t *), int how, const sigset_t *set, sigset_t *old)
{
  if (!atomic_load(&any_kept) || igprof_tls.guard == IGPROF_GUARD_BUSY) return real(how, set, old);
  int saved_errno = errno, entered = igprof_enter();
  view_init();
  int valid = how == SIG_BLOCK || how == SIG_UNBLOCK || how == SIG_SETMASK;
  sigset_t want, pass, prev;
  if (set) want = *set; /* set and old may be one buffer */
  if (entered) {
    if (set && valid && how != SIG_UNBLOCK && !igprof_signal_mask_is_blanket(&want)) claim_bits(to_bits(&want));
    if (igprof_signal_mask_behind()) igprof_signal_mask_catch_up(NULL);
  }
  uint64_t k = atomic_load(&kept);
  if (set) {
    pass = want;
    if (how != SIG_UNBLOCK) edit_set(&pass, 0, k);
  }
  errno = saved_errno;
  int rc = real(how, set ? &pass : NULL, &prev);
  saved_errno = errno;
  if (rc == 0) {
    uint64_t hidden = view.hidden;
    if (old) {
      *old = prev;
      edit_set(old, hidden, 0);
    }
    if (set) {
      uint64_t w = to_bits(&want);
      if (how == SIG_BLOCK) hidden |= w & k;
      else if (how == SIG_UNBLOCK) hidden &= ~w;
      else hidden = w & k;
      set_hidden(hidden);
    }
  }
  if (entered) igprof_leave();
  errno = saved_errno;
  return rc;
}

static int hook_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
  return set_mask(real_sigprocmask, how, set, old);
}

static int hook_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
  return set_mask(real_pthread_sigmask, how, set, old);
}

/* A kept signal is pending only for a moment (a timer sample that waits
 * out a handler's mask): never the program's. */
static int hook_sigpending(sigset_t *set)
{
  int rc = real_sigpending(set);
  if (rc == 0) edit_set(set, 0, atomic_load(&kept));
  return rc;
}

/* A signalfd takes the signals of its set that are pending, blocked or
 * not, before any handler could run: even a blanket set claims them all. */
static int hook_signalfd(int fd, const sigset_t *mask, int flags)
{
  if (mask && atomic_load(&kept) && igprof_enter()) {
    int saved_errno = errno;
    igprof_signal_mask_uses(mask, 1);
    errno = saved_errno;
    igprof_leave();
  }
  return real_signalfd(fd, mask, flags);
}

void igprof_signal_mask_start(void)
{
  /* The mask hooks matter only for a signal the application must not block
   * (-S, a sampler's); each hook costs start-up time in every process. */
  if (atomic_load(&any_kept) || igprof_config.dump_signal) {
    real_sigprocmask = igprof_hook("core", "sigprocmask", (void *) hook_sigprocmask, 1);
    real_pthread_sigmask = igprof_hook("core", "pthread_sigmask", (void *) hook_pthread_sigmask, 1);
    real_sigpending = igprof_hook("core", "sigpending", (void *) hook_sigpending, 1);
    real_signalfd = igprof_hook("core", "signalfd", (void *) hook_signalfd, 1);
  }
  if (!real_sigprocmask) real_sigprocmask = sigprocmask;
  if (!real_pthread_sigmask) real_pthread_sigmask = pthread_sigmask;
  if (!real_sigpending) real_sigpending = sigpending;
  if (!real_signalfd) real_signalfd = signalfd;
}
