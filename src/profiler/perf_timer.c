/* Per-thread sampling timers for the CPU sampler.
 *
 * Every sampled thread owns one POSIX timer (timer_create) on its own clock
 * whose signal goes to that thread alone (SIGEV_THREAD_ID). Unlike the
 * process-wide setitimer timers IgProf used, a thread that exits deletes
 * only its own timer, a busy thread cannot steal another's samples, and
 * exec deletes them all, so no timer survives into a new program.
 *
 * The timers are made with raw system calls: glibc's wrappers would do the
 * same for SIGEV_THREAD_ID, but this way nothing here can ever allocate or
 * pass through a hooked function.
 *
 * The registry of every thread's timer is a list of slots that only grows
 * (a slot is reused by later threads): exec and the final dump must disarm
 * all timers at once, from whichever thread gets there.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "perf.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IE_TLS __thread __attribute__((tls_model("initial-exec")))

struct perf_slot {
  struct perf_slot *next; /* immutable once published */
  _Atomic int owned;
  _Atomic int timer;      /* kernel timer id, -1 when the thread has none */
  _Atomic int resting;    /* its thread paused it (fork, -pr sleep): re-arming is the thread's job */
};

static _Atomic(struct perf_slot *) slots;
static _Atomic int timers_stopped; /* exec or final dump under way: arm nothing */

static IE_TLS struct perf_slot *my_slot;
static IE_TLS int64_t paused_remaining; /* ns left in the period at pause, 0 if not paused */

int64_t perf_period_ns(void) { return 1000000000LL / perf_config.hz; }

static struct timespec ns_to_ts(int64_t ns)
{
  struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
  return ts;
}

static int64_t ts_to_ns(struct timespec ts) { return ts.tv_sec * 1000000000LL + ts.tv_nsec; }

static int sys_timer_settime(int id, int64_t value_ns, int64_t *old_value_ns)
{
  struct itimerspec now, old;
  memset(&now, 0, sizeof now);
  if (value_ns > 0) {
    now.it_interval = ns_to_ts(perf_period_ns());
    now.it_value = ns_to_ts(value_ns);
  }
  if (syscall(SYS_timer_settime, id, 0, &now, &old) != 0) return -1;
  if (old_value_ns) *old_value_ns = ts_to_ns(old.it_value);
  return 0;
}

int perf_choose_signal(int avoid)
{
  sigset_t blocked, pending;
  pthread_sigmask(SIG_BLOCK, NULL, &blocked);
  sigpending(&pending);
  for (int sig = SIGRTMAX; sig >= SIGRTMIN; --sig) {
    struct sigaction a;
    if (sig == avoid || sigismember(&blocked, sig) || sigismember(&pending, sig)) continue;
    if (sigaction(sig, NULL, &a) != 0) continue;
    if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL) return sig;
  }
  return -1;
}

/* Claim a free slot, or publish a new one. */
static struct perf_slot *claim_slot(void)
{
  for (struct perf_slot *s = atomic_load(&slots); s; s = s->next) {
    int free = 0;
    if (atomic_compare_exchange_strong(&s->owned, &free, 1)) return s;
  }
  struct perf_slot *s = igprof_arena_alloc(sizeof *s);
  if (!s) return NULL;
  atomic_store(&s->owned, 1);
  atomic_store(&s->timer, -1);
  struct perf_slot *head = atomic_load(&slots);
  do s->next = head;
  while (!atomic_compare_exchange_weak(&slots, &head, s));
  return s;
}

/* -pp and -pu both count the thread's CPU time exactly (the scheduler's
 * runtime, not tick-sampled user/system times); -pu drops the samples that
 * fell in the kernel (perf.c). */
clockid_t perf_timer_clock(void)
{
  return perf_config.clock == PERF_CLOCK_REAL ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
}

int perf_timer_thread_start(void)
{
  if (my_slot && atomic_load(&my_slot->timer) >= 0) return 0;
  if (!my_slot && !(my_slot = claim_slot())) { errno = ENOMEM; return -1; }
  pid_t tid = (pid_t) syscall(SYS_gettid);
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = perf_config.signal;
  sev.sigev_value.sival_ptr = (void *) &perf_cookie;
  sev._sigev_un._tid = tid; /* sigev_notify_thread_id */
  int id = -1;
  if (syscall(SYS_timer_create, perf_timer_clock(), &sev, &id) != 0) return -1;
  atomic_store(&my_slot->resting, 0);
  atomic_store(&my_slot->timer, id);
  paused_remaining = 0;
  if (!atomic_load(&timers_stopped)) sys_timer_settime(id, perf_period_ns(), NULL);
  return 0;
}

void perf_timer_thread_stop(void)
{
  if (!my_slot) return;
  int id = atomic_exchange(&my_slot->timer, -1);
  if (id >= 0) syscall(SYS_timer_delete, id);
  atomic_store(&my_slot->owned, 0);
  my_slot = NULL;
}

static int my_timer(void) { return my_slot ? atomic_load(&my_slot->timer) : -1; }

/* Disarm the calling thread's timer; returns what was left of its period
 * (0 if it had none or was already resting). */
static int64_t rest(void)
{
  int id = my_timer();
  int64_t left = 0;
  if (id < 0 || atomic_load(&my_slot->resting)) return 0; /* an outer call rests it */
  atomic_store(&my_slot->resting, 1);
  if (sys_timer_settime(id, 0, &left) != 0) left = 0;
  if (left <= 0) atomic_store(&my_slot->resting, 0);
  return left;
}

static void wake(int id, int64_t next_ns)
{
  atomic_store(&my_slot->resting, 0);
  if (!atomic_load(&timers_stopped)) sys_timer_settime(id, next_ns, NULL);
}

void perf_timer_pause(void) { paused_remaining = rest(); }

void perf_timer_resume(void)
{
  int id = my_timer();
  int64_t left = paused_remaining;
  paused_remaining = 0;
  if (id >= 0 && left > 0) wake(id, left);
}

int64_t perf_timer_sleep_begin(void) { return rest(); }

int64_t perf_timer_sleep_end(int64_t remaining_ns, int64_t elapsed_ns)
{
  int id = my_timer();
  if (id < 0 || remaining_ns <= 0) return 0;
  int64_t period = perf_period_ns(), ticks = 0, next = remaining_ns - elapsed_ns;
  if (next <= 0) {
    /* Expiries at remaining, remaining + period, ...: the timer would have
     * fired that many times, and its next expiry keeps the same phase. */
    int64_t past = -next;
    ticks = 1 + past / period;
    next = period - past % period;
  }
  wake(id, next);
  return ticks;
}

static void set_all(int64_t value_ns)
{
  for (struct perf_slot *s = atomic_load(&slots); s; s = s->next) {
    int id = atomic_load(&s->timer);
    /* A resting timer is re-armed by its own thread when its call returns;
     * arming it here would send signals into that call. A thread exiting at
     * the same time may have deleted its timer: EINVAL, harmless. */
    if (value_ns > 0 && atomic_load(&s->resting)) continue;
    if (atomic_load(&s->owned) && id >= 0) sys_timer_settime(id, value_ns, NULL);
  }
}

void perf_timer_disarm_all(void)
{
  atomic_store(&timers_stopped, 1);
  set_all(0);
}

void perf_timer_rearm_all(void)
{
  atomic_store(&timers_stopped, 0);
  set_all(perf_period_ns());
}

void perf_timer_fork_child(void)
{
  /* Timers are not inherited: every slot is free, and no other thread
   * exists to own one. */
  for (struct perf_slot *s = atomic_load(&slots); s; s = s->next) {
    atomic_store(&s->timer, -1);
    atomic_store(&s->resting, 0);
    atomic_store(&s->owned, 0);
  }
  my_slot = NULL;
  paused_remaining = 0;
}

void perf_timer_drain_pending(void)
{
  sigset_t set, old;
  struct timespec zero = {0, 0};
  sigemptyset(&set);
  sigaddset(&set, perf_config.signal);
  /* Raw calls: the application's sigprocmask hook would refuse to block it. */
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, _NSIG / 8) != 0) return;
  while (syscall(SYS_rt_sigtimedwait, &set, NULL, &zero, _NSIG / 8) > 0)
    ;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, _NSIG / 8);
}
