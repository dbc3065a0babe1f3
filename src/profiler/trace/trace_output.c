/* Where trace lines go, and how an event becomes exactly one write(2).
 *
 * Output: -o FILE is opened with O_APPEND by each process (%p = its pid; a
 * forked child opens its own file when the name has %p), so processes
 * sharing one file append whole events. Without -o the trace goes to a
 * duplicate of fd 2 taken at start-up, placed high (F_DUPFD_CLOEXEC) so the
 * program's own descriptor numbers do not move: the program can close or
 * redirect its fd 2 and the trace still goes where stderr pointed at
 * start-up. Both descriptors are close-on-exec; an exec'd program traces to
 * the stderr (or -o file) it starts with.
 *
 * Atomicity: an event (a line, or a block with its stack) is formatted
 * completely in a buffer and written with one write(2). Threads of one
 * process also take the output lock around it, so even a block longer than
 * PIPE_BUF on a pipe is never interleaved with another thread's line.
 *
 * Buffers come from a pool (taken per event, given back at once), so no
 * memory is tied to threads that come and go.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Reserved, touched only as far as used: deep stacks of long C++ names fit. */
#define EVENT_TEXT (256u * 1024u)
#define EVENT_SCRATCH (256u * 1024u)
#define HIGH_FD 900

static int out_fd = -1;
static int out_is_pipe; /* a pipe or socket: a gone reader means EPIPE and SIGPIPE */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static struct trace_event *pool;
static atomic_flag pool_lock = ATOMIC_FLAG_INIT;

/* The lowest descriptor number to place the trace at: high, below the limit. */
static int high_fd(void)
{
  struct rlimit rl;
  int want = HIGH_FD;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t) want + 16)
    want = rl.rlim_cur > 32 ? (int) rl.rlim_cur - 16 : 3;
  return want;
}

int trace_output_open(void)
{
  int fd;
  if (trace_config.output[0]) {
    char name[IGPROF_PATH_MAX];
    igprof_expand_name(name, sizeof name, trace_config.output);
    fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
      igprof_warn("trace: cannot open %s: %s", name, strerrorname_np(errno));
      return -1;
    }
  } else {
    fd = 2;
  }
  int high = fcntl(fd, F_DUPFD_CLOEXEC, high_fd());
  if (high < 0) high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (fd != 2) close(fd);
  if (high < 0) {
    igprof_warn("trace: no descriptor for the trace output: %s", strerrorname_np(errno));
    return -1;
  }
  if (out_fd >= 0) close(out_fd);
  out_fd = high;
  struct stat st;
  out_is_pipe = fstat(out_fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
  igprof_debug("trace output on fd %d (%s)", out_fd, trace_config.output[0] ? trace_config.output : "stderr");
  return 0;
}

/* No lock is taken around fork: libc takes its allocator's locks after the
 * fork handlers, and an event raised inside malloc (holding an arena lock)
 * needs our locks - a fork handler waiting for them would deadlock. So the
 * child, alone now, repairs instead: a pool that was being changed at the
 * fork is dropped (its pages stay unused), the output lock is made anew. */
void trace_output_fork_child(void)
{
  if (atomic_flag_test_and_set(&pool_lock)) pool = NULL;
  atomic_flag_clear(&pool_lock);
  pthread_mutex_init(&out_lock, NULL);
  /* The child writes its own file when the name is per process. */
  if (strstr(trace_config.output, "%p")) trace_output_open();
}

/* ---------------------------------------------------------------- */
/* Event buffers                                                     */
/* ---------------------------------------------------------------- */

struct trace_event *trace_event_begin(void)
{
  while (atomic_flag_test_and_set(&pool_lock)) sched_yield();
  struct trace_event *e = pool;
  if (e) pool = e->next_free;
  atomic_flag_clear(&pool_lock);
  if (!e) {
    size_t size = sizeof *e + EVENT_TEXT + EVENT_SCRATCH;
    char *block = igprof_pages_alloc(size);
    if (!block) return NULL;
    e = (struct trace_event *) block;
    e->text = block + sizeof *e;
    e->cap = EVENT_TEXT;
    e->scratch = e->text + EVENT_TEXT;
    e->scratch_cap = EVENT_SCRATCH;
  }
  e->len = 0;
  e->overflow = 0;
  e->resolved = 0;
  return e;
}

void trace_event_discard(struct trace_event *e)
{
  while (atomic_flag_test_and_set(&pool_lock)) sched_yield();
  e->next_free = pool;
  pool = e;
  atomic_flag_clear(&pool_lock);
}

/* Room kept for the cut-off note and the final newline. */
#define TAIL_RESERVE 64

void trace_event_printf(struct trace_event *e, const char *fmt, ...)
{
  if (e->overflow) return;
  size_t room = e->cap - TAIL_RESERVE - e->len;
  va_list ap;
  va_start(ap, fmt);
  size_t n = igprof_vformat(e->text + e->len, room, fmt, ap);
  va_end(ap);
  if (n >= room) {
    e->len += room - 1;
    e->overflow = 1;
  } else {
    e->len += n;
  }
}

static pid_t thread_id(void)
{
  if (!trace_tls.tid) trace_tls.tid = (pid_t) syscall(SYS_gettid);
  return trace_tls.tid;
}

void trace_event_identity(struct trace_event *e, const char *lead)
{
  trace_event_printf(e, "%sby %s [thread %d pid %d]", lead, igprof_state.program, (int) thread_id(),
                     (int) igprof_state.pid);
}

/* Returns 0, or the errno of the write that failed (the trace is lost
 * then, never the program's behaviour). */
static int write_all(const char *p, size_t n)
{
  while (n) {
    ssize_t w = write(out_fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= (size_t) w;
  }
  return 0;
}

/* A reader that went away (igtrace ... 2>&1 | head) must not kill the
 * program with SIGPIPE: the signal is blocked around the write (raw
 * syscalls, not the runtime's sigprocmask hooks), the one EPIPE raised is
 * taken back, and the trace stops. */
static void write_to_pipe(const char *p, size_t n)
{
  struct igprof_pipe_guard guard;
  igprof_pipe_guard_begin(&guard);
  int epipe = write_all(p, n) == EPIPE;
  igprof_pipe_guard_end(&guard, epipe);
  if (epipe) {
    close(out_fd);
    out_fd = -1;
  }
}

void trace_event_emit(struct trace_event *e)
{
  if (e->overflow) {
    /* Keep the block well-formed: end the cut line, then say so. */
    e->len += igprof_format(e->text + e->len, TAIL_RESERVE, "\n  ... (event cut at %u bytes)\n",
                            EVENT_TEXT);
  }
  int saved = errno;
  pthread_mutex_lock(&out_lock);
  if (out_fd >= 0) {
    if (out_is_pipe) write_to_pipe(e->text, e->len);
    else write_all(e->text, e->len);
  }
  pthread_mutex_unlock(&out_lock);
  errno = saved;
  trace_event_discard(e);
}
