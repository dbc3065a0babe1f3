/* Start-up of libigprof.so: the constructor reads $IGPROF (and a module's
 * own variable, $IGTRACE), decides whether this process is profiled (-t),
 * starts the enabled modules, then installs the process-lifecycle hooks
 * (lifecycle.c, signals.c). Nothing is hooked in a process that is not
 * profiled, so `igprof -t foo make` costs the other processes only this
 * library's loading.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "options.h"
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Threads made before this library started (a constructor that ran before
 * ours may have made one): num_threads, field 20 of /proc/self/stat. If it
 * cannot be read, assume there are several. */
static void count_threads(void)
{
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  long threads = 0;
  if (n > 0) {
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold anything but this */
    for (int field = 2; p && field < 20; ++field) p = strchr(p + 1, ' ');
    if (p) threads = strtol(p + 1, NULL, 10);
  }
  if (threads != 1) igprof_note_threads();
}

/* ---------------------------------------------------------------- */
/* Options                                                           */
/* ---------------------------------------------------------------- */

static struct igprof_module *find_module(const char *name)
{
  for (struct igprof_module *const *m = igprof_modules_begin(); m < igprof_modules_end(); ++m)
    if (*m && strcmp((*m)->name, name) == 0) return *m;
  return NULL;
}

static int copy_value(char *dst, size_t cap, const struct igprof_token *t, char *err, size_t errlen)
{
  if (!t->has_value || !t->value[0]) {
    igprof_format(err, errlen, "igprof:%s needs a value", t->key);
    return -1;
  }
  if (strlen(t->value) >= cap) {
    igprof_format(err, errlen, "igprof:%s value too long", t->key);
    return -1;
  }
  strcpy(dst, t->value);
  return 0;
}

static int core_option(const struct igprof_token *t, char *err, size_t errlen)
{
  struct igprof_config *c = &igprof_config;
  if (!t->key[0]) { igprof_format(err, errlen, "'igprof' needs an option, e.g. igprof:out=FILE"); return -1; }
  if (strcmp(t->key, "out") == 0) return copy_value(c->output, sizeof c->output, t, err, errlen);
  if (strcmp(t->key, "dump") == 0) return copy_value(c->dump_flag, sizeof c->dump_flag, t, err, errlen);
  if (strcmp(t->key, "target") == 0) return copy_value(c->target, sizeof c->target, t, err, errlen);
  if (strcmp(t->key, "gzip") == 0 && !t->has_value) { c->gzip = 1; return 0; }
  if (strcmp(t->key, "debug") == 0 && !t->has_value) { c->debug = 1; return 0; }
  if (strcmp(t->key, "signal") == 0 && t->has_value) {
    int sig = igprof_options_signal(t->value);
    if (sig < 0) { igprof_format(err, errlen, "igprof:signal: '%s' is not a usable signal", t->value); return -1; }
    c->dump_signal = sig;
    return 0;
  }
  if (strcmp(t->key, "depth") == 0 && t->has_value) {
    long d = igprof_options_int(t->value, 1, IGPROF_DEPTH_MAX);
    if (d < 0) { igprof_format(err, errlen, "igprof:depth must be 1..%d", IGPROF_DEPTH_MAX); return -1; }
    c->depth = (int) d;
    return 0;
  }
  if (strcmp(t->key, "unwind") == 0 && t->has_value) {
    if (strcmp(t->value, "fast") == 0) c->unwind_method = WALK_FAST;
    else if (strcmp(t->value, "libunwind") == 0) c->unwind_method = WALK_LIBUNWIND;
    else { igprof_format(err, errlen, "igprof:unwind must be fast or libunwind"); return -1; }
    return 0;
  }
  igprof_format(err, errlen, "unknown option 'igprof:%s%s'", t->key, t->has_value ? "=..." : "");
  return -1;
}

static int token(void *ctx, const struct igprof_token *t, char *err, size_t errlen)
{
  (void) ctx;
  if (strcmp(t->module, "igprof") == 0) return core_option(t, err, errlen);
  struct igprof_module *m = find_module(t->module);
  if (!m) { igprof_format(err, errlen, "unknown module '%s'", t->module); return -1; }
  if (!t->key[0]) { m->enabled = 1; return 0; }
  if (!m->option) { igprof_format(err, errlen, "module '%s' has no options", t->module); return -1; }
  return m->option(t->key, t->has_value ? t->value : NULL, err, errlen);
}

/* ---------------------------------------------------------------- */
/* Start-up                                                          */
/* ---------------------------------------------------------------- */

extern char *program_invocation_name;

static void read_identity(void)
{
  const char *name = program_invocation_name ? program_invocation_name : "";
  igprof_format(igprof_state.invocation, sizeof igprof_state.invocation, "%s", name);
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  igprof_format(igprof_state.program, sizeof igprof_state.program, "%s", base[0] ? base : "unknown");
  ssize_t n = readlink("/proc/self/exe", igprof_state.exe, sizeof igprof_state.exe - 1);
  igprof_state.exe[n > 0 ? n : 0] = 0;
  igprof_state.pid = (pid_t) syscall(SYS_getpid);
  if (!getcwd(igprof_state.start_dir, sizeof igprof_state.start_dir)) igprof_state.start_dir[0] = 0;
}

/* Does a module's own environment variable ($IGTRACE) ask for the runtime? */
static int module_environment_set(void)
{
  for (struct igprof_module *const *m = igprof_modules_begin(); m < igprof_modules_end(); ++m) {
    if (!*m || !(*m)->environment) continue;
    const char *value = igprof_getenv((*m)->environment);
    if (value && *value) return 1;
  }
  return 0;
}

/* Configure the modules that have a variable of their own; 1 if one of
 * them is to run in this process. */
static int configure_from_environment(void)
{
  int any = 0;
  for (struct igprof_module *const *m = igprof_modules_begin(); m < igprof_modules_end(); ++m) {
    if (!*m || !(*m)->environment || !(*m)->configure) continue;
    const char *value = igprof_getenv((*m)->environment);
    if (value && (*m)->configure(value) > 0) any = 1;
  }
  return any;
}

static struct igprof_token scratch_token; /* 4 KiB: keep it off the stack */

__attribute__((constructor)) static void igprof_start(void)
{
  const char *env = igprof_getenv("IGPROF");
  char err[512];
  /* A module's own variable ($IGTRACE: igtrace) alone also starts it. */
  if ((!env || !*env) && !module_environment_set()) return;
  igprof_tls.guard = 1;
  read_identity();
  count_threads();
  if (igprof_getenv("IGPROF_DEBUGGING")) igprof_config.debug = 1;
  if (!configure_from_environment() && (!env || !*env)) {
    igprof_tls.guard = 0;
    return;
  }
  if (env && *env && igprof_options_parse(env, &scratch_token, token, NULL, err, sizeof err) != 0) {
    igprof_warn("bad $IGPROF (%s), profiling disabled: %s", env, err);
    igprof_tls.guard = 0;
    return;
  }
  if (igprof_config.target[0] && !strstr(program_invocation_name ? program_invocation_name : "",
                                          igprof_config.target)) {
    igprof_debug("not profiling %s: name does not contain '%s'", igprof_state.program,
                 igprof_config.target);
    igprof_tls.guard = 0;
    return;
  }
  igprof_debug("profiling %s (%s), options: %s", igprof_state.program, igprof_state.exe, env);
  igprof_walk_init();
  igprof_walk_set_method((enum walk_method) igprof_config.unwind_method);
  igprof_thread_prepare();
  hook_batch_begin(); /* every start-up hook below: one protection change per mapping */
  int any = 0;
  for (struct igprof_module *const *m = igprof_modules_begin(); m < igprof_modules_end(); ++m) {
    if (!*m || !(*m)->enabled) continue;
    if ((*m)->start && (*m)->start() != 0) {
      (*m)->enabled = 0;
      igprof_warn("module %s could not start; it is off", (*m)->name);
      continue;
    }
    igprof_debug("module %s started", (*m)->name);
    any = 1;
  }
  if (!any) igprof_debug("no profiler module enabled");
  atomic_store(&igprof_state.active, 1);
  igprof_lifecycle_start();
  hook_batch_end();
  igprof_tls.guard = 0;
}
