/* Internal interface of the CPU sampler "perf" (igprof -pp, -pr, -pu).
 *
 * perf.c        the module: options, the signal handler, enable/disable,
 *               fork/exec/thread callbacks, statistics
 * perf_timer.c  one POSIX timer per thread, the registry of all of them,
 *               and the choice of the real-time signal they send
 * perf_wait.c   fork and the calls a signal would cut short: timed, not
 *               interrupted
 * signal_mask.c (the core's) which signals the program uses, and its view
 *               of its mask
 *
 * See docs/cpu-profiling.md for the why of each choice.
 */
#ifndef IGPROF_PERF_H
#define IGPROF_PERF_H

#include <stdint.h>
#include <time.h>

enum perf_clock {
  PERF_CLOCK_CPU,  /* -pp: the thread's CPU time, user + system */
  PERF_CLOCK_REAL, /* -pr: wall-clock time */
  PERF_CLOCK_USER, /* -pu: the thread's user CPU time only */
};

/* Sampling configuration, fixed at start-up. */
struct perf_config {
  enum perf_clock clock;
  long hz;            /* samples per second of the chosen clock */
  int keep_on_fork;   /* -pk */
  int start_disabled; /* -pd */
  int signal;         /* the real-time signal chosen at start-up (perf_timer_signal: now) */
};
extern struct perf_config perf_config;

/* Value the timers put in si_value, so the handler can tell our samples
 * from the application's own uses of the same signal. */
extern const int perf_cookie;

/* ---- perf_timer.c ---------------------------------------------------- */

/* Pick a real-time signal the program does not use (not claimed, default
 * action, not pending) and a timer can send, from SIGRTMAX down to
 * SIGRTMIN + 3, other than `avoid`. Returns the signal or -1. */
int perf_choose_signal(int avoid);
/* At start-up: claim what the program blocked already, then choose. */
int perf_timer_start_signal(void);
/* The signal timers send now; -1 once none was free. */
int perf_timer_signal(void);
/* The signal the calling thread's timer sends, -1 if it has none. */
int perf_timer_thread_signal(void);
/* Make every thread's timer again with `sig` (-1: delete them all), in
 * the phase each had. Guard held. */
void perf_timer_move(int sig);

/* The clock the timers count: the calling thread's CPU clock, or
 * CLOCK_MONOTONIC with -pr. */
clockid_t perf_timer_clock(void);

/* The sampling period in nanoseconds (from perf_config.hz). */
int64_t perf_period_ns(void);

/* Create and arm the calling thread's timer. Returns 0, or -1 with errno
 * (the caller warns once). Does nothing if the thread has one already. */
int perf_timer_thread_start(void);
/* Delete the calling thread's timer (thread exit). */
void perf_timer_thread_stop(void);

/* Pause the calling thread's timer, remembering where it was in its
 * period, and resume it later. Pauses nest only one deep. */
void perf_timer_pause(void);
void perf_timer_resume(void);

/* -pr, after a sample, in the handler (guard taken); `entered_ns`: the
 * handler's start on CLOCK_MONOTONIC. Restarts the thread's period if its
 * next expiry is under half a period away (*restarted = 1), so the program
 * always runs between samples. Returns whole periods to add to the
 * sample's weight. */
int64_t perf_timer_pace(int64_t entered_ns, int *restarted);
/* Whether a -pr sample that entered the handler at `entered_ns` was sent
 * by an arming perf_timer_pace replaced (and already credited). */
int perf_timer_stale(int64_t entered_ns);

/* For -pr sleeps: stop the thread's timer, and after `elapsed_ns` of
 * sleep restart it in the phase it would have had; returns how many
 * periods expired during the sleep (the samples it would have taken). */
int64_t perf_timer_sleep_begin(void);
int64_t perf_timer_sleep_end(int64_t remaining_ns, int64_t elapsed_ns);

/* Disarm or re-arm every thread's timer (exec, final dump). */
void perf_timer_disarm_all(void);
void perf_timer_rearm_all(void);

/* In a forked child: forget the parent's timers (the kernel did). */
void perf_timer_fork_child(void);

/* Discard profiling signals pending for the calling thread. */
void perf_timer_drain_pending(void);

/* ---- perf_wait.c ---------------------------------------------------- */

/* Install the hooks on fork and on the calls a signal would cut short.
 * Returns how many required hooks failed. */
int perf_wait_start(void);

/* perf.c: credit `ticks` samples to the stack of a hook's caller. */
void perf_credit_hook(void *caller_ret, int64_t ticks);

#endif
