/* A SIGPROF timer on the calling thread's CPU time, for the walker tests
 * that interrupt code at arbitrary instructions (walk.jit, walk.pac). */
#ifndef WALK_CPU_TIMER_H
#define WALK_CPU_TIMER_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Install `handler` for SIGPROF (SA_SIGINFO | SA_RESTART) and arm a timer
 * that fires every `nsec` nanoseconds of this thread's CPU time; exits
 * with status 2 if the timer cannot be made. */
static inline timer_t cpu_timer_start(void (*handler)(int, siginfo_t *, void *), long nsec)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGPROF;
  timer_t timer;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &timer) != 0) {
    perror("timer_create");
    exit(2);
  }
  struct itimerspec its = {{0, nsec}, {0, nsec}};
  timer_settime(timer, 0, &its, NULL);
  return timer;
}

#endif
