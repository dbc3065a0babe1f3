/* Calls that a handled signal would cut short (EINTR) whatever SA_RESTART
 * says, for the sampler's tests: they must return what they return natively.
 *
 *   waittest waits   each call waits about 60 ms in its own wait_* function
 *                    (a timeout, a socket timeout, or the program's own
 *                    alarm for pause); prints what each returned
 *   waittest storm   many 1 ms waits on 400 descriptors, whose own kernel
 *                    time is long enough for CPU-time samples to fall in
 *                    it, and 1 ms receives on a socket with a timeout;
 *                    prints how many ended with EINTR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 60

static struct timespec wait_ts(void) { return (struct timespec) {0, WAIT_MS * 1000000L}; }

/* The absolute time WAIT_MS from now on `clock`. */
static struct timespec wait_until(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  ts.tv_nsec += WAIT_MS * 1000000L;
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  return ts;
}

/* ---- sleeps and multiplexing ------------------------------------------- */

static __attribute__((noinline)) int wait_nanosleep(void)
{
  struct timespec ts = wait_ts(), left;
  return nanosleep(&ts, &left);
}

static __attribute__((noinline)) int wait_clock_nanosleep(void)
{
  struct timespec ts = wait_ts(), left;
  int err = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &left);
  errno = err;
  return err ? -1 : 0;
}

static __attribute__((noinline)) int wait_usleep(void) { return usleep(WAIT_MS * 1000); }

static __attribute__((noinline)) int wait_poll(void) { return poll(NULL, 0, WAIT_MS); }

static __attribute__((noinline)) int wait_ppoll(void)
{
  struct timespec ts = wait_ts();
  return ppoll(NULL, 0, &ts, NULL);
}

static __attribute__((noinline)) int wait_select(void)
{
  struct timeval tv = {0, WAIT_MS * 1000};
  return select(0, NULL, NULL, NULL, &tv);
}

static __attribute__((noinline)) int wait_pselect(void)
{
  struct timespec ts = wait_ts();
  return pselect(0, NULL, NULL, NULL, &ts, NULL);
}

static __attribute__((noinline)) int wait_epoll(void)
{
  int ep = epoll_create1(0);
  struct epoll_event ev;
  int rc = epoll_wait(ep, &ev, 1, WAIT_MS);
  close(ep);
  return rc;
}

static __attribute__((noinline)) int wait_epoll_pwait(void)
{
  int ep = epoll_create1(0);
  struct epoll_event ev;
  int rc = epoll_pwait(ep, &ev, 1, WAIT_MS, NULL);
  close(ep);
  return rc;
}

/* ---- signals, semaphores, futexes -------------------------------------- */

static __attribute__((noinline)) int wait_sigtimedwait(void)
{
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  sigprocmask(SIG_BLOCK, &set, NULL);
  struct timespec ts = wait_ts();
  return sigtimedwait(&set, NULL, &ts);
}

static volatile sig_atomic_t alarm_hits;
static void on_alarm(int sig) { (void) sig; alarm_hits++; }

static __attribute__((noinline)) int wait_pause(void)
{
  alarm_hits = 0;
  signal(SIGALRM, on_alarm);
  ualarm(WAIT_MS * 1000, 0);
  int rc = pause();
  return rc * 10 + (int) alarm_hits; /* -1 (EINTR) once, after one SIGALRM */
}

static __attribute__((noinline)) int wait_sem(void)
{
  sem_t sem;
  sem_init(&sem, 0, 0);
  struct timespec ts = wait_until(CLOCK_REALTIME);
  return sem_timedwait(&sem, &ts);
}

static __attribute__((noinline)) int wait_sem_clockwait(void)
{
  sem_t sem;
  sem_init(&sem, 0, 0);
  struct timespec ts = wait_until(CLOCK_MONOTONIC);
  return sem_clockwait(&sem, CLOCK_MONOTONIC, &ts);
}

static __attribute__((noinline)) int wait_semop(void)
{
  int id = semget(IPC_PRIVATE, 1, 0600);
  struct sembuf op = {0, -1, 0};
  struct timespec ts = wait_ts();
  int rc = semtimedop(id, &op, 1, &ts);
  int err = errno;
  semctl(id, 0, IPC_RMID);
  errno = err;
  return rc;
}

static __attribute__((noinline)) int wait_futex(void)
{
  static int word;
  struct timespec ts = wait_ts();
  return (int) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
}

/* ---- sockets with a timeout -------------------------------------------- */

static void set_timeout(int fd, int name, long ms)
{
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  if (setsockopt(fd, SOL_SOCKET, name, &tv, sizeof tv) != 0) abort();
}

/* A connected pair whose first end has a WAIT_MS receive timeout. */
static void quiet_pair(int sv[2])
{
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) abort();
  set_timeout(sv[0], SO_RCVTIMEO, WAIT_MS);
}

/* A connected pair whose first end cannot send any more and has a WAIT_MS
 * send timeout. */
static void full_pair(int sv[2])
{
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) abort();
  static char block[4096];
  while (send(sv[0], block, sizeof block, MSG_DONTWAIT) > 0)
    ;
  set_timeout(sv[0], SO_SNDTIMEO, WAIT_MS);
}

static int close_pair(int sv[2], int rc)
{
  int err = errno;
  close(sv[0]);
  close(sv[1]);
  errno = err;
  return rc;
}

static __attribute__((noinline)) int wait_recv(void)
{
  int sv[2];
  char c;
  quiet_pair(sv);
  return close_pair(sv, (int) recv(sv[0], &c, 1, 0));
}

static __attribute__((noinline)) int wait_recvfrom(void)
{
  int sv[2];
  char c;
  quiet_pair(sv);
  return close_pair(sv, (int) recvfrom(sv[0], &c, 1, 0, NULL, NULL));
}

static __attribute__((noinline)) int wait_recvmsg(void)
{
  int sv[2];
  char c;
  struct iovec iov = {&c, 1};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  quiet_pair(sv);
  return close_pair(sv, (int) recvmsg(sv[0], &m, 0));
}

static __attribute__((noinline)) int wait_read(void)
{
  int sv[2];
  char c;
  quiet_pair(sv);
  return close_pair(sv, (int) read(sv[0], &c, 1));
}

static __attribute__((noinline)) int wait_send(void)
{
  int sv[2];
  full_pair(sv);
  return close_pair(sv, (int) send(sv[0], "x", 1, 0));
}

static __attribute__((noinline)) int wait_write(void)
{
  int sv[2];
  full_pair(sv);
  return close_pair(sv, (int) write(sv[0], "x", 1));
}

static __attribute__((noinline)) int wait_accept(void)
{
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  /* An abstract name: nothing on disk. */
  int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "igprof-waittest-%d", (int) getpid());
  if (bind(fd, (struct sockaddr *) &addr, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0 ||
      listen(fd, 1) != 0)
    abort();
  set_timeout(fd, SO_RCVTIMEO, WAIT_MS);
  int rc = accept(fd, NULL, NULL);
  int err = errno;
  close(fd);
  errno = err;
  return rc;
}

static void waits(void)
{
  static const struct { const char *name; int (*fn)(void); } calls[] = {
    {"nanosleep", wait_nanosleep}, {"clock_nanosleep", wait_clock_nanosleep}, {"usleep", wait_usleep},
    {"poll", wait_poll}, {"ppoll", wait_ppoll}, {"select", wait_select}, {"pselect", wait_pselect},
    {"epoll_wait", wait_epoll}, {"epoll_pwait", wait_epoll_pwait}, {"sigtimedwait", wait_sigtimedwait},
    {"pause", wait_pause}, {"sem_timedwait", wait_sem}, {"sem_clockwait", wait_sem_clockwait},
    {"semtimedop", wait_semop}, {"futex", wait_futex}, {"recv", wait_recv}, {"recvfrom", wait_recvfrom},
    {"recvmsg", wait_recvmsg}, {"read", wait_read}, {"send", wait_send}, {"write", wait_write},
    {"accept", wait_accept},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
    errno = 0;
    int rc = calls[i].fn();
    printf("%s: %d %s\n", calls[i].name, rc, rc < 0 ? strerrorname_np(errno) : "");
  }
}

/* ---- storm ------------------------------------------------------------- */

#define STORM_FDS 400
#define STORM_CALLS 300

static void storm(void)
{
  static int pipes[STORM_FDS][2];
  static struct pollfd p[STORM_FDS];
  int ep = epoll_create1(0), maxfd = 0;
  for (int i = 0; i < STORM_FDS; ++i) {
    if (pipe(pipes[i]) != 0) abort();
    p[i] = (struct pollfd) {.fd = pipes[i][0], .events = POLLIN};
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, pipes[i][0], &ev);
    if (pipes[i][0] > maxfd) maxfd = pipes[i][0];
  }
  int eintr[5] = {0, 0, 0, 0, 0}, sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) abort();
  set_timeout(sv[0], SO_RCVTIMEO, 1);
  for (int k = 0; k < STORM_CALLS; ++k) {
    if (poll(p, STORM_FDS, 1) < 0 && errno == EINTR) eintr[0]++;
    fd_set r;
    FD_ZERO(&r);
    for (int i = 0; i < STORM_FDS; ++i) FD_SET(pipes[i][0], &r);
    struct timeval tv = {0, 1000};
    if (select(maxfd + 1, &r, NULL, NULL, &tv) < 0 && errno == EINTR) eintr[1]++;
    struct epoll_event ev;
    if (epoll_wait(ep, &ev, 1, 1) < 0 && errno == EINTR) eintr[2]++;
    struct timespec ts = {0, 1000000L};
    if (ppoll(p, STORM_FDS, &ts, NULL) < 0 && errno == EINTR) eintr[3]++;
    char c;
    if (recv(sv[0], &c, 1, 0) < 0 && errno == EINTR) eintr[4]++;
  }
  printf("%d calls each: EINTR poll %d, select %d, epoll_wait %d, ppoll %d, recv %d\n", STORM_CALLS, eintr[0],
         eintr[1], eintr[2], eintr[3], eintr[4]);
}

int main(int argc, char **argv)
{
  const char *what = argc > 1 ? argv[1] : "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(what, "waits")) waits();
  else if (!strcmp(what, "storm")) storm();
  else {
    fprintf(stderr, "usage: waittest waits|storm\n");
    return 2;
  }
  return 0;
}
