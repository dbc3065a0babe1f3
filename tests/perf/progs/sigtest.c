/* Programs that use real-time signals themselves, for perf.signals: what
 * each prints, and its exit status (3), must be the same under igprof -pp
 * and -pr as natively, whichever signal the sampler had when it started.
 *
 * TOP is the highest real-time signal the system delivers, the sampler's
 * first choice: SIGRTMAX on a kernel; under qemu-user the highest one it
 * maps (qemu 10 on x86_64: SIGRTMAX-4), since it accepts handlers and masks
 * for the others but never delivers them.
 *
 *   sigtest one        blocks TOP alone, queues itself 8 of them and
 *                      takes them back through signalfd, sigwaitinfo,
 *                      sigtimedwait and sigwait in turn
 *   sigtest allbutone  the same with every real-time signal blocked but
 *                      SIGRTMIN+6, queuing SIGRTMIN, TOP-1, TOP
 *   sigtest allbutlow  the same leaving SIGRTMIN+2 unblocked (glibc's range:
 *                      never the sampler's, so none is left for it)
 *   sigtest all        every real-time signal blocked (none left for a
 *                      sampler), queuing SIGRTMIN+6 and TOP
 *   sigtest blanket    sigfillset masks in main and in a thread (the kind
 *                      every worker thread has), then TOP queued and
 *                      taken with sigwaitinfo on the full set
 *   sigtest handler    a handler without SA_RESTART on TOP, then a
 *                      150 ms read of a pipe (a signal handled meanwhile
 *                      would end it with EINTR) and 3 TOP queued
 *   sigtest handlerall a handler on every real-time signal; one of each
 *                      up to TOP queued
 *   sigtest exec       a sigfillset mask, then exec of itself as
 *                      "sigtest showmask", which prints the mask it starts with
 *   sigtest top        prints TOP
 *
 * Each mode burns CPU in burn_before before it touches a signal and in
 * burn_after once it has (in blanket also burn_thread and burn_final), so
 * the profile shows whether sampling went on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double thread_cpu(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static __attribute__((noinline)) void burn(double seconds)
{
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end)
    for (int i = 0; i < 100000; ++i) sink += i;
}

static __attribute__((noinline)) void burn_before(void) { burn(0.2); }
static __attribute__((noinline)) void burn_after(void) { burn(0.3); }
static __attribute__((noinline)) void burn_final(void) { burn(0.2); }

static int top;

/* TOP: the highest real-time signal a timer can be made to send. A timer
 * made and deleted claims nothing, so the sampler's choices stay the same. */
static int top_signal(void)
{
  for (int sig = SIGRTMAX; sig > SIGRTMIN; --sig) {
    struct sigevent sev;
    timer_t id;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = sig;
    if (timer_create(CLOCK_MONOTONIC, &sev, &id) == 0) {
      timer_delete(id);
      return sig;
    }
  }
  return SIGRTMIN;
}

static void name(char *buf, size_t cap, int sig)
{
  if (sig >= SIGRTMIN && sig <= SIGRTMAX)
    snprintf(buf, cap, sig - SIGRTMIN <= SIGRTMAX - sig ? "SIGRTMIN+%d" : "SIGRTMAX-%d",
             sig - SIGRTMIN <= SIGRTMAX - sig ? sig - SIGRTMIN : SIGRTMAX - sig);
  else
    snprintf(buf, cap, "%d", sig);
}

static void show_set(const char *what, const sigset_t *set)
{
  int n = 0;
  char list[1024] = "", one[32];
  for (int sig = 1; sig <= 64; ++sig) {
    if (sigismember(set, sig) != 1) continue;
    ++n;
    if (sig >= SIGRTMIN) {
      name(one, sizeof one, sig);
      strcat(list, " ");
      strcat(list, one);
    }
  }
  printf("%s: %d signals;%s\n", what, n, list);
}

static void show_mask(const char *what)
{
  sigset_t m;
  pthread_sigmask(SIG_BLOCK, NULL, &m);
  show_set(what, &m);
}

static void show_pending(const char *what)
{
  sigset_t p;
  sigpending(&p);
  show_set(what, &p);
}

/* Queue `per` of each signal in sigs to the process, then take them all
 * back through signalfd, sigwaitinfo, sigtimedwait and sigwait in turn.
 * Returns how many came back. */
static int exchange(const int *sigs, int nsigs, int per)
{
  sigset_t set;
  sigemptyset(&set);
  for (int i = 0; i < nsigs; ++i) sigaddset(&set, sigs[i]);
  for (int i = 0; i < nsigs; ++i)
    for (int k = 0; k < per; ++k) sigqueue(getpid(), sigs[i], (union sigval) {.sival_int = 100 * i + k});
  show_pending("pending");
  int fd = signalfd(-1, &set, SFD_CLOEXEC), got = 0;
  for (int k = 0; k < nsigs * per; ++k) {
    int sig = -1, value = -1, code = 0;
    const char *how = "";
    siginfo_t si;
    struct timespec second = {1, 0};
    switch (k % 4) {
    case 0: {
      struct signalfd_siginfo fi;
      how = "signalfd";
      if (read(fd, &fi, sizeof fi) == (ssize_t) sizeof fi) {
        sig = (int) fi.ssi_signo;
        value = fi.ssi_int;
        code = fi.ssi_code;
      }
      break;
    }
    case 1:
      how = "sigwaitinfo";
      if ((sig = sigwaitinfo(&set, &si)) > 0) value = si.si_value.sival_int, code = si.si_code;
      break;
    case 2:
      how = "sigtimedwait";
      if ((sig = sigtimedwait(&set, &si, &second)) > 0) value = si.si_value.sival_int, code = si.si_code;
      break;
    default:
      how = "sigwait";
      if (sigwait(&set, &sig) != 0) sig = -1;
      break;
    }
    char one[32];
    name(one, sizeof one, sig);
    printf("%s: %s value %d code %d\n", how, one, value, code);
    if (sig > 0) ++got;
  }
  close(fd);
  show_pending("pending after");
  return got;
}

static int blocked_exchange(const char *mode)
{
  sigset_t block;
  sigemptyset(&block);
  int sigs[3], n = 0;
  if (strcmp(mode, "one") == 0) {
    sigaddset(&block, top);
    sigs[n++] = top;
  } else {
    int left = strcmp(mode, "allbutlow") == 0 ? SIGRTMIN + 2 : SIGRTMIN + 6;
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig)
      if (strcmp(mode, "all") == 0 || sig != left) sigaddset(&block, sig);
    if (strcmp(mode, "all") == 0) {
      sigs[n++] = SIGRTMIN + 6;
    } else {
      sigs[n++] = SIGRTMIN;
      sigs[n++] = top - 1;
    }
    sigs[n++] = top;
  }
  sigset_t old;
  if (strcmp(mode, "one") == 0) sigprocmask(SIG_BLOCK, &block, &old);
  else pthread_sigmask(SIG_BLOCK, &block, &old);
  show_set("old mask", &old);
  show_mask("mask");
  burn_after();
  int got = exchange(sigs, n, 8 / n + (8 % n != 0));
  show_mask("mask after");
  return got;
}

/* ---- blanket ----------------------------------------------------------- */

static __attribute__((noinline)) void burn_thread(void) { burn(0.2); }

static void *blanket_thread(void *p)
{
  (void) p;
  show_mask("thread inherits");
  burn_thread();
  return NULL;
}

static int blanket(void)
{
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  show_set("old mask", &old);
  show_mask("mask");
  burn_after();
  pthread_t t;
  pthread_create(&t, NULL, blanket_thread, NULL);
  pthread_join(t, NULL);
  for (int k = 0; k < 3; ++k) sigqueue(getpid(), top, (union sigval) {.sival_int = k});
  show_pending("pending");
  int got = 0;
  for (int k = 0; k < 3; ++k) {
    siginfo_t si;
    int sig = sigwaitinfo(&all, &si);
    char one[32];
    name(one, sizeof one, sig);
    printf("sigwaitinfo: %s value %d\n", one, sig > 0 ? si.si_value.sival_int : -1);
    got += sig > 0;
  }
  show_pending("pending after");
  burn_final();
  show_mask("mask after");
  return got;
}

/* ---- handlers ---------------------------------------------------------- */

static volatile sig_atomic_t hits;
static void on_signal(int sig) { (void) sig; hits++; }

static int pipe_fds[2];

static void *write_later(void *p)
{
  (void) p;
  struct timespec ts = {0, 150000000L};
  while (nanosleep(&ts, &ts) != 0)
    ;
  if (write(pipe_fds[1], "x", 1) != 1) abort();
  return NULL;
}

static int handler(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART: a handled signal ends a blocking read */
  sigaction(top, &sa, NULL);
  burn_after();
  if (pipe(pipe_fds) != 0) abort();
  pthread_t t;
  pthread_create(&t, NULL, write_later, NULL);
  char c;
  errno = 0;
  ssize_t r = read(pipe_fds[0], &c, 1);
  printf("read: %zd %s\n", r, r < 0 ? strerrorname_np(errno) : "");
  pthread_join(t, NULL);
  for (int k = 0; k < 3; ++k) sigqueue(getpid(), top, (union sigval) {.sival_int = k});
  printf("handler ran %d times\n", (int) hits);
  return (int) hits;
}

static int handlerall(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaction(sig, &sa, NULL);
  for (int sig = SIGRTMIN; sig <= top; ++sig) sigqueue(getpid(), sig, (union sigval) {.sival_int = sig});
  printf("handlers ran %d times for %d signals\n", (int) hits, top - SIGRTMIN + 1);
  burn_after();
  return (int) hits;
}

static int exec_with_mask(const char *self)
{
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  execl(self, "sigtest", "showmask", (char *) NULL);
  return -1;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: sigtest one|allbutone|allbutlow|all|blanket|handler|handlerall|exec|top\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argv[1];
  if (strcmp(mode, "showmask") == 0) {
    show_mask("mask at start");
    return 3;
  }
  top = top_signal();
  if (strcmp(mode, "top") == 0) {
    printf("%d\n", top);
    return 0;
  }
  burn_before();
  int got;
  if (strcmp(mode, "blanket") == 0) got = blanket();
  else if (strcmp(mode, "handler") == 0) got = handler();
  else if (strcmp(mode, "handlerall") == 0) got = handlerall();
  else if (strcmp(mode, "exec") == 0) got = exec_with_mask("/proc/self/exe");
  else if (strcmp(mode, "one") == 0 || strcmp(mode, "allbutone") == 0 || strcmp(mode, "allbutlow") == 0 ||
           strcmp(mode, "all") == 0)
    got = blocked_exchange(mode);
  else {
    fprintf(stderr, "sigtest: unknown mode '%s'\n", mode);
    return 2;
  }
  printf("received %d\n", got);
  return 3;
}
