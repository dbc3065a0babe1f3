/* The dump service thread for -D (flag file) and -S (dump signal).
 *
 * A signal handler cannot write a dump safely (the interrupted thread may be
 * anywhere), so the -S handler only writes one byte into a pipe; this thread
 * wakes up, and writes the checkpoint dump in ordinary thread context. The
 * same thread polls the flag file. It runs with every signal blocked and the
 * guard held for its whole life, so nothing it does is profiled.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLAG_POLL_MS 100

static int wake_pipe[2] = {-1, -1};
static int running;
static char flag_path[IGPROF_PATH_MAX]; /* -D name with %p expanded for this process */

/* Flag file there? Then take it away and say so. */
static int flag_raised(void)
{
  struct stat st;
  if (!flag_path[0] || stat(flag_path, &st) != 0) return 0;
  unlink(flag_path);
  return 1;
}

void igprof_dumper_poke(void)
{
  char b = 1;
  int saved = errno;
  if (wake_pipe[1] >= 0) {
    ssize_t w = write(wake_pipe[1], &b, 1);
    (void) w;
  }
  errno = saved;
}

/* Take pending requests off the pipe; returns how many bytes there were. */
static int drain(void)
{
  char buf[64];
  ssize_t n, total = 0;
  if (wake_pipe[0] < 0) return 0;
  while ((n = read(wake_pipe[0], buf, sizeof buf)) > 0) total += n;
  return (int) total;
}

/* Before the final dump: a checkpoint that was asked for (a -S signal just
 * before exit) and that the dump thread did not get to yet is written now. */
void igprof_dumper_flush(void)
{
  if (running && drain() > 0) igprof_dump(IGPROF_DUMP_CHECKPOINT, NULL, "dump signal");
  if (running && flag_raised()) igprof_dump(IGPROF_DUMP_CHECKPOINT, NULL, "flag file");
}

static void *dumper_main(void *arg)
{
  (void) arg;
  igprof_tls.guard = 1;
  while (atomic_load(&igprof_state.active)) {
    struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
    int rc = poll(&p, 1, igprof_config.dump_flag[0] ? FLAG_POLL_MS : -1);
    if (!atomic_load(&igprof_state.active)) break;
    if (rc > 0 && (p.revents & POLLIN) && drain() > 0) igprof_dump(IGPROF_DUMP_CHECKPOINT, NULL, "dump signal");
    if (flag_raised()) igprof_dump(IGPROF_DUMP_CHECKPOINT, NULL, "flag file");
  }
  return NULL;
}

static enum igprof_signal_result on_dump_signal(int sig, siginfo_t *si, void *uc,
                                                const struct sigaction *app)
{
  (void) sig;
  (void) si;
  (void) uc;
  igprof_dumper_poke();
  /* The application's own handler still sees its signal; a default action
   * (usually "terminate") is not applied: the user sent it to us. */
  return app->sa_handler != SIG_DFL && app->sa_handler != SIG_IGN ? IGPROF_SIGNAL_CHAIN : IGPROF_SIGNAL_DONE;
}

static int start_thread(void)
{
  pthread_attr_t attr;
  pthread_t t;
  sigset_t all, old;
  if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  /* "%p" in the flag name lets the user poke one process of a tree. */
  flag_path[0] = 0;
  if (igprof_config.dump_flag[0]) igprof_expand_name(flag_path, sizeof flag_path, igprof_config.dump_flag);
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  igprof_note_threads();
  int rc = pthread_create(&t, &attr, dumper_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    igprof_warn("cannot start the dump thread (error %d): -D/-S dumps are off", rc);
    return -1;
  }
  running = 1;
  return 0;
}

int igprof_dumper_start(void)
{
  if (!igprof_config.dump_flag[0] && !igprof_config.dump_signal) return 0;
  if (start_thread() != 0) return -1;
  if (igprof_config.dump_signal && igprof_signal_own(igprof_config.dump_signal, on_dump_signal, 1) != 0) {
    igprof_warn("cannot own dump signal %d (errno %d)", igprof_config.dump_signal, errno);
    return -1;
  }
  igprof_debug("dump thread started (flag file '%s', signal %d)", flag_path,
               igprof_config.dump_signal);
  return 0;
}

/* Threads do not survive fork: the child starts its own, on its own pipe
 * (the parent's would wake the parent). */
int igprof_dumper_fork_child(void)
{
  if (!running) return 0;
  close(wake_pipe[0]);
  close(wake_pipe[1]);
  wake_pipe[0] = wake_pipe[1] = -1;
  running = 0;
  return start_thread();
}
