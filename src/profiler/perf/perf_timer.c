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
 * all timers at once, from whichever thread gets there, and when the
 * program claims the sampler's signal every timer is made again with the
 * new one (perf_timer_move). A slot's timer changes only under the slot's
 * lock, taken with the guard held, so a signal handler never waits for a
 * lock its own thread holds.
 *
 * The signal: a real-time signal the program does not use (signal_mask.c
 * keeps the ones it claimed), from SIGRTMAX down, never below SIGRTMIN + 3:
 * glibc keeps the signals under SIGRTMIN for itself (SIGRTMIN is read at
 * run time), and the lowest few above it are the ones programs and
 * libraries pick first.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "perf.h"
#include "signal_mask.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IE_TLS __thread __attribute__((tls_model("initial-exec")))

struct perf_slot {
  struct perf_slot *next; /* immutable once published */
  _Atomic int owned;
  atomic_flag lock;       /* the fields below change under it */
  int timer;              /* kernel timer id, -1 when the thread has none */
  int signal;             /* the signal that timer sends */
  int resting;            /* its thread paused it (fork, a blocking call): re-arming is the thread's job */
  pid_t tid;
  clockid_t clock;        /* the thread's clock, as any thread can name it */
};

static _Atomic(struct perf_slot *) slots;
static _Atomic int timers_stopped; /* exec or final dump under way: arm nothing */
static _Atomic int timer_signal;   /* what timers send; -1 once no signal is free */

static IE_TLS struct perf_slot *my_slot;
static IE_TLS int64_t paused_remaining; /* ns left in the period at pause, 0 if not paused */
static IE_TLS int64_t paced_ns;         /* time perf_timer_pace owes the profile, under a period */
static IE_TLS int64_t fresh_from;       /* its arming's first expiry (CLOCK_MONOTONIC ns): a sample
                                         * delivered before is one of the arming it replaced */

int64_t perf_period_ns(void) { return 1000000000LL / perf_config.hz; }

int perf_timer_signal(void) { return atomic_load(&timer_signal); }

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

static void slot_lock(struct perf_slot *s)
{
  while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) sched_yield();
}

/* The final dump may come from a fatal signal that interrupted its thread
 * with its slot locked: give up on a lock that stays taken. */
static int slot_try_lock(struct perf_slot *s)
{
  for (int i = 0; i < 1000; ++i) {
    if (!atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) return 1;
    sched_yield();
  }
  return 0;
}

static void slot_unlock(struct perf_slot *s) { atomic_flag_clear_explicit(&s->lock, memory_order_release); }

/* ---------------------------------------------------------------- */
/* The signal                                                        */
/* ---------------------------------------------------------------- */

/* Free: the program has not claimed it, nobody handles, ignores or queued
 * it, and it is neither the -S signal nor `avoid`. */
static int signal_is_free(int sig, int avoid, const sigset_t *pending)
{
  struct sigaction a;
  if (sig == avoid || sig == igprof_config.dump_signal || igprof_signal_mask_claimed(sig)) return 0;
  if (sigismember(pending, sig) == 1 || sigaction(sig, NULL, &a) != 0) return 0;
  return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL;
}

/* A disarmed timer on `clock` that sends `sig` to thread `tid` with the
 * sampler's cookie; its id, or -1 with errno. */
static int new_timer(clockid_t clock, pid_t tid, int sig)
{
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = sig;
  sev.sigev_value.sival_ptr = (void *) &perf_cookie;
  sev._sigev_un._tid = tid; /* sigev_notify_thread_id */
  int id = -1;
  if (syscall(SYS_timer_create, clock, &sev, &id) != 0) return -1;
  return id;
}

/* Signals a timer cannot send (timer_create said EINVAL): bit sig - 1. */
static _Atomic uint64_t undeliverable;

/* Can a timer send `sig`? A kernel takes every real-time signal, but an
 * emulator may not: qemu-user maps each guest signal onto a host signal
 * of its own, has too few for SIGRTMIN..SIGRTMAX (qemu 10 on x86_64: none
 * for the top four), and accepts sigaction() for the unmapped ones without
 * ever delivering them; only timer_create refuses them (EINVAL). So a
 * candidate is tried with a timer made and deleted at once: a signal that
 * would never arrive is skipped and remembered. Any other failure (a limit
 * on timers) says nothing about the signal, which is kept. */
static int timer_can_send(int sig)
{
  if (atomic_load(&undeliverable) & (1ULL << (sig - 1))) return 0;
  int saved_errno = errno;
  int id = new_timer(CLOCK_MONOTONIC, (pid_t) syscall(SYS_gettid), sig);
  if (id >= 0) {
    syscall(SYS_timer_delete, id);
  } else if (errno == EINVAL) {
    atomic_fetch_or(&undeliverable, 1ULL << (sig - 1));
    errno = saved_errno;
    return 0;
  }
  errno = saved_errno;
  return 1;
}

int perf_choose_signal(int avoid)
{
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  for (int sig = SIGRTMAX; sig >= SIGRTMIN + 3; --sig)
    if (signal_is_free(sig, avoid, &pending) && timer_can_send(sig)) return sig;
  return -1;
}

int perf_timer_start_signal(void)
{
  /* What the program blocked before the profiler started is its own,
   * unless the mask blocks everything (signal_mask.c). */
  sigset_t blocked;
  pthread_sigmask(SIG_BLOCK, NULL, &blocked);
  igprof_signal_mask_uses(&blocked, 0);
  int sig = perf_choose_signal(0);
  atomic_store(&timer_signal, sig);
  return sig;
}

/* ---------------------------------------------------------------- */
/* Slots                                                             */
/* ---------------------------------------------------------------- */

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
  s->timer = -1;
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

/* The clock of thread `tid` under a name any thread of the process can use
 * (the kernel's per-thread CPU clock id, as pthread_getcpuclockid makes it:
 * CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD). */
static clockid_t clock_of(pid_t tid)
{
  if (perf_config.clock == PERF_CLOCK_REAL) return CLOCK_MONOTONIC;
  return (clockid_t) ((~(unsigned) tid << 3) | 6);
}

/* A timer of slot s's thread that sends `sig`; -1 with errno on failure. */
static int create_timer(const struct perf_slot *s, int sig)
{
  return new_timer(s->clock, s->tid, sig);
}

int perf_timer_thread_start(void)
{
  if (!my_slot && !(my_slot = claim_slot())) { errno = ENOMEM; return -1; }
  struct perf_slot *s = my_slot;
  int rc = 0;
  slot_lock(s);
  int sig = atomic_load(&timer_signal);
  if (s->timer < 0 && sig > 0) { /* none free: the thread goes unsampled, as the others */
    s->tid = (pid_t) syscall(SYS_gettid);
    s->clock = clock_of(s->tid);
    int id = create_timer(s, sig);
    if (id < 0) {
      rc = -1;
    } else {
      s->timer = id;
      s->signal = sig;
      s->resting = 0;
      paused_remaining = 0;
      if (!atomic_load(&timers_stopped)) sys_timer_settime(id, perf_period_ns(), NULL);
    }
  }
  slot_unlock(s);
  return rc;
}

void perf_timer_thread_stop(void)
{
  struct perf_slot *s = my_slot;
  if (!s) return;
  slot_lock(s);
  if (s->timer >= 0) syscall(SYS_timer_delete, s->timer);
  s->timer = -1;
  slot_unlock(s);
  atomic_store(&s->owned, 0);
  my_slot = NULL;
}

int perf_timer_thread_signal(void)
{
  struct perf_slot *s = my_slot;
  if (!s) return -1;
  slot_lock(s);
  int sig = s->timer >= 0 ? s->signal : -1;
  slot_unlock(s);
  return sig;
}

void perf_timer_move(int sig)
{
  atomic_store(&timer_signal, sig);
  for (struct perf_slot *s = atomic_load(&slots); s; s = s->next) {
    slot_lock(s);
    if (atomic_load(&s->owned) && s->timer >= 0 && s->signal != sig) {
      int64_t left = 0;
      int id = sig > 0 ? create_timer(s, sig) : -1;
      sys_timer_settime(s->timer, 0, &left);
      /* A resting timer is re-armed by its thread, with the phase it kept. */
      if (id >= 0 && !s->resting && left > 0 && !atomic_load(&timers_stopped))
        sys_timer_settime(id, left, NULL);
      syscall(SYS_timer_delete, s->timer);
      s->timer = id;
      s->signal = sig;
    }
    slot_unlock(s);
  }
}

/* ---------------------------------------------------------------- */
/* Pauses                                                            */
/* ---------------------------------------------------------------- */

/* Disarm the calling thread's timer; returns what was left of its period
 * (0 if it had none or an outer call already rests it). */
static int64_t rest(void)
{
  struct perf_slot *s = my_slot;
  int64_t left = 0;
  if (!s) return 0;
  slot_lock(s);
  if (s->timer >= 0 && !s->resting) {
    s->resting = 1;
    if (sys_timer_settime(s->timer, 0, &left) != 0) left = 0;
    if (left <= 0) s->resting = 0;
  }
  slot_unlock(s);
  return left;
}

static void wake(int64_t next_ns)
{
  struct perf_slot *s = my_slot;
  if (!s) return;
  slot_lock(s);
  s->resting = 0;
  if (s->timer >= 0 && !atomic_load(&timers_stopped)) sys_timer_settime(s->timer, next_ns, NULL);
  slot_unlock(s);
}

void perf_timer_pause(void) { paused_remaining = rest(); }

void perf_timer_resume(void)
{
  int64_t left = paused_remaining;
  paused_remaining = 0;
  if (left > 0) wake(left);
}

/* A sample's delivery and its handler may take most of a period: a deep
 * walk at a high rate, or any walk under an emulator, where the signal's
 * delivery alone costs tens of microseconds. When the timer's next expiry
 * is then less than half a period away, it would interrupt the program
 * again before it ran for long, or at once: at worst the program stops
 * running (seen at 2 kHz under qemu-arm; natively at 100 kHz a program ran
 * 400 times slower). So the period starts again from now, and the time
 * since the expiry this signal stands for is credited with this sample,
 * whole periods now and the rest with later ones: the totals stay those
 * of the clock.
 * Expiries of the old arming that came during the handler were credited
 * here; their signal, still queued, is dropped by newer kernels and
 * delivered by older ones: perf_timer_stale tells such a delivery (it
 * comes before the new arming's first expiry could).
 * -pr only: a CPU-time timer's expiry is seen on the scheduler's tick
 * (every few milliseconds), so it sends at most one signal per tick
 * whatever the handler costs, and a late delivery is the tick's doing. */
int64_t perf_timer_pace(int64_t entered_ns, int *restarted)
{
  struct perf_slot *s = my_slot;
  if (!s || perf_config.clock != PERF_CLOCK_REAL || entered_ns <= 0 || atomic_load(&timers_stopped)) return 0;
  int64_t period = perf_period_ns(), extra = 0;
  slot_lock(s);
  struct itimerspec cur;
  if (s->timer >= 0 && !s->resting && syscall(SYS_timer_gettime, s->timer, &cur) == 0) {
    int64_t left = ts_to_ns(cur.it_value);
    struct timespec now_ts;
    if (left > 0 && left < period / 2 && clock_gettime(CLOCK_MONOTONIC, &now_ts) == 0) {
      int64_t now = ts_to_ns(now_ts), old_left = 0;
      if (sys_timer_settime(s->timer, period, &old_left) == 0 && old_left > 0) {
        /* The old arming's expiries: now + old_left - j * period. This
         * signal stands for the last one before the handler began. */
        int64_t next = now + old_left, since = next - entered_ns;
        int64_t behind = since > 0 ? (since + period - 1) / period : 1; /* expiries from it to next */
        paced_ns += now - (next - behind * period);
        extra = paced_ns / period;
        paced_ns %= period;
        fresh_from = now + period;
        *restarted = 1;
      }
    }
  }
  slot_unlock(s);
  return extra;
}

int perf_timer_stale(int64_t entered_ns) { return entered_ns > 0 && entered_ns < fresh_from; }

int64_t perf_timer_sleep_begin(void) { return rest(); }

int64_t perf_timer_sleep_end(int64_t remaining_ns, int64_t elapsed_ns)
{
  if (!my_slot || remaining_ns <= 0) return 0;
  int64_t period = perf_period_ns(), ticks = 0, next = remaining_ns - elapsed_ns;
  if (next <= 0) {
    /* Expiries at remaining, remaining + period, ...: the timer would have
     * fired that many times, and its next expiry keeps the same phase. */
    int64_t past = -next;
    ticks = 1 + past / period;
    next = period - past % period;
  }
  wake(next);
  return ticks;
}

/* ---------------------------------------------------------------- */
/* All timers                                                        */
/* ---------------------------------------------------------------- */

static void set_all(int64_t value_ns)
{
  for (struct perf_slot *s = atomic_load(&slots); s; s = s->next) {
    if (!slot_try_lock(s)) continue;
    /* A resting timer is re-armed by its own thread when its call returns;
     * arming it here would send signals into that call. */
    if (atomic_load(&s->owned) && s->timer >= 0 && !(value_ns > 0 && s->resting))
      sys_timer_settime(s->timer, value_ns, NULL);
    slot_unlock(s);
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
   * exists to own one (or to hold a slot's lock). */
  for (struct perf_slot *s = atomic_load(&slots); s; s = s->next) {
    s->timer = -1;
    s->resting = 0;
    atomic_store(&s->owned, 0);
    atomic_flag_clear(&s->lock);
  }
  my_slot = NULL;
  paused_remaining = 0;
  paced_ns = fresh_from = 0;
}

void perf_timer_drain_pending(void)
{
  int sig = perf_timer_thread_signal();
  if (sig <= 0) sig = atomic_load(&timer_signal);
  if (sig <= 0) return;
  sigset_t set, old;
  struct timespec zero = {0, 0};
  sigemptyset(&set);
  sigaddset(&set, sig);
  /* Raw calls: the application's sigprocmask hook would refuse to block it. */
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, _NSIG / 8) != 0) return;
  while (syscall(SYS_rt_sigtimedwait, &set, NULL, &zero, _NSIG / 8) > 0)
    ;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, _NSIG / 8);
}
