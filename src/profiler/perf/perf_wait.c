/* Calls during which a thread's sampling timer rests, and is credited after.
 *
 * -pr: a wall-clock timer keeps firing while its thread blocks, and a
 * signal handler that runs while a thread blocks in nanosleep, poll,
 * select, epoll_wait, sigtimedwait, pause, sem_timedwait, semop, msgrcv, a
 * futex wait with a timeout, or a socket call on a socket with a timeout
 * (SO_RCVTIMEO, SO_SNDTIMEO) ends that call with EINTR whatever SA_RESTART
 * says (signal(7)): sleep(1) would return after one period. So around each
 * such call the thread's timer rests; after it, the thread's stack at the
 * call is credited with exactly the expiries the timer would have had
 * meanwhile, and the timer resumes in the same phase (perf_timer_sleep_end).
 * The profile is the same as if every expiry had been delivered; the
 * program sees no signal at all.
 *
 * -pp and -pu need none of this: a thread's CPU clock does not advance
 * while it sleeps, and the kernel raises a CPU-time timer's signal on the
 * thread's way back to user mode (CONFIG_POSIX_CPU_TIMERS_TASK_WORK, which
 * x86_64 kernels select), after the system call has its result, so the
 * signal never meets a call it could end. The hooks cost start-up time in
 * every process, so they are installed for -pr only.
 *
 * Calls that SA_RESTART does restart (read and write without a socket
 * timeout, waitpid, the futex waits without a timeout in pthread_mutex_lock,
 * pthread_join ...) are left alone: the signal samples them where they
 * block and the kernel resumes them.
 *
 * sigtimedwait and sigwaitinfo (and sigwait, which glibc runs through
 * sigtimedwait) are also where the program says it waits for a signal: one
 * it names on its own is claimed (signal_mask.c), and the sampler moves
 * off it before the call. These two are hooked in every mode.
 *
 * fork, in every mode: a signal that arrives while the kernel copies a large
 * address space can make it start the copy again (IgProf's livelock), so
 * the timer rests over fork too, and the time fork took (CPU time, or wall
 * time with -pr) goes to the caller of fork, as the samples would have.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "perf.h"
#include "signal_mask.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

/* Rest the timer before a blocking call. Returns 0 when this call is not
 * timed: profiler off, inside the profiler, or an outer hooked call (sleep
 * calling nanosleep) already rests the timer. `waits_for`: the signals a
 * sigwait-family call waits for. */
static int wait_begin(struct wait_ctx *w, const sigset_t *waits_for)
{
  w->remaining_ns = 0;
  if (!atomic_load_explicit(&igprof_state.active, memory_order_relaxed) || !igprof_enter()) return 0;
  int saved = errno;
  if (waits_for) igprof_signal_mask_uses(waits_for, 0);
  if (igprof_signal_mask_behind()) igprof_signal_mask_catch_up(NULL);
  w->remaining_ns = perf_timer_sleep_begin();
  if (w->remaining_ns > 0) clock_gettime(perf_timer_clock(), &w->start);
  errno = saved;
  igprof_leave();
  return w->remaining_ns > 0;
}

/* Resume the timer; credit the expiries it missed to caller_ret's stack
 * (not under -pu: the call's time, fork's, is the kernel's). */
static void wait_end(struct wait_ctx *w, void *caller_ret)
{
  if (w->remaining_ns <= 0) return;
  int saved = errno;
  struct timespec end;
  clock_gettime(perf_timer_clock(), &end);
  int entered = igprof_enter();
  int64_t ticks = perf_timer_sleep_end(w->remaining_ns, elapsed_ns(&w->start, &end));
  if (entered && perf_config.clock != PERF_CLOCK_USER) perf_credit_hook(caller_ret, ticks);
  if (entered) igprof_leave();
  errno = saved;
}

/* One replacement per call: timed when `timed` holds, returns its result. */
#define TIMED_CALL(ret, name, params, args, timed, waits_for)      \
  static ret(*real_##name) params;                                 \
  static ret hook_##name params                                    \
  {                                                                \
    struct wait_ctx wait_;                                         \
    if (!(timed) || !wait_begin(&wait_, waits_for)) return real_##name args; \
    ret rc = real_##name args;                                     \
    wait_end(&wait_, __builtin_return_address(0));                 \
    return rc;                                                     \
  }
#define TIMED_WAIT(ret, name, params, args) TIMED_CALL(ret, name, params, args, 1, NULL)

TIMED_WAIT(int, clock_nanosleep, (clockid_t c, int f, const struct timespec *t, struct timespec *r), (c, f, t, r))
TIMED_WAIT(int, nanosleep, (const struct timespec *t, struct timespec *r), (t, r))
TIMED_WAIT(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t))
TIMED_WAIT(int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m), (p, n, t, m))
TIMED_WAIT(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t), (n, r, w, e, t))
TIMED_WAIT(int, pselect, (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m),
           (n, r, w, e, t, m))
TIMED_WAIT(int, epoll_wait, (int e, struct epoll_event *v, int n, int t), (e, v, n, t))
TIMED_WAIT(int, epoll_pwait, (int e, struct epoll_event *v, int n, int t, const sigset_t *m), (e, v, n, t, m))
TIMED_WAIT(int, epoll_pwait2, (int e, struct epoll_event *v, int n, const struct timespec *t, const sigset_t *m),
           (e, v, n, t, m))
TIMED_WAIT(int, pause, (void), ())
TIMED_WAIT(int, sigsuspend, (const sigset_t *m), (m))
TIMED_CALL(int, sigtimedwait, (const sigset_t *s, siginfo_t *i, const struct timespec *t), (s, i, t), 1, s)
TIMED_CALL(int, sigwaitinfo, (const sigset_t *s, siginfo_t *i), (s, i), 1, s)
TIMED_WAIT(int, sem_wait, (sem_t *s), (s))
TIMED_WAIT(int, sem_timedwait, (sem_t *s, const struct timespec *t), (s, t))
TIMED_WAIT(int, sem_clockwait, (sem_t *s, clockid_t c, const struct timespec *t), (s, c, t))
TIMED_WAIT(int, semop, (int id, struct sembuf *o, size_t n), (id, o, n))
TIMED_WAIT(int, semtimedop, (int id, struct sembuf *o, size_t n, const struct timespec *t), (id, o, n, t))
TIMED_WAIT(ssize_t, msgrcv, (int id, void *m, size_t n, long type, int flags), (id, m, n, type, flags))
TIMED_WAIT(int, msgsnd, (int id, const void *m, size_t n, int flags), (id, m, n, flags))

/* ---------------------------------------------------------------- */
/* Sockets with a timeout                                            */
/* ---------------------------------------------------------------- */

/* The descriptors whose socket has a receive or send timeout, as set with
 * setsockopt (an accepted socket inherits its listener's). Only these calls
 * are timed: the same calls without a timeout are restarted by SA_RESTART,
 * and read and write are far too frequent to time all of them. A descriptor
 * past the table is always timed. */
#define FD_TABLE 65536
static _Atomic uint64_t rcv_timeout[FD_TABLE / 64], snd_timeout[FD_TABLE / 64];

static int fd_timed(_Atomic uint64_t *table, int fd)
{
  if (fd < 0) return 0;
  if (fd >= FD_TABLE) return 1;
  return (atomic_load_explicit(&table[fd / 64], memory_order_relaxed) >> (fd % 64)) & 1;
}

static void fd_mark(_Atomic uint64_t *table, int fd, int on)
{
  if (fd < 0 || fd >= FD_TABLE) return;
  uint64_t bit = 1ull << (fd % 64);
  if (on) atomic_fetch_or(&table[fd / 64], bit);
  else atomic_fetch_and(&table[fd / 64], ~bit);
}

static int (*real_setsockopt)(int, int, int, const void *, socklen_t);

static int hook_setsockopt(int fd, int level, int name, const void *value, socklen_t len)
{
  int rc = real_setsockopt(fd, level, name, value, len);
  if (rc != 0 || level != SOL_SOCKET || !value) return rc;
  /* struct timeval, or with SO_*TIMEO_NEW two 64-bit fields: a zero
   * timeout is none. */
  int on = 0;
  for (socklen_t i = 0; i < len; ++i) on |= ((const unsigned char *) value)[i] != 0;
  if (name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW) fd_mark(rcv_timeout, fd, on);
  if (name == SO_SNDTIMEO_OLD || name == SO_SNDTIMEO_NEW) fd_mark(snd_timeout, fd, on);
  return rc;
}

#define RCV_CALL(ret, name, params, args, fd) TIMED_CALL(ret, name, params, args, fd_timed(rcv_timeout, fd), NULL)
#define SND_CALL(ret, name, params, args, fd) TIMED_CALL(ret, name, params, args, fd_timed(snd_timeout, fd), NULL)

RCV_CALL(ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f), fd)
RCV_CALL(ssize_t, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
         (fd, b, n, f, a, l), fd)
RCV_CALL(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f), fd)
TIMED_CALL(int, recvmmsg, (int fd, struct mmsghdr *v, unsigned n, int f, struct timespec *t), (fd, v, n, f, t),
           t || fd_timed(rcv_timeout, fd), NULL)
SND_CALL(ssize_t, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f), fd)
SND_CALL(ssize_t, sendto, (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l),
         (fd, b, n, f, a, l), fd)
SND_CALL(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f), fd)
SND_CALL(int, sendmmsg, (int fd, struct mmsghdr *v, unsigned n, int f), (fd, v, n, f), fd)
SND_CALL(int, connect, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l), fd)

/* read and write: also the profiler's own (-d messages go out with write
 * while its hook is being installed, before real_write is known). */
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_write)(int, const void *, size_t);

static ssize_t hook_read(int fd, void *b, size_t n)
{
  struct wait_ctx wait_;
  if (IGPROF_UNLIKELY(!real_read)) return syscall(SYS_read, fd, b, n);
  if (!fd_timed(rcv_timeout, fd) || !wait_begin(&wait_, NULL)) return real_read(fd, b, n);
  ssize_t rc = real_read(fd, b, n);
  wait_end(&wait_, __builtin_return_address(0));
  return rc;
}

static ssize_t hook_write(int fd, const void *b, size_t n)
{
  struct wait_ctx wait_;
  if (IGPROF_UNLIKELY(!real_write)) return syscall(SYS_write, fd, b, n);
  if (!fd_timed(snd_timeout, fd) || !wait_begin(&wait_, NULL)) return real_write(fd, b, n);
  ssize_t rc = real_write(fd, b, n);
  wait_end(&wait_, __builtin_return_address(0));
  return rc;
}

/* accept and accept4: the new socket inherits the listener's timeouts. */
static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);

static int accept_timed(int fd, struct sockaddr *a, socklen_t *l, int flags, int four, void *caller_ret)
{
  struct wait_ctx wait_;
  int timed = fd_timed(rcv_timeout, fd) && wait_begin(&wait_, NULL);
  int rc = four ? real_accept4(fd, a, l, flags) : real_accept(fd, a, l);
  if (timed) wait_end(&wait_, caller_ret);
  if (rc >= 0) {
    fd_mark(rcv_timeout, rc, fd_timed(rcv_timeout, fd));
    fd_mark(snd_timeout, rc, fd_timed(snd_timeout, fd));
  }
  return rc;
}

static int hook_accept(int fd, struct sockaddr *a, socklen_t *l)
{
  return accept_timed(fd, a, l, 0, 0, __builtin_return_address(0));
}

static int hook_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
  return accept_timed(fd, a, l, flags, 1, __builtin_return_address(0));
}

/* ---------------------------------------------------------------- */
/* futex waits with a timeout, made through syscall()                 */
/* ---------------------------------------------------------------- */

static long (*real_syscall)(long, long, long, long, long, long, long);

static int futex_wait_timed(long number, long op, long timeout)
{
  if (!timeout) return 0;
  if (number == SYS_futex) {
    int cmd = (int) op & FUTEX_CMD_MASK;
    return cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET || cmd == FUTEX_WAIT_REQUEUE_PI;
  }
#ifdef SYS_futex_waitv
  if (number == SYS_futex_waitv) return 1;
#endif
  return 0;
}

/* syscall(2) is variadic; its arguments are in registers (and the sixth on
 * the stack) whatever the call passed, so all six are read and passed on.
 * futex's timeout is its fourth argument, futex_waitv's too. */
static long hook_syscall(long number, long a1, long a2, long a3, long a4, long a5, long a6)
{
  struct wait_ctx wait_;
  if (!futex_wait_timed(number, a2, a4) || !wait_begin(&wait_, NULL))
    return real_syscall(number, a1, a2, a3, a4, a5, a6);
  long rc = real_syscall(number, a1, a2, a3, a4, a5, a6);
  wait_end(&wait_, __builtin_return_address(0));
  return rc;
}

/* ---------------------------------------------------------------- */
/* fork                                                              */
/* ---------------------------------------------------------------- */

static pid_t (*real_fork)(void);

static pid_t hook_fork(void)
{
  struct wait_ctx wait_;
  if (!wait_begin(&wait_, NULL)) return real_fork();
  pid_t pid = real_fork();
  /* The child has a timer of its own by now (fork_child) and starts from
   * zero; -pu does not count fork, which is kernel time. */
  if (pid != 0) wait_end(&wait_, __builtin_return_address(0));
  return pid;
}

/* ---------------------------------------------------------------- */
/* Installation                                                      */
/* ---------------------------------------------------------------- */

struct wait_hook {
  const char *name;
  void *replacement;
  void **real;
};

#define WAIT_HOOK(name) {#name, (void *) hook_##name, (void **) &real_##name}

/* Every mode: the program waits for signals it names. */
static const struct wait_hook signal_waits[] = {WAIT_HOOK(sigtimedwait), WAIT_HOOK(sigwaitinfo)};

/* -pr: the calls a wall-clock sample would end. */
static const struct wait_hook wait_hooks[] = {
  WAIT_HOOK(clock_nanosleep), WAIT_HOOK(nanosleep), WAIT_HOOK(poll), WAIT_HOOK(ppoll),
  WAIT_HOOK(select), WAIT_HOOK(pselect), WAIT_HOOK(epoll_wait), WAIT_HOOK(epoll_pwait),
  WAIT_HOOK(epoll_pwait2), WAIT_HOOK(pause), WAIT_HOOK(sigsuspend),
  WAIT_HOOK(sem_wait), WAIT_HOOK(sem_timedwait), WAIT_HOOK(sem_clockwait),
  WAIT_HOOK(semop), WAIT_HOOK(semtimedop), WAIT_HOOK(msgrcv), WAIT_HOOK(msgsnd),
  WAIT_HOOK(setsockopt), WAIT_HOOK(recv), WAIT_HOOK(recvfrom), WAIT_HOOK(recvmsg), WAIT_HOOK(recvmmsg),
  WAIT_HOOK(read), WAIT_HOOK(send), WAIT_HOOK(sendto), WAIT_HOOK(sendmsg), WAIT_HOOK(sendmmsg),
  WAIT_HOOK(write), WAIT_HOOK(connect), WAIT_HOOK(accept), WAIT_HOOK(accept4),
  /* Last: from its patch to its chain being known, nothing may call it. */
  WAIT_HOOK(syscall),
};

/* Without one of these hooks the call still works, but a sample can cut it
 * short, or take the signal it waits for: igprof_hook says so on stderr. */
static int install(const struct wait_hook *hooks, size_t n)
{
  int failed = 0;
  for (size_t i = 0; i < n; ++i) {
    *hooks[i].real = igprof_hook("perf", hooks[i].name, hooks[i].replacement, 1);
    if (!*hooks[i].real) ++failed;
  }
  return failed;
}

int perf_wait_start(void)
{
  /* Without this hook the atfork handlers still rest the timer over fork;
   * only the credit for fork's own time is lost. */
  real_fork = igprof_hook("perf", "fork", (void *) hook_fork, 0);
  int failed = install(signal_waits, sizeof signal_waits / sizeof signal_waits[0]);
  if (perf_config.clock == PERF_CLOCK_REAL) failed += install(wait_hooks, sizeof wait_hooks / sizeof wait_hooks[0]);
  return failed;
}
