/* Shared launcher code (launch.h). */
#define _GNU_SOURCE
#include "launch.h"
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIBRARY_RELATIVE "/../lib/igprof/libigprof.so"

const char *launch_tool = "igprof";

void launch_die(int status, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", launch_tool);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

void launch_append_token(char **text, size_t *len, const char *token, const char *arg)
{
  char quoted[8192];
  if (arg) igprof_options_quote(quoted, sizeof quoted, arg);
  size_t need = strlen(token) + (arg ? strlen(quoted) : 0) + 2;
  *text = realloc(*text, *len + need + 1);
  if (!*text) launch_die(2, "out of memory");
  if (*len) (*text)[(*len)++] = ' ';
  const char *pct = strstr(token, "%s");
  if (pct && arg) {
    *len += (size_t) sprintf(*text + *len, "%.*s%s%s", (int) (pct - token), token, quoted, pct + 2);
  } else {
    *len += (size_t) sprintf(*text + *len, "%s", token);
  }
}

const struct launch_option *launch_find_option(const struct launch_option *table, size_t count,
                                               const char *arg)
{
  for (size_t i = 0; i < count; ++i)
    if ((table[i].short_opt && strcmp(arg, table[i].short_opt) == 0) ||
        (table[i].long_opt && strcmp(arg, table[i].long_opt) == 0))
      return &table[i];
  return NULL;
}

void launch_print_options(FILE *f, const struct launch_option *table, size_t count, int width)
{
  for (size_t i = 0; i < count; ++i) {
    const struct launch_option *o = &table[i];
    char left[64];
    snprintf(left, sizeof left, "%s%s%s%s%s", o->short_opt ? o->short_opt : "",
             o->short_opt && o->long_opt ? ", " : "", o->long_opt ? o->long_opt : "",
             o->arg_name ? " " : "", o->arg_name ? o->arg_name : "");
    fprintf(f, "  %-*s %s%s\n", width, left, o->help, o->available ? "" : " [not implemented yet]");
  }
  fprintf(f, "  %-*s %s\n\n", width, "-h, --help", "show this help");
}

int launch_parse(int argc, char **argv, const struct launch_option *table, size_t count,
                 void (*usage)(FILE *), char **text, int *selected, const char *output_token,
                 const char **output)
{
  size_t len = *text ? strlen(*text) : 0;
  int i;
  for (i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) return i + 1;
    if (arg[0] != '-' || !arg[1]) break;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    const struct launch_option *o = launch_find_option(table, count, arg);
    if (!o) launch_die(2, "unknown option '%s' (see %s --help)", arg, launch_tool);
    if (!o->available) launch_die(2, "%s: %s is not implemented yet", arg, o->help);
    const char *value = NULL;
    if (o->arg_name) {
      if (i + 1 >= argc) launch_die(2, "%s needs an argument (%s)", arg, o->expect);
      value = argv[++i];
      if (o->check && !o->check(value)) launch_die(2, "%s: bad argument, expected %s", arg, o->expect);
    }
    if (output_token && strncmp(o->token, output_token, strlen(output_token)) == 0) *output = value;
    launch_append_token(text, &len, o->token, value);
    *selected += o->selects;
  }
  return i;
}

char *launch_resolve_program(const char *prog)
{
  struct stat st;
  if (strchr(prog, '/')) {
    if (stat(prog, &st) != 0) launch_die(127, "%s: %s", prog, strerror(errno));
    if (S_ISDIR(st.st_mode)) launch_die(126, "%s: %s", prog, "Is a directory");
    if (access(prog, X_OK) != 0) launch_die(126, "%s: %s", prog, strerror(errno));
    return strdup(prog);
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  char *denied = NULL;
  for (const char *p = path;; ) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t) (colon - p) : strlen(p);
    char *cand;
    if (asprintf(&cand, "%.*s%s%s", (int) n, p, n ? "/" : "", prog) < 0) launch_die(2, "out of memory");
    if (stat(cand, &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (access(cand, X_OK) == 0) { free(denied); return cand; }
      if (!denied) denied = strdup(cand);
    }
    free(cand);
    if (!colon) break;
    p = colon + 1;
  }
  if (denied) launch_die(126, "%s: %s", denied, "Permission denied");
  launch_die(127, "%s: %s", prog, "command not found");
}

char *launch_library_path(void)
{
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) launch_die(2, "cannot read /proc/self/exe");
  self[n] = 0;
  char *slash = strrchr(self, '/');
  *slash = 0;
  char *lib;
  if (asprintf(&lib, "%s%s", self, LIBRARY_RELATIVE) < 0) launch_die(2, "out of memory");
  char *real = realpath(lib, NULL);
  if (!real) launch_die(2, "cannot find the runtime library %s: %s", lib, strerror(errno));
  free(lib);
  return real;
}

void launch_preload(const char *lib)
{
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, lib)) return;
  char *joined;
  if (asprintf(&joined, "%s%s%s", pre && *pre ? pre : "", pre && *pre ? ":" : "", lib) < 0)
    launch_die(2, "out of memory");
  setenv("LD_PRELOAD", joined, 1);
  free(joined);
}

static pid_t child_pid;

static void forward(int sig)
{
  if (child_pid > 0) kill(child_pid, sig);
}

int launch_run(const char *program, int argc, char **argv)
{
  fflush(NULL);
  child_pid = fork();
  if (child_pid < 0) launch_die(2, "cannot fork: %s", strerror(errno));
  if (child_pid == 0) {
    execv(program, argv);
    if (errno == ENOEXEC) {
      /* A script without #!: shells run it with sh. */
      char **args = calloc((size_t) argc + 2, sizeof *args);
      args[0] = "sh";
      args[1] = (char *) program;
      for (int k = 1; k < argc; ++k) args[k + 1] = argv[k];
      execv("/bin/sh", args);
    }
    fprintf(stderr, "%s: %s: %s\n", launch_tool, argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  /* The terminal sends INT/QUIT to the whole group; others are passed on. */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  static const int passed[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH, SIGCONT};
  for (size_t k = 0; k < sizeof passed / sizeof passed[0]; ++k) signal(passed[k], forward);
  int status;
  while (waitpid(child_pid, &status, 0) < 0) {
    if (errno != EINTR) launch_die(2, "waitpid: %s", strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 2;
}

void launch_absolute_paths(int argc, char **argv, const struct launch_option *table, size_t count,
                           const char *token)
{
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-' || strcmp(argv[i], "--") == 0) return;
    const struct launch_option *o = launch_find_option(table, count, argv[i]);
    if (!o || !o->arg_name || i + 1 >= argc) continue;
    ++i;
    if (strcmp(o->token, token) != 0 || !argv[i][0] || argv[i][0] == '/' || argv[i][0] == '|') continue;
    char *cwd = getcwd(NULL, 0), *full;
    if (!cwd || asprintf(&full, "%s/%s", cwd, argv[i]) < 0) launch_die(2, "%s %s: %m", argv[i - 1], argv[i]);
    argv[i] = full;
    free(cwd);
  }
}
