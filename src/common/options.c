/* The $IGPROF grammar (options.h). Used inside libigprof.so and by the
 * launchers, so it touches no allocator and no stdio. */
#include "options.h"

#include <signal.h>
#include <string.h>

static int is_sep(char c) { return c == ' ' || c == '\t' || c == ','; }

static int is_word(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Tiny allocation-free message writer: "column N: <what>". */
static void set_error(char *err, size_t errlen, size_t column, const char *what)
{
  char num[24];
  size_t n = 0, i = 0, col = column + 1;
  do { num[n++] = (char) ('0' + col % 10); col /= 10; } while (col && n < sizeof num);
  const char *prefix = "column ";
  if (!errlen) return;
  for (const char *p = prefix; *p && i + 1 < errlen; ++p) err[i++] = *p;
  while (n && i + 1 < errlen) err[i++] = num[--n];
  for (const char *p = ": "; *p && i + 1 < errlen; ++p) err[i++] = *p;
  for (const char *p = what; *p && i + 1 < errlen; ++p) err[i++] = *p;
  err[i] = 0;
}

static size_t read_word(const char *s, size_t pos, char *dst, size_t cap, size_t *len)
{
  size_t n = 0;
  while (is_word(s[pos + n])) {
    if (n + 1 < cap) dst[n] = s[pos + n];
    ++n;
  }
  *len = n;
  dst[n < cap ? n : cap - 1] = 0;
  return pos + n;
}

/* Parse a value at s[pos]; returns the position after it or (size_t)-1. */
static size_t read_value(const char *s, size_t pos, struct igprof_token *t, char *err, size_t errlen)
{
  size_t n = 0, cap = sizeof t->value;
  if (s[pos] == '\'') {
    size_t start = pos++;
    for (;;) {
      char c = s[pos];
      if (!c) { set_error(err, errlen, start, "unterminated quoted value"); return (size_t) -1; }
      if (c == '\'') { ++pos; break; }
      if (c == '\\') {
        if (!s[pos + 1]) { set_error(err, errlen, pos, "backslash at end of text"); return (size_t) -1; }
        c = s[++pos];
      }
      if (n + 1 >= cap) { set_error(err, errlen, start, "value too long"); return (size_t) -1; }
      t->value[n++] = c;
      ++pos;
    }
    if (s[pos] && !is_sep(s[pos])) {
      set_error(err, errlen, pos, "separator expected after quoted value");
      return (size_t) -1;
    }
  } else {
    size_t start = pos;
    while (s[pos] && !is_sep(s[pos])) {
      if (s[pos] == '\'' || s[pos] == '\\' || s[pos] == '=') {
        set_error(err, errlen, pos, "quote, backslash or '=' in an unquoted value");
        return (size_t) -1;
      }
      if (n + 1 >= cap) { set_error(err, errlen, start, "value too long"); return (size_t) -1; }
      t->value[n++] = s[pos++];
    }
    if (!n) { set_error(err, errlen, start, "empty value after '='"); return (size_t) -1; }
  }
  t->value[n] = 0;
  return pos;
}

int igprof_options_parse(const char *s, struct igprof_token *t, igprof_token_fn fn, void *ctx,
                         char *err, size_t errlen)
{
  size_t pos = 0, len;
  if (errlen) err[0] = 0;
  if (!s) return 0;
  for (;;) {
    while (is_sep(s[pos])) ++pos;
    if (!s[pos]) return 0;
    size_t start = pos;
    pos = read_word(s, pos, t->module, sizeof t->module, &len);
    if (!len) { set_error(err, errlen, pos, "option name expected"); return -1; }
    if (len >= sizeof t->module) { set_error(err, errlen, start, "name too long"); return -1; }
    t->key[0] = 0;
    t->value[0] = 0;
    t->has_value = 0;
    if (s[pos] == ':') {
      size_t kstart = ++pos;
      pos = read_word(s, pos, t->key, sizeof t->key, &len);
      if (!len) { set_error(err, errlen, kstart, "option name expected after ':'"); return -1; }
      if (len >= sizeof t->key) { set_error(err, errlen, kstart, "name too long"); return -1; }
    }
    if (s[pos] == '=') {
      if (!t->key[0]) { set_error(err, errlen, pos, "a module token takes no value"); return -1; }
      t->has_value = 1;
      pos = read_value(s, pos + 1, t, err, errlen);
      if (pos == (size_t) -1) return -1;
    }
    if (s[pos] && !is_sep(s[pos])) {
      set_error(err, errlen, pos, "unexpected character");
      return -1;
    }
    if (fn(ctx, t, err, errlen) != 0) {
      /* Prefix the callback's message with the token's position. */
      char what[200];
      size_t i = 0;
      for (; err[i] && i + 1 < sizeof what; ++i) what[i] = err[i];
      what[i] = 0;
      set_error(err, errlen, start, what);
      return -1;
    }
  }
}

size_t igprof_options_quote(char *dst, size_t cap, const char *value)
{
  size_t n = 0;
#define PUT(c) do { if (n + 1 < cap) dst[n] = (c); ++n; } while (0)
  PUT('\'');
  for (const char *p = value; *p; ++p) {
    if (*p == '\'' || *p == '\\') PUT('\\');
    PUT(*p);
  }
  PUT('\'');
#undef PUT
  if (cap) dst[n < cap ? n : cap - 1] = 0;
  return n;
}

long igprof_options_int(const char *text, long lo, long hi)
{
  long v = 0;
  if (!text || !*text) return -1;
  for (const char *p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
    if (v > hi) return -1;
  }
  return v < lo ? -1 : v;
}

int igprof_options_size(const char *text, unsigned long long *out)
{
  const unsigned long long limit = 1ull << 62;
  unsigned long long v = 0;
  const char *p = text;
  if (!p || *p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; ++p) {
    v = v * 10 + (unsigned) (*p - '0');
    if (v > limit) return -1;
  }
  int shift = 0;
  switch (*p) {
  case 0: break;
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  default: return -1;
  }
  if (*p && p[1]) return -1;
  if (v > limit >> shift) return -1;
  *out = v << shift;
  return 0;
}

long igprof_options_ms(const char *text)
{
  size_t len = text ? strlen(text) : 0;
  char digits[16];
  if (len <= 2 || strcmp(text + len - 2, "ms") != 0 || len - 2 >= sizeof digits) return -1;
  memcpy(digits, text, len - 2);
  digits[len - 2] = 0;
  return igprof_options_int(digits, 1, 3600000);
}

int igprof_options_timeline(const char *text, unsigned long long *bytes, unsigned long long *ms)
{
  size_t len = text ? strlen(text) : 0;
  if (len > 2 && strcmp(text + len - 2, "ms") == 0) {
    long v = igprof_options_ms(text);
    if (v < 0) return -1;
    *ms = (unsigned long long) v;
    return 0;
  }
  unsigned long long v;
  if (igprof_options_size(text, &v) != 0 || v == 0) return -1;
  *bytes = v;
  return 0;
}

static const struct { const char *name; int sig; } signal_names[] = {
  {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
  {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},
  {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"URG", SIGURG}, {"XCPU", SIGXCPU},
  {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
  {"IO", SIGIO}, {"PWR", SIGPWR}, {"SYS", SIGSYS},
};

int igprof_options_signal(const char *text)
{
  int sig = -1;
  if (!text) return -1;
  if (text[0] >= '0' && text[0] <= '9') {
    sig = (int) igprof_options_int(text, 1, 64);
  } else {
    const char *name = strncmp(text, "SIG", 3) == 0 ? text + 3 : text;
    for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; ++i)
      if (strcmp(name, signal_names[i].name) == 0) sig = signal_names[i].sig;
    if (strncmp(name, "RTMIN+", 6) == 0) {
      long off = igprof_options_int(name + 6, 0, 64);
      if (off >= 0) sig = SIGRTMIN + (int) off;
    }
  }
  if (sig <= 0 || sig >= NSIG) return -1;
  switch (sig) {
  case SIGKILL: case SIGSTOP: case SIGSEGV: case SIGBUS: case SIGABRT: case SIGFPE: case SIGILL:
    return -1;
  default:
    return sig;
  }
}
