/* What the launchers (igprof, igtrace) share: finding the program and the
 * runtime library, and running the program under it as a child whose exit
 * status becomes the launcher's. */
#ifndef IGPROF_LAUNCH_H
#define IGPROF_LAUNCH_H

#include <stddef.h>

/* "igprof" or "igtrace": the prefix of every message. */
extern const char *launch_tool;

/* "<tool>: message" on stderr, then exit(status). */
void launch_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Append a token to an option string (space-separated), with "%s" in
 * `token` replaced by the quoted argument (options.h grammar). */
void launch_append_token(char **text, size_t *len, const char *token, const char *arg);

/* Where the shell would find `prog`; exits 126/127 like a shell if nowhere. */
char *launch_resolve_program(const char *prog);

/* libigprof.so next to this executable: <dir of exe>/../lib/igprof/. */
char *launch_library_path(void);

/* Add `lib` to LD_PRELOAD, keeping what is there. */
void launch_preload(const char *lib);

/* Run program with argv (argv[0] as given) and wait: returns its exit
 * status, 128+N for a death by signal N. INT/QUIT are left to the
 * terminal's process group, TERM/HUP/USR1/USR2/ALRM/WINCH/CONT passed on. */
int launch_run(const char *program, int argc, char **argv);

#endif
