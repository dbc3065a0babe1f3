/* Definitions shared by the dump writer (libigprof.so) and the dump reader
 * (igprof-analyse). This header is the only code the two sides share.
 *
 * The dump is IgProf's text format, HEX variant (docs/dump-format.md):
 *
 *   P=(HEX ID=<pid> N=(<program>) T=<tick period, %f>)
 *   C<depth> FN<id>=(F<fid>=(<path>)+<lib offset> N=(<symbol>))+<sym offset> V<cid>=(<COUNTER>):(<ticks>,<value>,<peak>);LK=(0x<addr>,<size>)...
 *
 * Names and paths are written with a percent escape so that a ')' or a newline
 * in a name cannot end the field early: the bytes '%', ')' and every byte below
 * 0x20 or equal to 0x7f are written as '%' followed by two upper-case hex digits.
 * IgProf's own readers show such a name with the escape visible but still parse
 * the dump; ours decode it. A '%' not followed by two hex digits is taken
 * literally (IgProf's dumps never escape).
 */
#ifndef IGPROF_DUMP_FORMAT_H
#define IGPROF_DUMP_FORMAT_H

#include <stddef.h>

#define IGPROF_COUNTER_PERF_TICKS "PERF_TICKS"
#define IGPROF_COUNTER_MEM_TOTAL  "MEM_TOTAL"
#define IGPROF_COUNTER_MEM_LIVE   "MEM_LIVE"
#define IGPROF_COUNTER_MEM_MAX    "MEM_MAX"

/* Does byte c need the percent escape inside a name or path? */
static inline int igprof_name_needs_escape(unsigned char c)
{
  return c == '%' || c == ')' || c < 0x20 || c == 0x7f;
}

static inline int igprof_hex_digit_value(unsigned char c)
{
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Write the escaped form of src[0..len) into dst (capacity cap). Returns the
 * length the escaped form needs; writes nothing past cap (no terminator). */
static inline size_t igprof_name_escape(char *dst, size_t cap, const char *src, size_t len)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (size_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char) src[i];
    if (igprof_name_needs_escape(c)) {
      if (n + 3 <= cap) { dst[n] = '%'; dst[n + 1] = hex[c >> 4]; dst[n + 2] = hex[c & 15]; }
      n += 3;
    } else {
      if (n < cap) dst[n] = (char) c;
      n += 1;
    }
  }
  return n;
}

/* Decode s[0..len) in place (the reader's side); returns the decoded length.
 * "%00" stays literal: a decoded name remains a C string (the writer never
 * writes it: a name has no NUL byte). */
static inline size_t igprof_name_unescape(char *s, size_t len)
{
  size_t o = 0;
  for (size_t i = 0; i < len; ++i) {
    int hi, lo;
    if (s[i] == '%' && i + 2 < len && (hi = igprof_hex_digit_value((unsigned char) s[i + 1])) >= 0
        && (lo = igprof_hex_digit_value((unsigned char) s[i + 2])) >= 0 && (hi | lo)) {
      s[o++] = (char) (hi << 4 | lo);
      i += 2;
    } else {
      s[o++] = s[i];
    }
  }
  return o;
}

#endif
