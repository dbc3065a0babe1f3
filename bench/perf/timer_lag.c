/* How promptly the kernel delivers CPU-time sampling signals, with no
 * profiler: a thread burns SECONDS of its own CPU time under a 5 ms
 * sampling source and counts the signals that reached it, and what the
 * first one arrived after.
 *
 *   timer_lag timer  a POSIX timer on CLOCK_THREAD_CPUTIME_ID sending a
 *                    real-time signal to the thread (what igprof -pp uses);
 *                    the kernel also reports the expiries it folded into a
 *                    delivered signal (si_overrun)
 *   timer_lag perf   a perf_event task-clock counter of the thread with a
 *                    5 ms sample period, its overflow signalled the same
 *                    way (F_SETSIG, F_SETOWN_EX); needs perf_event_paranoid
 *                    <= 2 and, for user and kernel time, <= 1
 *
 * Prints: source, signals, expiries they stand for, expected (CPU time /
 * period), CPU time at the first signal. bench/perf/timer_lag.sh runs it
 * beside busy loops.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 5000000L

static volatile sig_atomic_t signals, expiries;
static volatile double first_at = -1;
static int perf_fd = -1;

static double thread_cpu(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
  (void)sig, (void)uc;
  if (signals == 0)
    first_at = thread_cpu();
  signals++;
  expiries += 1 + (perf_fd < 0 && si->si_overrun > 0 ? si->si_overrun : 0);
  if (perf_fd >= 0)
    ioctl(perf_fd, PERF_EVENT_IOC_REFRESH, 1);
}

static int start_timer(int sig)
{
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = sig;
  sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  timer_t id;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &id) != 0)
    return -1;
  struct itimerspec its = {{0, PERIOD_NS}, {0, PERIOD_NS}};
  return timer_settime(id, 0, &its, NULL);
}

static int start_perf(int sig)
{
  struct perf_event_attr at;
  memset(&at, 0, sizeof at);
  at.size = sizeof at;
  at.type = PERF_TYPE_SOFTWARE;
  at.config = PERF_COUNT_SW_TASK_CLOCK;
  at.sample_period = PERIOD_NS;
  at.disabled = 1;
  at.exclude_kernel = 1;
  at.exclude_hv = 1;
  at.wakeup_events = 1;
  perf_fd = (int)syscall(SYS_perf_event_open, &at, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (perf_fd < 0)
    return -1;
  struct f_owner_ex owner = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
  if (fcntl(perf_fd, F_SETFL, O_ASYNC) != 0 || fcntl(perf_fd, F_SETSIG, sig) != 0 ||
      fcntl(perf_fd, F_SETOWN_EX, &owner) != 0)
    return -1;
  return ioctl(perf_fd, PERF_EVENT_IOC_REFRESH, 1);
}

int main(int argc, char **argv)
{
  if (argc < 2 || (strcmp(argv[1], "timer") && strcmp(argv[1], "perf"))) {
    fprintf(stderr, "usage: timer_lag timer|perf [SECONDS]\n");
    return 2;
  }
  double seconds = argc > 2 ? atof(argv[2]) : 0.2;
  if (!(seconds > 0 && seconds < 100)) {
    fprintf(stderr, "timer_lag: SECONDS must be in (0, 100): %s\n", argv[2]);
    return 2;
  }
  int sig = SIGRTMAX;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(sig, &sa, NULL);
  int is_timer = strcmp(argv[1], "timer") == 0;
  double start = thread_cpu();
  if ((is_timer ? start_timer(sig) : start_perf(sig)) != 0) {
    perror(is_timer ? "timer_lag: timer_create" : "timer_lag: perf_event_open");
    return 1;
  }
  volatile unsigned long sink = 0;
  double end = start + seconds;
  while (thread_cpu() < end)
    for (int i = 0; i < 100000; i++)
      sink += (unsigned long)i;
  double used = thread_cpu() - start;
  printf("%s signals %d expiries %d expected %.0f first_at %.3f\n", argv[1], (int)signals, (int)expiries,
         used * 1e9 / PERIOD_NS, first_at < 0 ? -1.0 : first_at - start);
  return 0;
}
