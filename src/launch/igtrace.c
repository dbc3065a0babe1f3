/* igtrace: trace a program's allocations, mappings and C++ throws live.
 *
 *   igtrace [options] [--] program [args]
 *
 * Builds $IGTRACE (the $IGPROF grammar, see src/profiler/trace/trace.c for the
 * tokens), preloads libigprof.so found next to this executable, runs the
 * program and exits with its status. Every option error is reported, with
 * exit status 125 (LAUNCH_EXIT_ERROR), before anything runs. docs/igtrace.md
 * has the line formats.
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

/* One row per option (launch.h). */
static const struct launch_option options[] = {
  {"-tt", "--throw", NULL, "throw", NULL, NULL, 1,
   "every C++ throw and rethrow: type, stack from the thrower (the default)"},
  {"-tm", "--memory", NULL, "mem", NULL, NULL, 1,
   "every malloc-family call: MALLOC, CALLOC, REALLOC, ..., FREE lines"},
  {"-tmm", "--mappings", NULL, "mmap", NULL, NULL, 1, "every mmap, mremap, munmap, brk and sbrk"},
  {NULL, "--stack", NULL, "stack", NULL, NULL, 0, "add the call stack to -tm and -tmm lines"},
  {"-D", "--demangle", NULL, "demangle", NULL, NULL, 0, "demangle C++ type and function names"},
  {"-r", "--reject", "SPEC", "igtrace:reject=%s", check_reject, "[TYPE][:FUNCTION[:LIBRARY]]", 0,
   "drop matching events (repeatable; see below)"},
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
  launch_print_options(f, options, NOPTIONS, 24);
  fprintf(f, "Reject SPEC drops an event whose type contains TYPE, or with a frame whose\n"
             "function contains FUNCTION or whose library contains LIBRARY. Examples:\n"
             "-r St9bad_alloc drops throws of that type; -r :parse_ drops events\n"
             "with a frame in a function whose name contains parse_ (needs a stack walk);\n"
             "-r ::libz drops events with a frame in a library whose path contains libz;\n"
             "-r free drops FREE lines. Fields match as substrings.\n"
             "Output goes to a copy of stderr taken at start-up, one write per event.\n"
             "igtrace execs the program: its exit status or death by a signal is igtrace's.\n"
             "127: not found, 126: cannot run, 125: igtrace's own errors (nothing ran).\n"
             "See igtrace(1), and igtrace.md in the documentation directory (share/doc/igprof).\n");
}

int main(int argc, char **argv)
{
  char *text = NULL;
  int events = 0;
  const char *output = NULL;

  launch_tool = "igtrace";
  /* -o FILE relative to the launcher's directory, for every process of the tree. */
  launch_absolute_paths(argc, argv, options, NOPTIONS, "igtrace:out=%s");
  int i = launch_parse(argc, argv, options, NOPTIONS, usage, &text, &events, "igtrace:out=", &output);
  if (i >= argc) {
    fprintf(stderr, "igtrace: no program to run\n");
    usage(stderr);
    return LAUNCH_EXIT_ERROR;
  }
  if (!events) { /* IgProf's default */
    size_t len = text ? strlen(text) : 0;
    launch_append_token(&text, &len, "throw", NULL);
  }
  char *lib = launch_library_path();
  char *program = launch_resolve_program(argv[i]);

  /* -o FILE is this run's trace: processes append to it, so start it empty.
   * Per-process names (%p) are created by each process: check their directory. */
  if (output && !strstr(output, "%p")) {
    FILE *f = fopen(output, "w");
    if (!f) launch_die(LAUNCH_EXIT_ERROR, "-o %s: cannot write: %m", output);
    fclose(f);
  } else {
    launch_check_output_dir("-o", output);
  }
  launch_check_program(program);
  if (setenv("IGTRACE", text, 1) != 0) launch_die(LAUNCH_EXIT_ERROR, "cannot set IGTRACE");
  launch_preload(lib);
  return launch_run(program, argc - i, argv + i);
}
