/* Calls during which a thread's sampling timer rests, and is credited after.
 *
 * -pr: sleeping threads are sampled without being woken. A wall-clock timer
 * keeps firing while its thread sleeps, and a signal handler that runs
 * during nanosleep, poll, select, epoll_wait, sigsuspend, pause, sem_wait,
 * semop, msgrcv and the like ends that call with EINTR whatever SA_RESTART
 * says (signal(7)): sleep(1) would return at once. So around each such call
 * the thread's timer rests; after it, the thread's stack at the call is
 * credited with exactly the expiries the timer would have had in that time,
 * and the timer resumes in the same phase (perf_timer_sleep_end). The
 * profile is the same as if every expiry had been delivered; the program
 * sees no signal at all.
 *
 * Calls that SA_RESTART does restart (read, write, waitpid, futex waits in
 * pthread_mutex_lock/pthread_join ...) are left alone: the signal samples
 * them where they block and the kernel resumes them.
 *
 * fork, in every mode: a signal that arrives while the kernel copies a large
 * address space can make it start the copy again (IgProf's livelock), so
 * the timer rests over fork too, and the time fork took (CPU time, or wall
 * time with -pr) goes to the caller of fork, as the samples would have.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "perf.h"

#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

struct wait_ctx {
  int64_t remaining_ns; /* the timer's position in its period; 0: not timed */
  struct timespec start; /* on the timer's clock */
};

static int64_t elapsed_ns(const struct timespec *a, const struct timespec *b)
{
  return (b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec);
}

/* Rest the timer before a sleeping call. Returns 0 when this call is not
 * timed: profiler off, inside the profiler, or an outer hooked call (sleep
 * calling nanosleep) already rests the timer. */
static int wait_begin(struct wait_ctx *w)
{
  w->remaining_ns = 0;
  if (!atomic_load_explicit(&igprof_state.active, memory_order_relaxed) || !igprof_enter()) return 0;
  w->remaining_ns = perf_timer_sleep_begin();
  if (w->remaining_ns > 0) clock_gettime(perf_timer_clock(), &w->start);
  igprof_leave();
  return w->remaining_ns > 0;
}

/* Resume the timer; credit the expiries it missed to caller_ret's stack
 * unless `credit` is 0. */
static void wait_end(struct wait_ctx *w, void *caller_ret, int credit)
{
  if (w->remaining_ns <= 0) return;
  int saved = errno;
  struct timespec end;
  clock_gettime(perf_timer_clock(), &end);
  int entered = igprof_enter();
  int64_t ticks = perf_timer_sleep_end(w->remaining_ns, elapsed_ns(&w->start, &end));
  if (entered && credit) perf_credit_hook(caller_ret, ticks);
  if (entered) igprof_leave();
  errno = saved;
}

/* One replacement per call: time it if it should be, return its result. */
#define TIMED_WAIT(ret, name, params, args)                        \
  static ret(*real_##name) params;                                 \
  static ret hook_##name params                                    \
  {                                                                \
    struct wait_ctx wait_;                                         \
    if (!wait_begin(&wait_)) return real_##name args;              \
    ret rc = real_##name args;                                     \
    wait_end(&wait_, __builtin_return_address(0), 1);              \
    return rc;                                                     \
  }

TIMED_WAIT(int, clock_nanosleep, (clockid_t c, int f, const struct timespec *t, struct timespec *r), (c, f, t, r))
TIMED_WAIT(int, nanosleep, (const struct timespec *t, struct timespec *r), (t, r))
TIMED_WAIT(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t))
TIMED_WAIT(int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m), (p, n, t, m))
TIMED_WAIT(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t), (n, r, w, e, t))
TIMED_WAIT(int, pselect, (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m),
           (n, r, w, e, t, m))
TIMED_WAIT(int, epoll_wait, (int e, struct epoll_event *v, int n, int t), (e, v, n, t))
TIMED_WAIT(int, epoll_pwait, (int e, struct epoll_event *v, int n, int t, const sigset_t *m), (e, v, n, t, m))
TIMED_WAIT(int, pause, (void), ())
TIMED_WAIT(int, sigsuspend, (const sigset_t *m), (m))
TIMED_WAIT(int, sigtimedwait, (const sigset_t *s, siginfo_t *i, const struct timespec *t), (s, i, t))
TIMED_WAIT(int, sigwaitinfo, (const sigset_t *s, siginfo_t *i), (s, i))
TIMED_WAIT(int, sem_wait, (sem_t *s), (s))
TIMED_WAIT(int, sem_timedwait, (sem_t *s, const struct timespec *t), (s, t))
TIMED_WAIT(int, epoll_pwait2, (int e, struct epoll_event *v, int n, const struct timespec *t, const sigset_t *m),
           (e, v, n, t, m))
TIMED_WAIT(int, semop, (int id, struct sembuf *o, size_t n), (id, o, n))
TIMED_WAIT(int, semtimedop, (int id, struct sembuf *o, size_t n, const struct timespec *t), (id, o, n, t))
TIMED_WAIT(ssize_t, msgrcv, (int id, void *m, size_t n, long type, int flags), (id, m, n, type, flags))

struct wait_hook {
  const char *name;
  void *replacement;
  void **real;
};

#define WAIT_HOOK(name) {#name, (void *) hook_##name, (void **) &real_##name}

static const struct wait_hook wait_hooks[] = {
  WAIT_HOOK(clock_nanosleep), WAIT_HOOK(nanosleep), WAIT_HOOK(poll), WAIT_HOOK(ppoll),
  WAIT_HOOK(select), WAIT_HOOK(pselect), WAIT_HOOK(epoll_wait), WAIT_HOOK(epoll_pwait),
  WAIT_HOOK(pause), WAIT_HOOK(sigsuspend), WAIT_HOOK(sigtimedwait), WAIT_HOOK(sigwaitinfo),
  WAIT_HOOK(sem_wait), WAIT_HOOK(sem_timedwait), WAIT_HOOK(epoll_pwait2), WAIT_HOOK(semop),
  WAIT_HOOK(semtimedop), WAIT_HOOK(msgrcv),
};

static pid_t (*real_fork)(void);

static pid_t hook_fork(void)
{
  struct wait_ctx wait_;
  if (!wait_begin(&wait_)) return real_fork();
  pid_t pid = real_fork();
  /* The child has a timer of its own by now (fork_child) and starts from
   * zero; -pu does not count fork, which is kernel time. */
  if (pid != 0) wait_end(&wait_, __builtin_return_address(0), perf_config.clock != PERF_CLOCK_USER);
  return pid;
}

int perf_wait_start(void)
{
  int failed = 0;
  /* Without this hook the atfork handlers still rest the timer over fork;
   * only the credit for fork's own time is lost. */
  real_fork = igprof_hook("perf", "fork", (void *) hook_fork, 0);
  if (perf_config.clock != PERF_CLOCK_REAL) return 0;
  for (size_t i = 0; i < sizeof wait_hooks / sizeof wait_hooks[0]; ++i) {
    const struct wait_hook *h = &wait_hooks[i];
    /* Without the hook the call still works, but -pr signals can cut it
     * short: igprof_hook says so on stderr. */
    *h->real = igprof_hook("perf", h->name, h->replacement, 1);
    if (!*h->real) ++failed;
  }
  return failed;
}
