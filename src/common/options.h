/* The $IGPROF option grammar, shared by the launchers (which build the
 * string) and libigprof.so (which reads it), so both sides agree exactly.
 *
 *   IGPROF  := sep* [ token { sep+ token } ] sep*
 *   sep     := ' ' | '\t' | ','
 *   token   := word [ ':' word ] [ '=' value ]
 *   word    := 1*( 'a'..'z' | '0'..'9' | '_' | '-' )
 *   value   := quoted | bare
 *   quoted  := "'" *( any byte but "'" and '\' | '\' any byte ) "'"
 *   bare    := 1*( any byte but sep, "'", '\', '=' )
 *
 * "mem" enables a module, "mem:overhead=delta" sets one of its options,
 * "igprof:out='|gzip > x.gz'" sets a core option. A quoted value may hold
 * spaces, commas and quotes (as \'). Anything else is an error: the parser
 * never guesses (no prefix matching, no skipping of unknown text).
 *
 * No allocation: values are unescaped into a caller buffer.
 */
#ifndef IGPROF_OPTIONS_H
#define IGPROF_OPTIONS_H

#include <stddef.h>

struct igprof_token {
  char module[32];
  char key[32];       /* "" for a bare module token */
  char value[4096];   /* unescaped */
  int has_value;
};

/* Called for each token; return 0 to go on, -1 to stop with the message the
 * callback wrote into err. */
typedef int (*igprof_token_fn)(void *ctx, const struct igprof_token *t, char *err, size_t errlen);

/* Parse `text`. Returns 0, or -1 with a one-line reason in err (which names
 * the offending column). `scratch` is caller storage for one token. */
int igprof_options_parse(const char *text, struct igprof_token *scratch, igprof_token_fn fn, void *ctx,
                         char *err, size_t errlen);

/* Append `'value'` with \' and \\ escapes to dst (capacity cap, always
 * terminated). Returns the length the full result needs. */
size_t igprof_options_quote(char *dst, size_t cap, const char *value);

/* Parse a signal given as a number, "USR1" or "SIGUSR1". Returns the
 * signal number or -1. Signals the profiler cannot own (KILL, STOP) and the
 * fatal ones it already owns are rejected. */
int igprof_options_signal(const char *text);

/* Parse a decimal integer in [lo, hi]; -1 if malformed or out of range. */
long igprof_options_int(const char *text, long lo, long hi);

/* Parse a size in bytes: decimal digits and an optional suffix k, M or G
 * (either case; 1024, 1024^2, 1024^3), at most 2^62. Returns 0 with the
 * bytes in *out, or -1 if malformed or too large. */
int igprof_options_size(const char *text, unsigned long long *out);

/* "<n>ms", 1..3600000: n, or -1. */
long igprof_options_ms(const char *text);

/* A timeline step: "<n>ms" (1..3600000 milliseconds) sets *ms, a size above
 * 0 (igprof_options_size) sets *bytes; the other is left alone. Returns 0,
 * or -1 if it is neither. */
int igprof_options_timeline(const char *text, unsigned long long *bytes, unsigned long long *ms);

#endif
