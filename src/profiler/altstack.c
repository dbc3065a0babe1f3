/* A signal stack for every thread that has none (design.md §3.5: dumps are
 * never lost). A thread that overflows its stack gets SIGSEGV, and without
 * an alternate signal stack the kernel cannot even start the handler that
 * writes the dump: it kills the process outright. So each thread the
 * runtime sees (the main thread at start-up, every thread through the
 * pthread_create hook) gets one, unless the program gave it its own.
 *
 * The program keeps its own view: sigaltstack() reports "disabled" while
 * only ours is installed, a stack the program sets replaces ours, and when
 * it disables its stack again ours goes back in. Only the signals the
 * runtime owns without a program handler run on ours (signals.c: a program
 * handler runs on the stack its own SA_ONSTACK asks for).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The dump runs on it: 256 KiB, reserved, not committed until touched. */
#define ALTSTACK_SIZE (256u * 1024u)

static size_t page;
static int (*real_sigaltstack)(const stack_t *, stack_t *);

static int raw_sigaltstack(const stack_t *ss, stack_t *old)
{
  return (int) syscall(SYS_sigaltstack, ss, old);
}

static stack_t ours(void)
{
  stack_t ss = {.ss_sp = (char *) igprof_tls.altstack + page, .ss_flags = 0, .ss_size = ALTSTACK_SIZE};
  return ss;
}

static int is_ours(const stack_t *ss)
{
  return igprof_tls.altstack && !(ss->ss_flags & SS_DISABLE) && ss->ss_sp == (char *) igprof_tls.altstack + page;
}

void igprof_altstack_thread_start(void)
{
  stack_t cur;
  if (!page) page = (size_t) sysconf(_SC_PAGESIZE);
  if (igprof_tls.altstack || raw_sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
  /* A guard page below it: an overflow of the signal stack faults instead
   * of writing over whatever lies beneath. */
  char *p = mmap(NULL, ALTSTACK_SIZE + page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return;
  mprotect(p, page, PROT_NONE);
  igprof_tls.altstack = p;
  stack_t ss = ours();
  if (raw_sigaltstack(&ss, NULL) != 0) {
    munmap(p, ALTSTACK_SIZE + page);
    igprof_tls.altstack = NULL;
  }
}

void igprof_altstack_thread_exit(void)
{
  void *p = igprof_tls.altstack;
  if (!p) return;
  stack_t cur;
  if (raw_sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_ONSTACK)) return; /* in use: leave it */
  if (is_ours(&cur)) {
    stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    raw_sigaltstack(&off, NULL);
  }
  igprof_tls.altstack = NULL;
  munmap(p, ALTSTACK_SIZE + page);
}

static int hook_sigaltstack(const stack_t *ss, stack_t *old)
{
  if (!igprof_tls.altstack) return real_sigaltstack(ss, old);
  stack_t cur;
  if (raw_sigaltstack(NULL, &cur) != 0) return real_sigaltstack(ss, old);
  int ours_in = is_ours(&cur);
  if (ss) {
    if (ss->ss_flags & SS_DISABLE) {
      /* The program gives up its stack: ours goes back in. */
      if (!ours_in) {
        if (cur.ss_flags & SS_ONSTACK) { errno = EPERM; return -1; }
        stack_t back = ours();
        raw_sigaltstack(&back, NULL);
      }
    } else if (real_sigaltstack(ss, NULL) != 0) {
      return -1;
    }
  }
  if (old) {
    if (ours_in) {
      old->ss_sp = NULL;
      old->ss_size = 0;
      old->ss_flags = SS_DISABLE;
    } else {
      *old = cur;
    }
  }
  return 0;
}

void igprof_altstack_start(void)
{
  real_sigaltstack = igprof_hook("core", "sigaltstack", (void *) hook_sigaltstack, 0);
  if (!real_sigaltstack) real_sigaltstack = raw_sigaltstack;
  igprof_altstack_thread_start();
}
