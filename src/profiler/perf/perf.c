/* The CPU sampler, module "perf" (igprof -pp; -pr wall clock, -pu user
 * time; -pf rate, -pk keep samples across fork, -pd start disabled).
 *
 * Each thread's own timer (perf_timer.c) sends it a real-time signal every
 * period of its clock; the handler walks the stack from the interrupted
 * instruction and adds the sample to PERF_TICKS of that stack's leaf.
 *
 * The handler obeys design.md §3 invariant 3: it takes no lock, allocates
 * only from the thread's own arena (and not at all when the interrupted code
 * was inside the profiler: that sample is dropped and counted), never calls
 * the loader, and leaves errno as it found it. A timer that expired more than
 * once before its signal could be delivered (the kernel reports the overrun)
 * gives its stack one tick per period, so the profile measures time, not
 * deliveries.
 *
 * The signal is one the program does not use. When the program claims it
 * (a handler, a mask that blocks it, a wait for it: signal_mask.c), the
 * sampler moves to another free real-time signal, or stops with one line on
 * stderr when none is left; the program never sees a sample.
 */
#define _GNU_SOURCE
#include "../../arch/context.h"
#include "internal.h"
#include "options.h"
#include "perf.h"
#include "signal_mask.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#define MAX_WEIGHT 10000 /* periods one signal may stand for */

struct perf_config perf_config = {.clock = PERF_CLOCK_CPU, .hz = 200};
const int perf_cookie = 0x69677072; /* its address is what the timers carry */

static int c_ticks = -1;
static _Atomic int sampling_on;   /* igprof_enable/igprof_disable; -pd starts at 0 */
static int timer_warned;

/* Statistics, reported with -d at the final dump. */
static _Atomic uint64_t samples, periods, dropped_busy, dropped_walk, dropped_unready, kernel_samples;
static _Atomic uint64_t paced_samples; /* samples after which the period started again (perf_timer_pace) */
static _Atomic uint64_t stale_samples; /* signals of an arming perf_timer_pace replaced */

/* ---------------------------------------------------------------- */
/* Options                                                           */
/* ---------------------------------------------------------------- */

static int perf_option(const char *key, const char *value, char *err, size_t errlen)
{
  if (value == NULL) {
    if (strcmp(key, "real") == 0) { perf_config.clock = PERF_CLOCK_REAL; return 0; }
    if (strcmp(key, "user") == 0) { perf_config.clock = PERF_CLOCK_USER; return 0; }
    if (strcmp(key, "process") == 0) { perf_config.clock = PERF_CLOCK_CPU; return 0; }
    if (strcmp(key, "keep") == 0) { perf_config.keep_on_fork = 1; return 0; }
    if (strcmp(key, "nostart") == 0) { perf_config.start_disabled = 1; return 0; }
  } else if (strcmp(key, "hz") == 0) {
    long hz = igprof_options_int(value, 1, 100000);
    if (hz < 0) { igprof_format(err, errlen, "perf:hz must be 1..100000, not '%s'", value); return -1; }
    perf_config.hz = hz;
    return 0;
  }
  igprof_format(err, errlen, "unknown option 'perf:%s%s' (real, user, process, keep, nostart, hz=N)",
                key, value ? "=..." : "");
  return -1;
}

/* ---------------------------------------------------------------- */
/* Samples                                                           */
/* ---------------------------------------------------------------- */

static int is_sample(const siginfo_t *si)
{
  return si->si_code == SI_TIMER && si->si_value.sival_ptr == (void *) &perf_cookie;
}

/* Handlers of the sampler's signals running in this thread (one inside
 * another: a nudge that lands in a sample's handler). */
static __thread __attribute__((tls_model("initial-exec"))) int handler_depth;

/* The thread follows the last move of the signal (its mask, and samples
 * left pending on the old one), unless it was interrupted inside the
 * profiler, or inside another of these handlers, whose context's mask is
 * the kernel's for that handler and not the thread's: then its next hook
 * or sample does it. */
static void catch_up_here(void *uc)
{
  if (handler_depth > 1 || !igprof_signal_mask_behind() || !igprof_enter()) return;
  igprof_signal_mask_catch_up(uc);
  igprof_leave();
}

static enum igprof_signal_result on_signal(int sig, siginfo_t *si, void *uc)
{
  if (!is_sample(si)) {
    if (!igprof_signal_mask_is_nudge(si)) {
      /* Someone else's use of the signal (kill, sigqueue, the application's
       * own timer): that is the application's business. If its view of
       * this thread blocks the signal, which the kernel does not because
       * it is ours, the program is using it: it stays pending, and the
       * sampler moves away. */
      if (!igprof_signal_mask_hidden(sig)) return IGPROF_SIGNAL_CHAIN;
      igprof_signal_mask_hold(sig, si, uc);
      return IGPROF_SIGNAL_DONE;
    }
    catch_up_here(uc);
    return IGPROF_SIGNAL_DONE;
  }
  catch_up_here(uc);
  if (!atomic_load_explicit(&sampling_on, memory_order_relaxed) ||
      !atomic_load_explicit(&igprof_state.active, memory_order_relaxed))
    return IGPROF_SIGNAL_DONE;
  /* -pu: did the period end while the thread was in the kernel? The CPU
   * timer is checked on the scheduler tick; when the tick found the thread in
   * a system call, the signal is delivered as that call returns, so the
   * interrupted instruction is the one right after the system-call
   * instruction, or the system-call instruction itself when the kernel is
   * about to restart the call (SA_RESTART). A tick in user mode interrupts
   * anywhere else. So the samples
   * kept are the ticks that found the thread in user mode: the same split the
   * kernel uses for user and system time (getrusage, time(1)). The
   * instruction test is the architecture's: context_at_syscall (src/arch). */
  if (perf_config.clock == PERF_CLOCK_USER && context_at_syscall(uc)) {
    atomic_fetch_add_explicit(&kernel_samples, 1, memory_order_relaxed);
    return IGPROF_SIGNAL_DONE;
  }
  int saved_errno = errno;
  int64_t entered_ns = 0;
  if (perf_config.clock == PERF_CLOCK_REAL) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0) entered_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (perf_timer_stale(entered_ns)) {
      atomic_fetch_add_explicit(&stale_samples, 1, memory_order_relaxed);
      errno = saved_errno;
      return IGPROF_SIGNAL_DONE;
    }
  }
  int64_t weight = 1 + (si->si_overrun > 0 ? si->si_overrun : 0);
  if (weight > MAX_WEIGHT) weight = MAX_WEIGHT;
  if (!igprof_enter()) {
    /* Interrupted inside the profiler: its arena and stack cache are in
     * use, so this sample cannot be recorded. */
    atomic_fetch_add_explicit(&dropped_busy, 1, memory_order_relaxed);
  } else {
    struct igprof_node *node = igprof_tls.ready ? igprof_capture_from_signal(uc) : NULL;
    int restarted = 0;
    int64_t paced = perf_timer_pace(entered_ns, &restarted);
    if (restarted) atomic_fetch_add_explicit(&paced_samples, 1, memory_order_relaxed);
    weight = weight + paced > MAX_WEIGHT ? MAX_WEIGHT : weight + paced;
    if (node) {
      igprof_counter_add(node, c_ticks, weight, weight);
      atomic_fetch_add_explicit(&samples, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&periods, (uint64_t) weight, memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(igprof_tls.ready ? &dropped_walk : &dropped_unready, 1,
                                memory_order_relaxed);
    }
    igprof_leave();
  }
  errno = saved_errno;
  return IGPROF_SIGNAL_DONE;
}

static enum igprof_signal_result on_sample(int sig, siginfo_t *si, void *uc, const struct sigaction *app)
{
  (void) app;
  ++handler_depth;
  atomic_signal_fence(memory_order_seq_cst);
  enum igprof_signal_result r = on_signal(sig, si, uc);
  atomic_signal_fence(memory_order_seq_cst);
  --handler_depth;
  return r;
}

void perf_credit_hook(void *caller_ret, int64_t ticks)
{
  if (ticks <= 0 || !atomic_load_explicit(&sampling_on, memory_order_relaxed)) return;
  struct igprof_node *node = igprof_capture_from_hook(caller_ret, NULL);
  if (!node) { atomic_fetch_add(&dropped_walk, 1); return; }
  igprof_counter_add(node, c_ticks, ticks, ticks);
  atomic_fetch_add(&samples, 1);
  atomic_fetch_add(&periods, (uint64_t) ticks);
}

/* ---------------------------------------------------------------- */
/* Moving to another signal                                          */
/* ---------------------------------------------------------------- */

static atomic_flag move_lock = ATOMIC_FLAG_INIT;

/* The program claimed `sig`: if it is the sampler's, take the next free
 * real-time signal, make every thread's timer again with it, and give
 * `sig` back (signal_mask.c nudges the threads whose view blocks it). Its
 * dispatcher stays: a sample still queued on it is dropped there, and a
 * nudge that arrives while its thread is inside the profiler waits for it
 * to leave. */
static void on_claimed(int sig)
{
  if (sig != perf_timer_signal()) return;
  while (atomic_flag_test_and_set(&move_lock)) sched_yield();
  if (sig == perf_timer_signal()) {
    int next = perf_choose_signal(sig);
    if (next > 0 && igprof_signal_own(next, on_sample, 1) != 0) next = -1;
    perf_timer_move(next);
    igprof_signal_defer_while_busy(sig);
    igprof_signal_mask_release(sig);
    if (next > 0)
      igprof_debug("perf: the program uses signal %d; samples now come with signal %d", sig, next);
    else
      igprof_warn("perf: the program uses signal %d and no other real-time signal is free; "
                  "CPU samples stop here", sig);
  }
  atomic_flag_clear(&move_lock);
}

static const struct igprof_signal_mover mover = {.claimed = on_claimed, .ours = is_sample};

/* ---------------------------------------------------------------- */
/* Threads                                                           */
/* ---------------------------------------------------------------- */

static void start_this_thread(void)
{
  if (perf_timer_thread_start() == 0) return;
  if (!timer_warned) {
    timer_warned = 1;
    igprof_warn("perf: cannot create a sampling timer for thread %d: %s; it is not sampled",
                (int) gettid(), strerrorname_np(errno) ? strerrorname_np(errno) : "error");
  }
}

static void perf_thread_start(void) { start_this_thread(); }
static void perf_thread_exit(void) { perf_timer_thread_stop(); }

/* ---------------------------------------------------------------- */
/* fork and exec                                                     */
/* ---------------------------------------------------------------- */

/* While a large process forks, copying its page tables can take longer
 * than a period; a signal arriving meanwhile makes the kernel restart the
 * copy, again and again. So the forking thread's timer rests over fork. */
static void perf_fork_prepare(void) { perf_timer_pause(); }
static void perf_fork_parent(void) { perf_timer_resume(); }

static void perf_fork_child(void)
{
  perf_timer_fork_child();
  if (!perf_config.keep_on_fork) igprof_tree_reset_counters(1u << c_ticks);
  samples = periods = dropped_busy = dropped_walk = dropped_unready = kernel_samples = paced_samples = stale_samples = 0;
  start_this_thread();
}

/* Nothing armed may survive into the new program: stop every timer, and
 * take back any sample already queued for this thread, because a pending
 * signal outlives exec and the new image would die of it. */
static void perf_before_exec(void)
{
  perf_timer_disarm_all();
  perf_timer_drain_pending();
  igprof_signal_mask_before_exec(); /* the new image starts with the program's mask */
}

static void perf_exec_failed(void)
{
  igprof_signal_mask_exec_failed();
  perf_timer_rearm_all();
}

static void perf_before_final_dump(void)
{
  perf_timer_disarm_all();
  igprof_debug("perf: %llu samples (%llu periods of %lld ns), dropped: %llu inside the profiler, "
               "%llu unwalkable, %llu in unprepared threads; %llu in the kernel (not counted by -pu); "
               "%llu samples came so late that the period started again (%llu signals of the old period dropped)",
               (unsigned long long) samples, (unsigned long long) periods,
               (long long) perf_period_ns(), (unsigned long long) dropped_busy,
               (unsigned long long) dropped_walk, (unsigned long long) dropped_unready,
               (unsigned long long) kernel_samples, (unsigned long long) paced_samples,
               (unsigned long long) stale_samples);
}

/* ---------------------------------------------------------------- */
/* Start                                                             */
/* ---------------------------------------------------------------- */

static int perf_start(void)
{
  c_ticks = igprof_counter_define("PERF_TICKS", IGPROF_COUNTER_TICK, 0);
  if (c_ticks < 0) return -1;
  perf_config.signal = perf_timer_start_signal();
  igprof_signal_mask_set_mover(&mover);
  if (perf_config.signal < 0) {
    /* The program runs as it would, unsampled; its dump is still written. */
    igprof_warn("perf: the program uses every real-time signal from SIGRTMIN+3 to SIGRTMAX; "
                "CPU samples are not taken");
    return 0;
  }
  if (igprof_signal_own(perf_config.signal, on_sample, 1) != 0) {
    igprof_warn("perf: cannot handle signal %d: %s", perf_config.signal,
                strerrorname_np(errno) ? strerrorname_np(errno) : "error");
    return -1;
  }
  igprof_state.tick_period = (double) perf_period_ns() / 1e9;
  atomic_store(&sampling_on, !perf_config.start_disabled);
  perf_wait_start();
  if (perf_timer_thread_start() != 0) {
    igprof_warn("perf: cannot create a sampling timer: %s",
                strerrorname_np(errno) ? strerrorname_np(errno) : "error");
    return -1;
  }
  static const char *const clocks[] = {"CPU time", "wall-clock time", "user CPU time"};
  igprof_debug("perf: sampling %s at %ld Hz with signal %d%s", clocks[perf_config.clock],
               perf_config.hz, perf_config.signal, perf_config.start_disabled ? " (disabled until igprof_enable)" : "");
  return 0;
}

static struct igprof_module perf_module = {
  .name = "perf",
  .option = perf_option,
  .start = perf_start,
  .thread_start = perf_thread_start,
  .thread_exit = perf_thread_exit,
  .fork_prepare = perf_fork_prepare,
  .fork_parent = perf_fork_parent,
  .fork_child = perf_fork_child,
  .before_exec = perf_before_exec,
  .exec_failed = perf_exec_failed,
  .before_final_dump = perf_before_final_dump,
};
IGPROF_MODULE(perf_module);

/* ---------------------------------------------------------------- */
/* Application API (dlsym-able)                                      */
/* ---------------------------------------------------------------- */

/* Switch sampling on for the whole process. */
IGPROF_EXPORT void igprof_enable(void) { atomic_store(&sampling_on, 1); }

/* Switch sampling off for the whole process; returns 1 if it was on. */
IGPROF_EXPORT int igprof_disable(void) { return atomic_exchange(&sampling_on, 0); }
