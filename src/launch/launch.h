/* What the launchers (igprof, igtrace) share: finding the program and the
 * runtime library, checking both, and becoming the program with the runtime
 * preloaded. */
#ifndef IGPROF_LAUNCH_H
#define IGPROF_LAUNCH_H

#include <stddef.h>
#include <stdio.h>

/* The launchers' own failures (bad option, no program, unwritable -o, no
 * runtime) exit 125, as env(1) and timeout(1) do: the program never ran.
 * 126 and 127 keep the shell's meaning (found but cannot run, not found).
 * Any other status is the program's own, since the launcher execs it. */
#define LAUNCH_EXIT_ERROR 125

/* One row of a launcher's option table. `token` is appended to the option
 * string ($IGPROF, $IGTRACE); in it "%s" stands for the quoted argument.
 * Adding an option is adding a row. */
struct launch_option {
  const char *short_opt, *long_opt;
  const char *arg_name;            /* NULL: takes no argument */
  const char *token;
  int (*check)(const char *arg);   /* validates the argument */
  const char *expect;              /* what a valid argument looks like */
  int selects;                     /* chooses a profiler module / an event class */
  const char *help;
};

const struct launch_option *launch_find_option(const struct launch_option *table, size_t count,
                                               const char *arg);

/* The table as help text, option column `width` wide. */
void launch_print_options(FILE *f, const struct launch_option *table, size_t count, int width);

/* Parse the options in argv[1..] up to "--" or the first non-option: -h and
 * --help print usage on stdout and exit 0, --version prints the version and
 * exits 0; any error exits LAUNCH_EXIT_ERROR with a message.
 * Appends each option's token to *text, adds up `selects` in *selected, and
 * sets *output to the argument of the option whose token starts with
 * `output_token` (if given). Returns the index of the program in argv
 * (argc if there is none). */
int launch_parse(int argc, char **argv, const struct launch_option *table, size_t count,
                 void (*usage)(FILE *), char **text, int *selected, const char *output_token,
                 const char **output);

/* "igprof" or "igtrace": the prefix of every message. */
extern const char *launch_tool;

/* Make the argument of the option whose token is `token` (e.g. "igprof:out=%s")
 * absolute, relative to the launcher's directory, so every process of the
 * tree writes where the user meant whatever directory it runs in. A
 * `|command` or absolute name is left alone. Call before launch_parse. */
void launch_absolute_paths(int argc, char **argv, const struct launch_option *table, size_t count,
                           const char *token);

/* "<tool>: message" on stderr, then exit(status). */
void launch_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Append a token to an option string (space-separated), with "%s" in
 * `token` replaced by the quoted argument (options.h grammar). */
void launch_append_token(char **text, size_t *len, const char *token, const char *arg);

/* Where the shell would find `prog`; exits 126/127 like a shell if nowhere. */
char *launch_resolve_program(const char *prog);

/* libigprof.so relative to this executable: <dir of exe>/IGPROF_RUNTIME_FROM_BIN/. */
char *launch_library_path(void);

/* Add `lib` to LD_PRELOAD, keeping what is there. */
void launch_preload(const char *lib);

/* Become the program (exec, argv[0] as given), so it keeps the launcher's
 * pid, its signals and its exit status. Returns only by exiting 126/127 like
 * a shell when it cannot be run. */
int launch_run(const char *program, int argc, char **argv) __attribute__((noreturn));

/* Exit LAUNCH_EXIT_ERROR with a message unless the directory a dump or trace file `path`
 * (made absolute by launch_absolute_paths) goes to exists and is writable,
 * so a bad -o fails before the program runs, not after. `|command` passes. */
void launch_check_output_dir(const char *flag, const char *path);

/* Warn on stderr when the runtime cannot be loaded into `program` (or the
 * interpreter of a #! script): statically linked (Go without cgo among
 * them), or built for another architecture. The program still runs: the
 * processes it starts may be profiled. */
void launch_check_program(const char *program);

#endif
