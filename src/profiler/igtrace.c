/* igtrace: trace a program's allocations, mappings and C++ throws live.
 *
 *   igtrace [options] [--] program [args]
 *
 * Builds $IGTRACE (the $IGPROF grammar, see src/profiler/trace.c for the
 * tokens), preloads libigprof.so found next to this executable, runs the
 * program and exits with its status. Every option error is reported, with
 * exit status 2, before anything runs. docs/igtrace.md has the line formats.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"

static int check_nonempty(const char *v) { return v[0] != 0; }

/* A reject SPEC: at most three ':'-separated fields, not all empty. */
static int check_reject(const char *v)
{
  int colons = 0, chars = 0;
  for (const char *p = v; *p; ++p) {
    if (*p == ':') ++colons;
    else ++chars;
  }
  return colons <= 2 && chars > 0;
}

struct trace_option {
  const char *short_opt, *long_opt;
  const char *arg_name;     /* NULL: no argument */
  const char *token;        /* appended to $IGTRACE; "%s" = quoted argument */
  int (*check)(const char *arg);
  const char *expect;
  int selects_events;
  const char *help;
};

static const struct trace_option options[] = {
  {"-tt", "--throw", NULL, "throw", NULL, NULL, 1,
   "every C++ throw: type, destructor, stack from the throwing function (the default)"},
  {"-tm", "--memory", NULL, "mem", NULL, NULL, 1,
   "every malloc-family call: MALLOC, CALLOC, REALLOC, ..., FREE lines"},
  {"-tmm", "--mappings", NULL, "mmap", NULL, NULL, 1, "every mmap, mremap, munmap, brk and sbrk"},
  {NULL, "--stack", NULL, "stack", NULL, NULL, 0, "add the call stack to -tm and -tmm lines"},
  {"-D", "--demangle", NULL, "demangle", NULL, NULL, 0, "demangle C++ type and function names"},
  {"-r", "--reject", "SPEC", "igtrace:reject=%s", check_reject, "[TYPE][:FUNCTION[:LIBRARY]]", 0,
   "drop events whose type contains TYPE, or with a frame whose function contains FUNCTION "
   "or whose library contains LIBRARY (repeatable)"},
  {"-o", "--output", "FILE", "igtrace:out=%s", check_nonempty, "a file name", 0,
   "append the trace to FILE instead of stderr (%p = pid)"},
  {"-t", "--target", "NAME", "igtrace:target=%s", check_nonempty, "a non-empty name", 0,
   "trace only processes whose name contains NAME"},
  {"-d", "--debug", NULL, "igtrace:debug", NULL, NULL, 0, "report what the runtime does on stderr"},
};

#define NOPTIONS (sizeof options / sizeof options[0])

static void usage(FILE *f)
{
  fprintf(f, "Usage: igtrace [options] [--] program [args...]\n\n"
             "Trace a program (and the processes it starts) as it runs, one line per event.\n\n"
             "Options:\n");
  for (size_t i = 0; i < NOPTIONS; ++i) {
    const struct trace_option *o = &options[i];
    char left[64];
    snprintf(left, sizeof left, "%s%s%s%s%s", o->short_opt ? o->short_opt : "",
             o->short_opt && o->long_opt ? ", " : "", o->long_opt ? o->long_opt : "",
             o->arg_name ? " " : "", o->arg_name ? o->arg_name : "");
    fprintf(f, "  %-24s %s\n", left, o->help);
  }
  fprintf(f, "  %-24s %s\n\n", "-h, --help", "show this help");
  fprintf(f, "Reject SPEC: -r St9bad_alloc drops throws of that type; -r :parse_ drops events\n"
             "with a frame in a function whose name contains parse_ (needs a stack walk);\n"
             "-r ::libz drops events with a frame in a library whose path contains libz;\n"
             "-r free drops FREE lines. Fields match as substrings.\n"
             "Output goes to a copy of stderr taken at start-up, one write per event.\n"
             "Exit status: the program's; 128+N if it died from signal N; 127 if not found.\n"
             "See docs/igtrace.md.\n");
}

static const struct trace_option *find_option(const char *arg)
{
  for (size_t i = 0; i < NOPTIONS; ++i)
    if ((options[i].short_opt && strcmp(arg, options[i].short_opt) == 0) ||
        (options[i].long_opt && strcmp(arg, options[i].long_opt) == 0))
      return &options[i];
  return NULL;
}

int main(int argc, char **argv)
{
  char *text = NULL;
  size_t len = 0;
  int events = 0, i;
  const char *output = NULL;

  launch_tool = "igtrace";
  for (i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) { ++i; break; }
    if (arg[0] != '-' || !arg[1]) break;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) { usage(stdout); return 0; }
    const struct trace_option *o = find_option(arg);
    if (!o) launch_die(2, "unknown option '%s' (see igtrace --help)", arg);
    const char *value = NULL;
    if (o->arg_name) {
      if (i + 1 >= argc) launch_die(2, "%s needs an argument (%s)", arg, o->expect);
      value = argv[++i];
      if (o->check && !o->check(value)) launch_die(2, "%s: bad argument '%s', expected %s", arg, value, o->expect);
    }
    if (strncmp(o->token, "igtrace:out=", 12) == 0) output = value;
    launch_append_token(&text, &len, o->token, value);
    events += o->selects_events;
  }
  if (i >= argc) {
    fprintf(stderr, "igtrace: no program to run\n");
    usage(stderr);
    return 2;
  }
  if (!events) launch_append_token(&text, &len, "throw", NULL); /* IgProf's default */
  char *lib = launch_library_path();
  char *program = launch_resolve_program(argv[i]);

  /* -o FILE is this run's trace: processes append to it, so start it empty. */
  if (output && !strstr(output, "%p")) {
    FILE *f = fopen(output, "w");
    if (!f) launch_die(2, "-o %s: cannot write: %m", output);
    fclose(f);
  }
  if (setenv("IGTRACE", text, 1) != 0) launch_die(2, "cannot set IGTRACE");
  launch_preload(lib);
  return launch_run(program, argc - i, argv + i);
}
