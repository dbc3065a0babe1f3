/* Call-through test for the functions libigprof.so hooks first: the
 * malloc family, process control (fork, _exit, exit, execve), threads,
 * dlopen and sigaction. Each replacement counts the calls that carry a
 * marker argument and then runs the original through its chain; each check
 * asserts both the count and the original's result. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "check.h"
#include "hook.h"

/* The version glibc gave its first symbols on this target (malloc's). */
#if defined(__x86_64__)
#define GLIBC_BASE_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE_VERSION "GLIBC_2.17"
#elif defined(__i386__)
#define GLIBC_BASE_VERSION "GLIBC_2.0"
#elif defined(__arm__)
#define GLIBC_BASE_VERSION "GLIBC_2.4"
#else
#error "the first glibc symbol version of this target"
#endif

#define MARK 12345u /* a size no library code here allocates */

#define DECLARE(name) \
  static struct hook_result name##_hook; \
  static atomic_int name##_calls

DECLARE(malloc); DECLARE(calloc); DECLARE(realloc); DECLARE(free); DECLARE(posix_memalign);
DECLARE(memalign); DECLARE(aligned_alloc); DECLARE(valloc); DECLARE(pvalloc); DECLARE(fork);
DECLARE(_exit); DECLARE(exit); DECLARE(execve); DECLARE(pthread_create); DECLARE(dlopen);
DECLARE(sigaction);

static void *marked_block;

/* every allocation made by this thread, for the no-allocation check */
static _Thread_local long thread_allocations;

static void *my_malloc(size_t n)
{
  thread_allocations++;
  if (n == MARK) malloc_calls++;
  return ((void *(*)(size_t))malloc_hook.chain)(n);
}
static void *my_calloc(size_t n, size_t m)
{
  thread_allocations++;
  if (n * m == MARK) calloc_calls++;
  return ((void *(*)(size_t, size_t))calloc_hook.chain)(n, m);
}
static void *my_realloc(void *p, size_t n)
{
  thread_allocations++;
  if (n == MARK) realloc_calls++;
  return ((void *(*)(void *, size_t))realloc_hook.chain)(p, n);
}
static void my_free(void *p)
{
  if (p && p == marked_block) free_calls++;
  ((void (*)(void *))free_hook.chain)(p);
}
static int my_posix_memalign(void **p, size_t a, size_t n)
{
  if (n == MARK) posix_memalign_calls++;
  return ((int (*)(void **, size_t, size_t))posix_memalign_hook.chain)(p, a, n);
}
static void *my_memalign(size_t a, size_t n)
{
  if (n == MARK) memalign_calls++;
  if (n == MARK * 2) aligned_alloc_calls++; /* glibc: aligned_alloc is memalign */
  return ((void *(*)(size_t, size_t))memalign_hook.chain)(a, n);
}
static void *my_aligned_alloc(size_t a, size_t n)
{
  if (n == MARK * 2) aligned_alloc_calls++;
  return ((void *(*)(size_t, size_t))aligned_alloc_hook.chain)(a, n);
}
static void *my_valloc(size_t n)
{
  if (n == MARK) valloc_calls++;
  return ((void *(*)(size_t))valloc_hook.chain)(n);
}
static void *my_pvalloc(size_t n)
{
  if (n == MARK) pvalloc_calls++;
  return ((void *(*)(size_t))pvalloc_hook.chain)(n);
}
static pid_t my_fork(void)
{
  fork_calls++;
  return ((pid_t(*)(void))fork_hook.chain)();
}
/* The exit replacements add 10 to the status: the parent sees that the
 * replacement ran (status+10) and that the original ran (the process exited). */
static void my__exit(int status)
{
  _exit_calls++;
  ((void (*)(int))_exit_hook.chain)(status + 10);
  __builtin_unreachable();
}
static void my_exit(int status)
{
  exit_calls++;
  ((void (*)(int))exit_hook.chain)(status + 10);
  __builtin_unreachable();
}
static int my_execve(const char *path, char *const argv[], char *const envp[])
{
  execve_calls++;
  char *const changed[] = {"sh", "-c", "exit 9", NULL};
  (void)argv;
  return ((int (*)(const char *, char *const[], char *const[]))execve_hook.chain)(path, changed,
                                                                                   envp);
}
static int my_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
  pthread_create_calls++;
  return ((int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
              pthread_create_hook.chain)(t, a, fn, arg);
}
static void *my_dlopen(const char *name, int flags)
{
  if (name && (strstr(name, "libz.so") || strstr(name, "libnothing")))
    dlopen_calls++;
  return ((void *(*)(const char *, int))dlopen_hook.chain)(name, flags);
}
static int my_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
  if (sig == SIGUSR1) sigaction_calls++;
  return ((int (*)(int, const struct sigaction *, struct sigaction *))sigaction_hook.chain)(
      sig, act, old);
}

static void install(const char *name, void *replacement, struct hook_result *r)
{
  struct hook_spec spec = {name, NULL, NULL, replacement};
  enum hook_status st = hook_install(&spec, r);
  if (st != HOOK_OK)
    fprintf(stderr, "hook %s: %s: %s\n", name, hook_status_str(st), r->detail);
  CHECK_EQ_LONG(st, HOOK_OK);
  CHECK(r->chain != NULL && r->original != NULL && r->patched_bytes >= arch_patch_size_near());
}

static void test_memory(void)
{
  char *p = malloc(MARK);
  CHECK(p != NULL);
  CHECK_EQ_LONG(malloc_calls, 1);
  memset(p, 'x', MARK);
  marked_block = p;
  free(p);
  CHECK_EQ_LONG(free_calls, 1);
  marked_block = NULL;

  char *c = calloc(MARK / 5, 5);
  CHECK(c != NULL && c[0] == 0 && c[MARK - 1] == 0);
  CHECK_EQ_LONG(calloc_calls, 1);
  char *r = realloc(c, MARK);
  CHECK(r != NULL && r[MARK / 2] == 0);
  CHECK_EQ_LONG(realloc_calls, 1);
  free(r);

  void *a = NULL;
  CHECK_EQ_LONG(posix_memalign(&a, 256, MARK), 0);
  CHECK(a != NULL && ((uintptr_t)a & 255) == 0);
  CHECK_EQ_LONG(posix_memalign_calls, 1);
  /* the original's error contract passes through unchanged */
  CHECK_EQ_LONG(posix_memalign(&a, 3, MARK), EINVAL);
  CHECK_EQ_LONG(posix_memalign_calls, 2);
  free(a);

  void *m = memalign(128, MARK);
  CHECK(m != NULL && ((uintptr_t)m & 127) == 0);
  CHECK_EQ_LONG(memalign_calls, 1);
  free(m);
  void *al = aligned_alloc(64, MARK * 2);
  CHECK(al != NULL && ((uintptr_t)al & 63) == 0);
  CHECK_EQ_LONG(aligned_alloc_calls, 1);
  free(al);
  long page = sysconf(_SC_PAGESIZE);
  void *v = valloc(MARK);
  CHECK(v != NULL && ((uintptr_t)v & (uintptr_t)(page - 1)) == 0);
  CHECK_EQ_LONG(valloc_calls, 1);
  free(v);
  void *pv = pvalloc(MARK);
  CHECK(pv != NULL && ((uintptr_t)pv & (uintptr_t)(page - 1)) == 0);
  CHECK(malloc_usable_size(pv) >= (size_t)((MARK + page - 1) / page * page));
  CHECK_EQ_LONG(pvalloc_calls, 1);
  free(pv);
}

static int child_status(pid_t pid)
{
  int status = 0;
  CHECK_EQ_LONG(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + status;
}

static void test_processes(void)
{
  pid_t pid = fork();
  if (pid == 0)
    _exit(fork_calls == 1 ? 3 : 4); /* the child sees the count of its own fork */
  CHECK(pid > 0);
  CHECK_EQ_LONG(fork_calls, 1);
  CHECK_EQ_LONG(child_status(pid), 13);

  pid = fork();
  if (pid == 0)
    exit(2);
  /* exit's replacement adds 10, and exit ends in _exit, whose replacement adds 10 */
  CHECK_EQ_LONG(child_status(pid), 22);

  pid = fork();
  if (pid == 0) {
    char *const argv[] = {"sh", "-c", "exit 5", NULL};
    execve("/bin/sh", argv, environ);
    _exit(99);
  }
  CHECK_EQ_LONG(child_status(pid), 9);
  CHECK_EQ_LONG(fork_calls, 3);
}

static void *thread_main(void *arg) { return (char *)arg + 1; }

static volatile sig_atomic_t usr1_seen;
static void on_usr1(int sig) { usr1_seen = sig; }

static void test_threads_dl_signals(void)
{
  pthread_t t;
  static char base[2];
  CHECK_EQ_LONG(pthread_create(&t, NULL, thread_main, base), 0);
  void *ret = NULL;
  CHECK_EQ_LONG(pthread_join(t, &ret), 0);
  CHECK(ret == base + 1);
  CHECK_EQ_LONG(pthread_create_calls, 1);

  void *z = dlopen("libz.so.1", RTLD_NOW);
  CHECK(z != NULL);
  CHECK(z && dlsym(z, "zlibVersion") != NULL);
  CHECK_EQ_LONG(dlopen_calls, 1);
  CHECK(dlopen("/nonexistent/libnothing.so", RTLD_NOW) == NULL);
  CHECK_EQ_LONG(dlopen_calls, 2);

  struct sigaction sa = {0};
  sa.sa_handler = on_usr1;
  CHECK_EQ_LONG(sigaction(SIGUSR1, &sa, NULL), 0);
  CHECK_EQ_LONG(sigaction_calls, 1);
  raise(SIGUSR1);
  CHECK_EQ_LONG(usr1_seen, SIGUSR1);
}

static void test_already_hooked(void)
{
  struct hook_result again;
  memset(&again, 0, sizeof again);
  struct hook_spec spec = {"malloc", NULL, NULL, (void *)my_calloc};
  CHECK_EQ_LONG(hook_install(&spec, &again), HOOK_ERR_ALREADY_HOOKED);
  CHECK(again.chain == malloc_hook.chain);
  CHECK(again.original == malloc_hook.original);
  /* the same function through a library and version */
  struct hook_spec versioned = {"malloc", GLIBC_BASE_VERSION, "libc.so.6", (void *)my_calloc};
  memset(&again, 0, sizeof again);
  CHECK_EQ_LONG(hook_install(&versioned, &again), HOOK_ERR_ALREADY_HOOKED);
  CHECK(again.chain == malloc_hook.chain);
  /* a second module calling through the returned chain reaches the original */
  void *p = ((void *(*)(size_t))again.chain)(MARK);
  CHECK(p != NULL);
  CHECK_EQ_LONG(malloc_calls, 1); /* the chain bypasses the replacement */
  free(p);
}

/* Invariant 1 of design.md: installing a hook allocates nothing from libc
 * (malloc, calloc and realloc are hooked and counting by now). */
static __attribute__((noinline)) long later_target(long n)
{
  long s = 0;
  for (long i = 0; i < n; i++)
    s += i ^ (s >> 3);
  return s;
}
static struct hook_result later_hook;
static long later_replacement(long n) { return ((long (*)(long))later_hook.chain)(n) + 1; }

static void test_no_allocation(void)
{
  long expected = later_target(100);
  /* a pending dlerror() message of the application survives the install */
  CHECK(dlopen("/nonexistent/libmarker.so", RTLD_NOW) == NULL);
  long before = thread_allocations;
  /* by name: lookup through dlsym and the executable's .symtab, sizing,
   * trampoline pool, relocation, branch scan, patch */
  struct hook_spec spec = {"later_target", NULL, NULL, (void *)later_replacement};
  CHECK_EQ_LONG(hook_install(&spec, &later_hook), HOOK_OK);
  struct hook_result again;
  CHECK_EQ_LONG(hook_install(&spec, &again), HOOK_ERR_ALREADY_HOOKED);
  CHECK_EQ_LONG(thread_allocations - before, 0);
  const char *err = dlerror();
  CHECK(err && strstr(err, "libmarker.so"));
  long (*volatile call)(long) = later_target;
  CHECK_EQ_LONG(call(100), expected + 1);
}

int main(void)
{
  install("malloc", (void *)my_malloc, &malloc_hook);
  install("calloc", (void *)my_calloc, &calloc_hook);
  install("realloc", (void *)my_realloc, &realloc_hook);
  install("free", (void *)my_free, &free_hook);
  install("posix_memalign", (void *)my_posix_memalign, &posix_memalign_hook);
  install("memalign", (void *)my_memalign, &memalign_hook);
  if (hook_lookup("aligned_alloc", NULL, NULL, NULL) == memalign_hook.original) {
    /* one function under two names: the second install must say so and hand
     * back the existing chain */
    struct hook_spec spec = {"aligned_alloc", NULL, NULL, (void *)my_aligned_alloc};
    CHECK_EQ_LONG(hook_install(&spec, &aligned_alloc_hook), HOOK_ERR_ALREADY_HOOKED);
    CHECK(aligned_alloc_hook.chain == memalign_hook.chain);
  } else {
    install("aligned_alloc", (void *)my_aligned_alloc, &aligned_alloc_hook);
  }
  install("valloc", (void *)my_valloc, &valloc_hook);
  install("pvalloc", (void *)my_pvalloc, &pvalloc_hook);
  install("fork", (void *)my_fork, &fork_hook);
  install("_exit", (void *)my__exit, &_exit_hook);
  install("exit", (void *)my_exit, &exit_hook);
  install("execve", (void *)my_execve, &execve_hook);
  install("pthread_create", (void *)my_pthread_create, &pthread_create_hook);
  install("dlopen", (void *)my_dlopen, &dlopen_hook);
  install("sigaction", (void *)my_sigaction, &sigaction_hook);
  if (check_failures)
    return check_report("hook.runtime_hooks");

  test_memory();
  test_no_allocation();
  test_already_hooked();
  test_threads_dl_signals();
  test_processes();
  int rc = check_report("hook.runtime_hooks");
  /* exit and _exit are still hooked (they add 10): leave through the chain */
  fflush(stdout);
  ((void (*)(int))_exit_hook.chain)(rc);
}
