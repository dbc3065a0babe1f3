/* Programs with CPU splits known by construction, for the sampler's tests.
 *
 *   cputest none        nothing: the profiler's own cost outside any
 *                       sampled time (start-up, exit, dump)
 *   cputest ratio       burn_three does 3 times the work of burn_one
 *   cputest ratio-timer HZ   ratio with a timer of its own sending an empty
 *                       handler HZ signals a second (the kernel's share of a
 *                       sample's cost, for bench/perf/sample_cost.py)
 *   cputest threads     two threads do the same work in thread_burn_a/_b;
 *                       prints the CPU time each took
 *   cputest afterjoin   a worker burns and exits; then main burns as much;
 *                       prints the CPU time each took
 *   cputest sleephalf   a thread spins 50 ms then sleeps 50 ms, 12 times
 *   cputest robust      own SIGPROF handler and ITIMER_PROF, blocked signals,
 *                       alarm, the profiler's own signal number, fork loop,
 *                       100 threads: prints what it saw (same under igprof)
 *   cputest usersys     user_burn loops in user space, sys_burn reads
 *                       /dev/zero (time in the kernel), about as long
 *   cputest mixed       alloc_some makes 1000 blocks of 100 bytes and
 *                       frees all but 10; burn_one burns 10 units and
 *                       prints the CPU time it took
 *   cputest execbusy P  a thread burns CPU while main execs P (no args)
 *   cputest execfail P  a thread sleeps 300 ms in one nanosleep while main
 *                       fails to exec P; prints how the sleep ended
 *   cputest forkkeep    burn_three(15), then a child burns burn_one(10)
 *                       (their CPU times into $CPUTEST_CPU_FILE)
 *   cputest bigfork     touches 256 MiB, then forks 10 children that exit;
 *                       prints the CPU time the forks took
 *   cputest allocloop   300000 malloc/free pairs in alloc_loop
 *   cputest enable      burns in burn_off with sampling disabled by
 *                       igprof_disable (if the runtime is there), then in
 *                       burn_on after igprof_enable
 *
 * Work is counted in loop iterations, never in time, except in sleephalf
 * where the split itself is wall-clock time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNIT 20000000L /* iterations in one unit of work (about 20-40 ms) */

static volatile unsigned long sink;

static __attribute__((noinline)) void spin(long n)
{
  unsigned long x = sink;
  for (long i = 0; i < n; ++i) x = x * 6364136223846793005UL + 1442695040888963407UL;
  sink = x;
}

/* Each burner runs its own loop, so its samples have it as frame 0. */
#define BURNER(name)                                                             \
  static __attribute__((noinline)) void name(long units)                         \
  {                                                                              \
    unsigned long x = sink;                                                      \
    for (long i = 0; i < units * UNIT; ++i) x = x * 6364136223846793005UL + 1;   \
    sink = x;                                                                    \
  }
BURNER(burn_one)
BURNER(burn_three)
BURNER(thread_burn_a)
BURNER(thread_burn_b)
BURNER(worker_burn)
BURNER(after_join)
BURNER(burn_off)
BURNER(burn_on)

static double thread_cpu(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints the CPU time each burner really took: on a loaded machine (or a VM
 * with stolen time) the same loop does not always cost the same. */
static __attribute__((noinline)) void ratio(void)
{
  double three = 0, one = 0;
  for (int i = 0; i < 3; ++i) {
    double t0 = thread_cpu();
    burn_three(9);
    double t1 = thread_cpu();
    burn_one(3);
    three += t1 - t0;
    one += thread_cpu() - t1;
  }
  printf("burn_three %.4f burn_one %.4f\n", three, one);
}

static volatile sig_atomic_t empty_hits;
static void on_empty(int sig) { (void) sig; empty_hits++; }

static void ratio_timer(long hz)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_empty;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGRTMIN + 3, &sa, NULL);
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGRTMIN + 3;
  sev._sigev_un._tid = gettid();
  timer_t t;
  if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0) abort();
  struct itimerspec its = {{0, 1000000000L / hz}, {0, 1000000000L / hz}};
  timer_settime(t, 0, &its, NULL);
  ratio();
  timer_delete(t);
  fprintf(stderr, "signals: %d\n", (int) empty_hits);
}

/* The thread burners report the CPU time their loop took (seconds in
 * *(double *) p): under load the same loop does not cost each thread the
 * same, and the samples must follow what it cost. */
static double timed_burn(void (*burner)(long), long units)
{
  double t0 = thread_cpu();
  burner(units);
  return thread_cpu() - t0;
}

static void *thread_a(void *p) { *(double *) p = timed_burn(thread_burn_a, 20); return NULL; }
static void *thread_b(void *p) { *(double *) p = timed_burn(thread_burn_b, 20); return NULL; }

static void threads(void)
{
  pthread_t a, b;
  double cpu_a = 0, cpu_b = 0;
  pthread_create(&a, NULL, thread_a, &cpu_a);
  pthread_create(&b, NULL, thread_b, &cpu_b);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("thread_burn_a %.4f thread_burn_b %.4f\n", cpu_a, cpu_b);
}

static void *worker(void *p) { *(double *) p = timed_burn(worker_burn, 20); return NULL; }

static void afterjoin(void)
{
  pthread_t w;
  double cpu_w = 0;
  pthread_create(&w, NULL, worker, &cpu_w);
  pthread_join(w, NULL);
  double cpu_m = timed_burn(after_join, 20);
  printf("worker_burn %.4f after_join %.4f\n", cpu_w, cpu_m);
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static __attribute__((noinline)) void spin_wall(double seconds)
{
  double end = now() + seconds;
  while (now() < end) spin(1000);
}

static __attribute__((noinline)) void sleep_wall(double seconds)
{
  struct timespec ts = {0, (long) (seconds * 1e9)};
  /* One call: under -pr it must not be cut short. */
  if (nanosleep(&ts, NULL) != 0) printf("nanosleep: %s\n", strerror(errno));
}

static double spun, slept; /* measured: a loaded machine stretches both */

static void *sleeper(void *p)
{
  (void) p;
  for (int i = 0; i < 12; ++i) {
    double t0 = now();
    spin_wall(0.05);
    double t1 = now();
    sleep_wall(0.05);
    spun += t1 - t0;
    slept += now() - t1;
  }
  return NULL;
}

static void sleephalf(void)
{
  pthread_t t;
  double t0 = now();
  pthread_create(&t, NULL, sleeper, NULL);
  pthread_join(t, NULL);
  printf("spin %.4f sleep %.4f join %.4f\n", spun, slept, now() - t0);
}

/* ---- robust ---------------------------------------------------------- */

static volatile sig_atomic_t prof_hits, alarm_hits, rt_hits;
static void on_prof(int sig) { (void) sig; prof_hits++; }
static void on_alarm(int sig) { (void) sig; alarm_hits++; }
static void on_rt(int sig, siginfo_t *si, void *uc) { (void) sig; (void) uc; if (si->si_value.sival_int == 42) rt_hits++; }

static void *count_thread(void *p) { spin(10000); return (void *) ((long) p * 2); }

static volatile sig_atomic_t plain_hits;
static void on_plain(int sig) { (void) sig; plain_hits++; }

/* A thread that blocks every signal with pthread_sigmask, then burns;
 * the CPU time its burner took in *(double *) p. */
static void *masked_thread(void *p)
{
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  *(double *) p = timed_burn(thread_burn_a, 12);
  return NULL;
}

static void robust(void)
{
  /* The application's own profiling timer and handler. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prof;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &it, NULL);
  while (prof_hits < 5) spin(100000);
  memset(&it, 0, sizeof it);
  setitimer(ITIMER_PROF, &it, NULL);
  printf("SIGPROF handler ran: %s\n", prof_hits >= 5 ? "yes" : "no");

  /* Every real-time signal but one gets a handler of the application's;
   * sigqueue to each must reach it. The sampler leaves each signal the
   * program takes, and ends on the one left (with none left it would stop:
   * tests/perf/progs/sigtest.c). */
  int rt_ok = 1;
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) {
    if (sig == SIGRTMIN + 10) continue;
    struct sigaction r, back;
    memset(&r, 0, sizeof r);
    r.sa_sigaction = on_rt;
    r.sa_flags = SA_SIGINFO;
    sigaction(sig, &r, NULL);
    sigaction(sig, NULL, &back);
    rt_hits = 0;
    sigqueue(getpid(), sig, (union sigval) {.sival_int = 42});
    if (rt_hits != 1 || back.sa_sigaction != on_rt) rt_ok = 0;
  }
  printf("real-time signals reach the application: %s\n", rt_ok ? "yes" : "no");
  signal(SIGRTMAX, on_plain);
  raise(SIGRTMAX);
  printf("signal() handler on SIGRTMAX ran: %d\n", (int) plain_hits);
  spin(5 * UNIT); /* sampling goes on with the application's handlers installed */

  /* Block everything for a while, then look at the mask it reads back. */
  sigset_t all, old, back;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  spin(3 * UNIT);
  sigprocmask(SIG_SETMASK, NULL, &back);
  printf("SIGUSR1 blocked: %s\n", sigismember(&back, SIGUSR1) ? "yes" : "no");
  sigprocmask(SIG_SETMASK, &old, NULL);

  /* Same work in a thread that blocked everything and in one that did not. */
  pthread_t masked;
  double masked_cpu = 0;
  pthread_create(&masked, NULL, masked_thread, &masked_cpu);
  pthread_join(masked, NULL);
  double unmasked_cpu = timed_burn(thread_burn_b, 12);

  /* alarm + pause. */
  signal(SIGALRM, on_alarm);
  alarm(1);
  while (!alarm_hits) pause();
  printf("alarm: %d\n", (int) alarm_hits);

  /* fork in a loop; every child does some work and exits with its number. */
  /* Each child also tells, through a pipe, the CPU time its work took
   * (its whole CPU time, from wait4, holds its exit too). */
  int sum = 0;
  pid_t kid_pid[20];
  double kid_cpu[20], kid_work[20];
  int work_pipe[2];
  if (pipe(work_pipe) != 0) abort();
  for (int i = 0; i < 20; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      double t0 = thread_cpu();
      spin(UNIT);
      double work = thread_cpu() - t0;
      if (write(work_pipe[1], &work, sizeof work) != sizeof work) _exit(100);
      _exit(i);
    }
    int st;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
      ;
    if (WIFEXITED(st)) sum += WEXITSTATUS(st);
    kid_pid[i] = pid;
    kid_cpu[i] = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    kid_work[i] = 0;
    while (read(work_pipe[0], &kid_work[i], sizeof kid_work[i]) < 0 && errno == EINTR)
      ;
  }
  close(work_pipe[0]);
  close(work_pipe[1]);
  printf("children: sum of exit statuses %d\n", sum);

  /* 100 threads started and joined. */
  long total = 0;
  for (int round = 0; round < 10; ++round) {
    pthread_t t[10];
    for (long i = 0; i < 10; ++i) pthread_create(&t[i], NULL, count_thread, (void *) (round * 10 + i));
    for (int i = 0; i < 10; ++i) {
      void *r;
      pthread_join(t[i], &r);
      total += (long) r;
    }
  }
  printf("threads: %ld\n", total);
  fflush(stdout);
  /* CPU time the kernel accounted, for the test to compare with samples. */
  const char *cpu_file = getenv("CPUTEST_CPU_FILE");
  FILE *f = cpu_file ? fopen(cpu_file, "w") : NULL;
  if (f) {
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    fprintf(f, "%.6f %.6f %.6f %.6f\n", self.ru_utime.tv_sec + self.ru_utime.tv_usec / 1e6 + self.ru_stime.tv_sec +
            self.ru_stime.tv_usec / 1e6, kids.ru_utime.tv_sec + kids.ru_utime.tv_usec / 1e6 +
            kids.ru_stime.tv_sec + kids.ru_stime.tv_usec / 1e6, masked_cpu, unmasked_cpu);
    for (int i = 0; i < 20; ++i) fprintf(f, "%ld %.6f %.6f\n", (long) kid_pid[i], kid_cpu[i], kid_work[i]);
    fclose(f);
  }
  exit(7);
}

/* ---- user / system, memory + CPU ------------------------------------ */

static __attribute__((noinline)) void user_burn(void) { spin(20 * UNIT); }

static __attribute__((noinline)) void sys_burn(void)
{
  static char buf[1 << 20];
  FILE *f = fopen("/dev/zero", "r");
  int fd = fileno(f);
  for (int i = 0; i < 16000; ++i)
    if (read(fd, buf, sizeof buf) != (ssize_t) sizeof buf) abort();
  fclose(f);
}

static double thread_cpu(void);

static void usersys(void)
{
  double t0 = thread_cpu();
  user_burn();
  double t1 = thread_cpu();
  sys_burn();
  printf("user_burn %.4f sys_burn %.4f\n", t1 - t0, thread_cpu() - t1);
}

static __attribute__((noinline)) void alloc_some(void)
{
  static void *blocks[1000];
  for (int i = 0; i < 1000; ++i) blocks[i] = malloc(100);
  for (int i = 10; i < 1000; ++i) free(blocks[i]);
}

static __attribute__((noinline)) void alloc_loop(void)
{
  for (int i = 0; i < 300000; ++i) {
    void *p = malloc(64 + i % 64);
    sink += (unsigned long) p;
    free(p);
  }
}

static void mixed(void)
{
  alloc_some();
  printf("burn_one %.4f\n", timed_burn(burn_one, 10));
}

/* ---- exec and fork under load ------------------------------------- */

static void *busy(void *p) { (void) p; for (;;) spin(UNIT); return NULL; }

static void execbusy(const char *prog)
{
  pthread_t t;
  pthread_create(&t, NULL, busy, NULL);
  spin(UNIT / 2);
  execl(prog, prog, (char *) NULL);
  perror("execl");
  exit(126);
}

static void *long_sleep(void *p)
{
  (void) p;
  struct timespec ts = {0, 300000000L};
  int rc = nanosleep(&ts, NULL);
  printf("nanosleep: %s\n", rc == 0 ? "slept" : strerror(errno));
  return NULL;
}

static void execfail(const char *prog)
{
  pthread_t t;
  pthread_create(&t, NULL, long_sleep, NULL);
  struct timespec ts = {0, 50000000L};
  nanosleep(&ts, NULL);
  execl(prog, prog, (char *) NULL);
  printf("exec: %s\n", strerror(errno));
  fflush(stdout);
  pthread_join(t, NULL);
}

static void forkkeep(void)
{
  const char *cpu_file = getenv("CPUTEST_CPU_FILE");
  double three = timed_burn(burn_three, 15);
  pid_t pid = fork();
  if (pid == 0) {
    double one = timed_burn(burn_one, 10);
    FILE *f = cpu_file ? fopen(cpu_file, "w") : NULL;
    if (f) fprintf(f, "burn_one %.6f ", one), fclose(f);
    exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  FILE *f = cpu_file ? fopen(cpu_file, "a") : NULL;
  if (f) fprintf(f, "burn_three %.6f\n", three), fclose(f);
  printf("child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Its own frame, so the time fork takes has a leaf of its own. */
static __attribute__((noinline)) pid_t do_fork(void) { return fork(); }

static void bigfork(void)
{
  size_t size = 256u << 20;
  char *mem = malloc(size);
  if (!mem) abort();
  for (size_t i = 0; i < size; i += 4096) mem[i] = (char) i;
  int ok = 0;
  double in_fork = 0;
  for (int i = 0; i < 10; ++i) {
    double t0 = thread_cpu();
    pid_t pid = do_fork();
    if (pid == 0) _exit(mem[(size_t) i * 4096] == (char) (i * 4096) ? 0 : 1);
    in_fork += thread_cpu() - t0;
    int st;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) ++ok;
  }
  printf("forks: %d\nCPU in fork: %.4f\n", ok, in_fork);
}

/* ---- enable / disable ------------------------------------------------- */

static void enable(void)
{
  int (*off)(void) = (int (*)(void)) dlsym(RTLD_DEFAULT, "igprof_disable");
  void (*on)(void) = (void (*)(void)) dlsym(RTLD_DEFAULT, "igprof_enable");
  printf("API: %s\n", off && on ? "found" : "missing");
  if (off) printf("igprof_disable: was %d\n", off());
  burn_off(10);
  if (on) on();
  burn_on(10);
}

int main(int argc, char **argv)
{
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "ratio")) ratio();
  else if (!strcmp(what, "ratio-timer") && argc > 2) ratio_timer(atol(argv[2]));
  else if (!strcmp(what, "threads")) threads();
  else if (!strcmp(what, "afterjoin")) afterjoin();
  else if (!strcmp(what, "sleephalf")) sleephalf();
  else if (!strcmp(what, "robust")) robust();
  else if (!strcmp(what, "enable")) enable();
  else if (!strcmp(what, "usersys")) usersys();
  else if (!strcmp(what, "mixed")) mixed();
  else if (!strcmp(what, "allocloop")) alloc_loop();
  else if (!strcmp(what, "execbusy") && argc > 2) execbusy(argv[2]);
  else if (!strcmp(what, "bigfork")) bigfork();
  else if (!strcmp(what, "forkkeep")) forkkeep();
  else if (!strcmp(what, "execfail") && argc > 2) execfail(argv[2]);
  else if (!strcmp(what, "none")) return 0;
  else {
    fprintf(stderr, "usage: cputest none|ratio|ratio-timer HZ|threads|afterjoin|sleephalf|robust|usersys|mixed|allocloop|execbusy PROG|execfail PROG|forkkeep|bigfork|enable\n");
    return 2;
  }
  return 0;
}
