/* Allocation-free formatting: a small snprintf for messages and a buffered
 * writer for dumps (plain or deflated through zlib on our own memory).
 * Nothing here calls into stdio, so it works inside malloc hooks, in signal
 * handlers and after the application closed or replaced stdio. */
#include "internal.h"
#include "dump_format.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------- */
/* Messages                                                          */
/* ---------------------------------------------------------------- */

struct sink {
  char *buf;
  size_t cap, len;
};

static void put(struct sink *s, char c)
{
  if (s->len + 1 < s->cap) s->buf[s->len] = c;
  s->len++;
}

static void put_unsigned(struct sink *s, unsigned long long v, unsigned base)
{
  char tmp[24];
  int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v % base]; v /= base; } while (v);
  while (n) put(s, tmp[--n]);
}

size_t igprof_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
  struct sink s = {buf, cap, 0};
  for (const char *p = fmt; *p; ++p) {
    if (*p != '%') { put(&s, *p); continue; }
    ++p;
    int lng = 0, precision = -1;
    if (p[0] == '.' && p[1] == '*') { precision = va_arg(ap, int); p += 2; }
    while (*p == 'l') { ++lng; ++p; }
    if (*p == 'z') { lng = 1; ++p; }
    switch (*p) {
    case 's': {
      const char *str = va_arg(ap, const char *);
      if (!str) str = "(null)";
      for (int i = 0; str[i] && (precision < 0 || i < precision); ++i) put(&s, str[i]);
      break;
    }
    case 'c': put(&s, (char) va_arg(ap, int)); break;
    case 'd': case 'i': {
      long long v = lng >= 2 ? va_arg(ap, long long) : lng ? va_arg(ap, long) : va_arg(ap, int);
      unsigned long long u = (unsigned long long) v;
      if (v < 0) { put(&s, '-'); u = 0ULL - u; }
      put_unsigned(&s, u, 10);
      break;
    }
    case 'u': case 'x': {
      unsigned long long v = lng >= 2 ? va_arg(ap, unsigned long long)
                           : lng ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
      put_unsigned(&s, v, *p == 'x' ? 16 : 10);
      break;
    }
    case 'p':
      put(&s, '0'); put(&s, 'x');
      put_unsigned(&s, (uintptr_t) va_arg(ap, void *), 16);
      break;
    case '%': put(&s, '%'); break;
    case 0: --p; break;
    default: put(&s, '%'); put(&s, *p); break;
    }
  }
  if (cap) buf[s.len < cap ? s.len : cap - 1] = 0;
  return s.len;
}

size_t igprof_format(char *buf, size_t cap, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  size_t n = igprof_vformat(buf, cap, fmt, ap);
  va_end(ap);
  return n;
}

void igprof_warn(const char *fmt, ...)
{
  char line[1024];
  int saved = errno;
  size_t n = igprof_format(line, sizeof line, "igprof(%d): ", (int) getpid());
  va_list ap;
  va_start(ap, fmt);
  n += igprof_vformat(line + n, sizeof line - n - 1, fmt, ap);
  va_end(ap);
  if (n > sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  ssize_t w = write(2, line, n);
  (void) w;
  errno = saved;
}

/* ---------------------------------------------------------------- */
/* Dump output                                                       */
/* ---------------------------------------------------------------- */

static void write_all(struct igprof_out *o, const char *p, size_t n)
{
  while (n && !o->failed) {
    ssize_t w = write(o->fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      o->failed = errno ? errno : EIO;
      return;
    }
    p += w;
    n -= (size_t) w;
  }
}

static void deflate_out(struct igprof_out *o, int flush)
{
  z_stream *z = o->zstream;
  z->next_in = (Bytef *) o->buf;
  z->avail_in = (uInt) o->len;
  do {
    z->next_out = (Bytef *) o->zbuf;
    z->avail_out = (uInt) o->zcap;
    int rc = deflate(z, flush);
    if (rc == Z_STREAM_ERROR) { o->failed = EIO; return; }
    write_all(o, o->zbuf, o->zcap - z->avail_out);
  } while (z->avail_out == 0 && !o->failed);
}

void igprof_out_flush(struct igprof_out *o)
{
  if (o->zstream) deflate_out(o, Z_NO_FLUSH);
  else write_all(o, o->buf, o->len);
  o->len = 0;
}

void igprof_out_finish(struct igprof_out *o)
{
  if (o->zstream) {
    deflate_out(o, Z_FINISH);
    deflateEnd(o->zstream);
    o->zstream = NULL;
  } else {
    write_all(o, o->buf, o->len);
  }
  o->len = 0;
}

void igprof_out_bytes(struct igprof_out *o, const char *s, size_t n)
{
  while (n) {
    if (o->len == o->cap) igprof_out_flush(o);
    size_t k = o->cap - o->len < n ? o->cap - o->len : n;
    for (size_t i = 0; i < k; ++i) o->buf[o->len + i] = s[i];
    o->len += k;
    s += k;
    n -= k;
  }
}

void igprof_out_char(struct igprof_out *o, char c)
{
  if (o->len == o->cap) igprof_out_flush(o);
  o->buf[o->len++] = c;
}

void igprof_out_str(struct igprof_out *o, const char *s)
{
  size_t n = 0;
  while (s[n]) ++n;
  igprof_out_bytes(o, s, n);
}

static void out_unsigned(struct igprof_out *o, uint64_t v, unsigned base)
{
  char tmp[24];
  int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v % base]; v /= base; } while (v);
  char rev[24];
  for (int i = 0; i < n; ++i) rev[i] = tmp[n - 1 - i];
  igprof_out_bytes(o, rev, (size_t) n);
}

/* Hex by shifts, written straight into the buffer: a dump is mostly hex
 * numbers (a compiler's has a few hundred thousand). */
void igprof_out_hex(struct igprof_out *o, uint64_t v)
{
  int digits = (67 - __builtin_clzll(v | 1)) / 4; /* significant hex digits, 1 for 0 */
  if (o->cap - o->len < (size_t) digits) igprof_out_flush(o);
  char *p = o->buf + o->len + digits;
  do { *--p = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
  o->len += (size_t) digits;
}

void igprof_out_dec(struct igprof_out *o, uint64_t v) { out_unsigned(o, v, 10); }

void igprof_out_shex(struct igprof_out *o, int64_t v)
{
  if (v < 0) {
    igprof_out_char(o, '-');
    igprof_out_hex(o, 0ULL - (uint64_t) v);
  } else {
    igprof_out_hex(o, (uint64_t) v);
  }
}

void igprof_out_name(struct igprof_out *o, const char *s)
{
  while (*s) {
    /* The run of characters that stay as they are, in one copy. */
    size_t run = 0;
    while (s[run] && !igprof_name_needs_escape((unsigned char) s[run])) ++run;
    if (run) {
      igprof_out_bytes(o, s, run);
      s += run;
      continue;
    }
    char esc[3];
    size_t n = igprof_name_escape(esc, sizeof esc, s, 1);
    igprof_out_bytes(o, esc, n);
    ++s;
  }
}

void igprof_pipe_guard_begin(struct igprof_pipe_guard *g)
{
  sigset_t pipe_only, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &pipe_only, &g->old, _NSIG / 8);
  g->was_pending = syscall(SYS_rt_sigpending, &pending, _NSIG / 8) == 0 && sigismember(&pending, SIGPIPE);
}

void igprof_pipe_guard_end(struct igprof_pipe_guard *g, int got_epipe)
{
  if (got_epipe && !g->was_pending) {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    struct timespec zero = {0, 0};
    int saved = errno;
    syscall(SYS_rt_sigtimedwait, &pipe_only, NULL, &zero, _NSIG / 8);
    errno = saved;
  }
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &g->old, NULL, _NSIG / 8);
}
