/* Process-lifecycle hooks (design.md §3.4, §3.5): every way a process
 * ends writes its dump, a forked child gets its own, threads get their
 * state, exec leaves nothing armed behind, libraries loaded later are seen.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "walk.h"
#include "../arch/context.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FOR_EACH_MODULE(m)                                                              \
  for (struct igprof_module *const *m##_it = igprof_modules_begin(), *m;                \
       m##_it < igprof_modules_end() && ((m = *m##_it), 1); ++m##_it)                   \
    if (m && m->enabled)

/* ---------------------------------------------------------------- */
/* Process end                                                       */
/* ---------------------------------------------------------------- */

static void (*real__exit)(int);

static void at_exit(void)
{
  igprof_tls.guard = IGPROF_GUARD_BUSY;
  igprof_final_dump("exit");
  /* The rest of exit (the program's earlier atexit handlers, stdio) is the
   * program's: hooks pass through, and a signal ends it as it would. */
  igprof_tls.guard = IGPROF_GUARD_THROUGH;
  if (igprof_tls.deferred.pending) igprof_signals_redeliver();
}

static void hook__exit(int status)
{
  /* A vfork/posix_spawn child shares our memory: it must not dump. */
  if (igprof_is_own_process() && igprof_enter()) {
    igprof_final_dump("_exit");
    igprof_tls.guard = IGPROF_GUARD_THROUGH; /* a signal held back during the dump ends it */
    if (igprof_tls.deferred.pending) igprof_signals_redeliver();
  }
  real__exit(status);
  __builtin_unreachable();
}

/* A fault of the profiler's own: where, for the bug report (the PC as an
 * offset into libigprof.so when it is there, for addr2line). */
static void report_own_fault(int sig, const siginfo_t *si, const void *uc)
{
  extern const char __ehdr_start[] __attribute__((visibility("hidden")));
  extern const char __etext[] __attribute__((visibility("hidden"), weak));
  const char *name = sigabbrev_np(sig) ? sigabbrev_np(sig) : "fault";
  uintptr_t pc = uc ? context_pc(uc) : 0, base = (uintptr_t) __ehdr_start;
  uintptr_t end = __etext ? (uintptr_t) __etext : base;
  void *addr = si && (sig == SIGSEGV || sig == SIGBUS) ? si->si_addr : NULL;
  if (pc >= base && pc < end)
    igprof_warn("%s inside the profiler itself (libigprof.so+0x%lx, address %p): no dump written",
                name, (unsigned long) (pc - base), addr);
  else
    igprof_warn("%s inside the profiler itself (pc 0x%lx, address %p): no dump written", name,
                (unsigned long) pc, addr);
}

static enum igprof_signal_result on_fatal_signal(int sig, siginfo_t *si, void *uc,
                                                 const struct sigaction *app)
{
  /* The application's handler decides; if it ends the process through
   * exit/_exit/abort we dump there. A fault inside the profiler itself
   * (guard held) must not re-enter it. */
  if (app->sa_handler != SIG_DFL && app->sa_handler != SIG_IGN) return IGPROF_SIGNAL_CHAIN;
  /* Ignored stays ignored, except a fault the kernel raised: that kills. */
  int fault = (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP) &&
              si && si->si_code > 0;
  if (app->sa_handler == SIG_IGN && !fault) return IGPROF_SIGNAL_CHAIN;
  /* BUSY here means a fault inside the profiler's own work (a signal sent
   * to the process waits for the work to end, see the dispatcher): it may
   * hold a lock the dump needs, so the process dies without one. */
  if (igprof_tls.guard == IGPROF_GUARD_BUSY) {
    if (atomic_load(&igprof_state.active))
      report_own_fault(sig, si, uc);
    return IGPROF_SIGNAL_CHAIN;
  }
  igprof_tls.guard = IGPROF_GUARD_BUSY;
  igprof_mem_settle();
  igprof_final_dump(sigabbrev_np(sig) ? sigabbrev_np(sig) : "fatal signal");
  /* the process is about to die: nothing of the profiler runs again */
  igprof_tls.guard = IGPROF_GUARD_THROUGH;
  return IGPROF_SIGNAL_CHAIN;
}

/* ---------------------------------------------------------------- */
/* exec                                                              */
/* ---------------------------------------------------------------- */

static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execveat)(int, const char *, char *const[], char *const[], int);

/* `path` names no executable file: this exec will fail, so it must not
 * cost a dump (execvp and env try every PATH entry in turn). */
static int exec_cannot_succeed(int dirfd, const char *path, int flags)
{
  struct stat st;
  if (flags & AT_EMPTY_PATH && path && !path[0]) return 0; /* fexecve: the fd decides */
  if (!path || fstatat(dirfd, path, &st, flags & AT_SYMLINK_NOFOLLOW) != 0) return 1;
  return !S_ISREG(st.st_mode) || faccessat(dirfd, path, X_OK, AT_EACCESS) != 0;
}

static int exec_prepare(int dirfd, const char *path, int flags)
{
  if (!igprof_is_own_process() || !atomic_load(&igprof_state.active)) return 0;
  if (exec_cannot_succeed(dirfd, path, flags) || !igprof_enter()) return 0;
  FOR_EACH_MODULE(m) if (m->before_exec) m->before_exec();
  igprof_final_dump("exec");
  igprof_signals_before_exec();
  /* The exec itself is the program's: a signal arriving now must act now,
   * not wait for an exec that would make it vanish. */
  igprof_through_begin();
  if (igprof_tls.deferred.pending) igprof_signals_redeliver();
  return 1;
}

static void exec_failed(int prepared)
{
  if (!prepared) return;
  int saved = errno;
  igprof_through_end();
  igprof_signals_exec_failed();
  FOR_EACH_MODULE(m) if (m->exec_failed) m->exec_failed();
  atomic_store(&igprof_state.active, 1);
  igprof_debug("exec failed (errno %d); profiling goes on", saved);
  igprof_leave();
  errno = saved;
}

static int hook_execve(const char *path, char *const argv[], char *const envp[])
{
  int saved = errno;
  int prepared = exec_prepare(AT_FDCWD, path, 0);
  errno = saved;
  int rc = real_execve(path, argv, envp);
  exec_failed(prepared);
  return rc;
}

static int hook_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
  int saved = errno;
  int prepared = exec_prepare(dirfd, path, flags);
  errno = saved;
  int rc = real_execveat(dirfd, path, argv, envp, flags);
  exec_failed(prepared);
  return rc;
}

/* ---------------------------------------------------------------- */
/* fork                                                              */
/* ---------------------------------------------------------------- */

static int fork_entered;

static void fork_prepare(void)
{
  fork_entered = igprof_enter();
  /* Reverse order of the child/parent handlers. */
  struct igprof_module *const *b = igprof_modules_begin(), *const *e = igprof_modules_end();
  for (struct igprof_module *const *m = e; m-- > b;)
    if (*m && (*m)->enabled && (*m)->fork_prepare) (*m)->fork_prepare();
  igprof_dump_fork_prepare();
  igprof_live_fork_prepare();
}

static void fork_parent(void)
{
  igprof_live_fork_parent();
  igprof_dump_fork_parent();
  FOR_EACH_MODULE(m) if (m->fork_parent) m->fork_parent();
  if (fork_entered) igprof_leave();
}

static void fork_child(void)
{
  igprof_signals_fork_child(); /* signals held back during fork were the parent's */
  igprof_state.pid = (pid_t) syscall(SYS_getpid);
  atomic_store(&igprof_threaded, 0); /* the child has only the thread that forked */
  igprof_live_fork_child();
  igprof_dump_fork_child();
  FOR_EACH_MODULE(m) if (m->fork_child) m->fork_child();
  igprof_dumper_fork_child();
  igprof_debug("forked child of %s: profiling on its own", igprof_state.program);
  if (fork_entered) igprof_leave();
}

/* ---------------------------------------------------------------- */
/* Threads                                                           */
/* ---------------------------------------------------------------- */

static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static pthread_key_t thread_key;

struct thread_start {
  void *(*fn)(void *);
  void *arg;
  struct thread_start *next;
};

static struct thread_start *_Atomic start_free;
static atomic_flag start_lock = ATOMIC_FLAG_INIT;

static struct thread_start *start_get(void)
{
  while (atomic_flag_test_and_set(&start_lock)) sched_yield();
  struct thread_start *s = start_free;
  if (s) start_free = s->next;
  atomic_flag_clear(&start_lock);
  return s ? s : igprof_arena_alloc(sizeof *s);
}

static void start_put(struct thread_start *s)
{
  while (atomic_flag_test_and_set(&start_lock)) sched_yield();
  s->next = start_free;
  start_free = s;
  atomic_flag_clear(&start_lock);
}

static void thread_exit(void *value)
{
  (void) value;
  int entered = igprof_enter();
  FOR_EACH_MODULE(m) if (m->thread_exit) m->thread_exit();
  igprof_altstack_thread_exit();
  if (entered) igprof_leave();
}

static void *thread_trampoline(void *p)
{
  struct thread_start *s = p;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  igprof_tls.guard = 1;
  start_put(s);
  igprof_thread_prepare();
  igprof_altstack_thread_start();
  igprof_walk_thread_init();
  pthread_setspecific(thread_key, (void *) 1);
  FOR_EACH_MODULE(m) if (m->thread_start) m->thread_start();
  igprof_tls.guard = 0;
  return fn(arg);
}

static int hook_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
  igprof_note_threads(); /* before the thread exists: counters go atomic */
  if (!atomic_load(&igprof_state.active) || !igprof_enter())
    return real_pthread_create(t, attr, fn, arg);
  struct thread_start *s = start_get();
  igprof_leave();
  if (!s) return real_pthread_create(t, attr, fn, arg);
  s->fn = fn;
  s->arg = arg;
  int rc = real_pthread_create(t, attr, thread_trampoline, s);
  if (rc != 0) start_put(s);
  return rc;
}

/* ---------------------------------------------------------------- */
/* dlopen / dlclose                                                  */
/* ---------------------------------------------------------------- */

static void *(*real_dlopen)(const char *, int);
static int (*real_dlclose)(void *);

/* Load biases of the modules seen so far: a dlopen that maps new ones
 * (the library and its dependencies) tells the modules about each. */
#define MAX_MODULES 2048
#define MAX_NEW 64
static uintptr_t known[MAX_MODULES];
static int known_count;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

struct module_scan {
  uintptr_t seen[MAX_MODULES];
  int seen_count, fresh_count;
  char fresh[MAX_NEW][256];
};

static struct module_scan scan; /* under known_lock; too big for a thread's stack */

static int scan_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  struct module_scan *s = arg;
  if (s->seen_count < MAX_MODULES) s->seen[s->seen_count++] = info->dlpi_addr;
  for (int i = 0; i < known_count; ++i)
    if (known[i] == info->dlpi_addr) return 0;
  if (info->dlpi_name && info->dlpi_name[0] && s->fresh_count < MAX_NEW)
    igprof_format(s->fresh[s->fresh_count++], sizeof s->fresh[0], "%s", info->dlpi_name);
  return 0;
}

/* Rescan the loaded modules; with `notify`, call library_loaded for new ones. */
static void modules_rescan(int notify)
{
  pthread_mutex_lock(&known_lock);
  scan.seen_count = scan.fresh_count = 0;
  dl_iterate_phdr(scan_module, &scan);
  for (int i = 0; i < scan.seen_count; ++i) known[i] = scan.seen[i];
  known_count = scan.seen_count;
  if (notify)
    for (int i = 0; i < scan.fresh_count; ++i) {
      igprof_debug("new module %s", scan.fresh[i]);
      FOR_EACH_MODULE(m) if (m->library_loaded) m->library_loaded(scan.fresh[i]);
    }
  pthread_mutex_unlock(&known_lock);
}

static void *hook_dlopen(const char *file, int flags)
{
  void *h = real_dlopen(file, flags);
  if (h && atomic_load(&igprof_state.active) && igprof_enter()) {
    int saved = errno;
    igprof_walk_modules_changed();
    modules_rescan(1);
    dlerror(); /* our lookups must not leave an error for the application to find */
    errno = saved;
    igprof_leave();
  }
  return h;
}

static int hook_dlclose(void *h)
{
  /* The walker keeps away from module memory from here until the table is
   * rebuilt (igprof_walk_modules_changing and _closed are paired). */
  int tracked = atomic_load(&igprof_state.active) && igprof_enter();
  if (tracked) {
    igprof_walk_modules_changing();
    igprof_leave();
  }
  int rc = real_dlclose(h);
  if (tracked) {
    int entered = igprof_enter();
    int saved = errno;
    igprof_walk_modules_closed();
    modules_rescan(0);
    errno = saved;
    if (entered) igprof_leave();
  }
  return rc;
}

/* ---------------------------------------------------------------- */
/* Start                                                             */
/* ---------------------------------------------------------------- */

int igprof_lifecycle_start(void)
{
  /* Every signal whose default action ends the process, so that a program
   * killed by Ctrl-C, SIGTERM or SIGPIPE in a pipeline still leaves its dump.
   * SIGPROF and SIGVTALRM are left to a sampler; real-time signals to the
   * application. */
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS,
                              SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGALRM, SIGUSR1,
                              SIGUSR2, SIGXCPU, SIGXFSZ, SIGSTKFLT, SIGPWR};
  pthread_key_create(&thread_key, thread_exit);
  pthread_setspecific(thread_key, (void *) 1);
  atexit(at_exit);
  pthread_atfork(fork_prepare, fork_parent, fork_child);

  real__exit = igprof_hook("core", "_exit", (void *) hook__exit, 1);
  if (!real__exit) real__exit = _exit;
  /* glibc's _Exit is the same function as _exit: one hook serves both. */
  void *e = igprof_hook("core", "_Exit", (void *) hook__exit, 0);
  (void) e;
  real_execve = igprof_hook("core", "execve", (void *) hook_execve, 1);
  if (!real_execve) real_execve = execve;
  real_execveat = igprof_hook("core", "execveat", (void *) hook_execveat, 0);
  if (!real_execveat) real_execveat = execveat;
  real_pthread_create = igprof_hook("core", "pthread_create", (void *) hook_pthread_create, 1);
  if (!real_pthread_create) real_pthread_create = pthread_create;
  real_dlopen = igprof_hook("core", "dlopen", (void *) hook_dlopen, 0);
  if (!real_dlopen) real_dlopen = dlopen;
  real_dlclose = igprof_hook("core", "dlclose", (void *) hook_dlclose, 0);
  if (!real_dlclose) real_dlclose = dlclose;

  modules_rescan(0);
  igprof_signals_start();
  igprof_altstack_start();
  for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; ++i) {
    if (igprof_signal_own(fatal[i], on_fatal_signal, 0) != 0)
      igprof_warn("cannot watch signal %d: errno %d", fatal[i], errno);
    igprof_signal_defer_while_busy(fatal[i]);
  }
  return igprof_dumper_start();
}
