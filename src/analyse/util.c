#include "util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void (*analyse_exit_hook)(int status);
const char *program_name = "igprof-analyse";

void analyse_exit(int status)
{
  if (analyse_exit_hook) analyse_exit_hook(status);
  exit(status);
}

void *xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (!p) fatal("out of memory (%zu bytes)", n);
  return p;
}

void *xcalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) fatal("out of memory (%zu x %zu bytes)", n, size);
  return p;
}

void *xrealloc(void *p, size_t n)
{
  void *q = realloc(p, n ? n : 1);
  if (!q) fatal("out of memory (%zu bytes)", n);
  return q;
}

char *xstrdup(const char *s)
{
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

void fatal(const char *fmt, ...)
{
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "%s: ", program_name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  analyse_exit(1);
}

void warn(const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: warning: ", program_name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void fatal_overflow(const char *what)
{
  fatal("%s exceeds the 64-bit range of counter values (" VALUE_RANGE_TEXT ")", what);
}

void grow_array(void **array, size_t *cap, size_t need, size_t elem)
{
  if (need <= *cap) return;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  *array = xrealloc(*array, n * elem);
  memset((char *) *array + *cap * elem, 0, (n - *cap) * elem);
  *cap = n;
}

uint64_t hash_bytes(const void *data, size_t len)
{
  /* FNV-1a, finished with a 64-bit mixer so that the low bits spread well. */
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < len; ++i) { h ^= p[i]; h *= 0x100000001b3ULL; }
  return hash_u64(h);
}

/* ---- string pool ---- */

void strpool_init(struct strpool *p)
{
  memset(p, 0, sizeof(*p));
  p->nslots = 1024;
  p->slots = xcalloc(p->nslots, sizeof(*p->slots));
}

void strpool_free(struct strpool *p)
{
  for (size_t i = 0; i < p->nchunks; ++i) free(p->chunks[i]);
  free(p->chunks); free(p->str); free(p->len); free(p->hash); free(p->slots);
  memset(p, 0, sizeof(*p));
}

static char *strpool_store(struct strpool *p, const char *s, size_t len)
{
  if (!p->nchunks || p->chunk_used + len + 1 > p->chunk_size) {
    size_t size = len + 1 > (1u << 20) ? len + 1 : (1u << 20);
    GROW(p->chunks, p->chunk_cap, p->nchunks + 1);
    p->chunks[p->nchunks++] = xmalloc(size);
    p->chunk_size = size;
    p->chunk_used = 0;
  }
  char *dst = p->chunks[p->nchunks - 1] + p->chunk_used;
  memcpy(dst, s, len);
  dst[len] = 0;
  p->chunk_used += len + 1;
  return dst;
}

static void strpool_rehash(struct strpool *p)
{
  size_t n = p->nslots * 2;
  uint32_t *slots = xcalloc(n, sizeof(*slots));
  /* From the old slots, not from every id: strpool_add's ids have none. */
  for (size_t old = 0; old < p->nslots; ++old) {
    uint32_t v = p->slots[old];
    if (!v) continue;
    size_t i = p->hash[v - 1] & (n - 1);
    while (slots[i]) i = (i + 1) & (n - 1);
    slots[i] = v;
  }
  free(p->slots);
  p->slots = slots;
  p->nslots = n;
}

static size_t strpool_slot(const struct strpool *p, const char *s, size_t len, uint64_t h)
{
  size_t i = h & (p->nslots - 1);
  for (;;) {
    uint32_t v = p->slots[i];
    if (!v) return i;
    uint32_t id = v - 1;
    if (p->hash[id] == h && p->len[id] == len && memcmp(p->str[id], s, len) == 0) return i;
    i = (i + 1) & (p->nslots - 1);
  }
}

uint32_t strpool_find(const struct strpool *p, const char *s, size_t len)
{
  size_t i = strpool_slot(p, s, len, hash_bytes(s, len));
  return p->slots[i] ? p->slots[i] - 1 : UINT32_MAX;
}

/* Append s[0..len) with hash h as a new id. */
static uint32_t strpool_append(struct strpool *p, const char *s, size_t len, uint64_t h)
{
  if (p->count >= UINT32_MAX - 1) fatal("too many distinct names");
  size_t id = p->count;
  size_t cap = p->cap;
  GROW(p->str, cap, id + 1);
  cap = p->cap; GROW(p->len, cap, id + 1);
  cap = p->cap; GROW(p->hash, cap, id + 1);
  p->cap = cap;
  p->str[id] = strpool_store(p, s, len);
  p->len[id] = (uint32_t) len;
  p->hash[id] = h;
  p->count++;
  return (uint32_t) id;
}

uint32_t strpool_add(struct strpool *p, const char *s, size_t len)
{
  return strpool_append(p, s, len, 0);
}

uint32_t strpool_intern(struct strpool *p, const char *s, size_t len)
{
  uint64_t h = hash_bytes(s, len);
  size_t i = strpool_slot(p, s, len, h);
  if (p->slots[i]) return p->slots[i] - 1;
  uint32_t id = strpool_append(p, s, len, h);
  p->slots[i] = id + 1;
  if (++p->nindexed * 2 > p->nslots) strpool_rehash(p);
  return id;
}

/* ---- integer map ---- */

void idmap_init(struct idmap *m)
{
  m->nslots = 64;
  m->count = 0;
  m->keys = xmalloc(m->nslots * sizeof(*m->keys));
  m->vals = xcalloc(m->nslots, sizeof(*m->vals));
}

void idmap_free(struct idmap *m)
{
  free(m->keys); free(m->vals);
  memset(m, 0, sizeof(*m));
}

void idmap_clear(struct idmap *m)
{
  memset(m->vals, 0, m->nslots * sizeof(*m->vals));
  m->count = 0;
}

int idmap_get(const struct idmap *m, uint64_t key, uint32_t *val)
{
  size_t i = hash_u64(key) & (m->nslots - 1);
  while (m->vals[i]) {
    if (m->keys[i] == key) { *val = m->vals[i] - 1; return 1; }
    i = (i + 1) & (m->nslots - 1);
  }
  return 0;
}

static void idmap_grow(struct idmap *m)
{
  struct idmap bigger = { 0 };
  bigger.nslots = m->nslots * 2;
  bigger.keys = xmalloc(bigger.nslots * sizeof(*bigger.keys));
  bigger.vals = xcalloc(bigger.nslots, sizeof(*bigger.vals));
  for (size_t i = 0; i < m->nslots; ++i)
    if (m->vals[i]) idmap_put(&bigger, m->keys[i], m->vals[i] - 1);
  idmap_free(m);
  *m = bigger;
}

void idmap_put(struct idmap *m, uint64_t key, uint32_t val)
{
  size_t i = hash_u64(key) & (m->nslots - 1);
  while (m->vals[i]) {
    if (m->keys[i] == key) { m->vals[i] = val + 1; return; }
    i = (i + 1) & (m->nslots - 1);
  }
  m->keys[i] = key;
  m->vals[i] = val + 1;
  if (++m->count * 2 > m->nslots) idmap_grow(m);
}

/* ---- number formatting ---- */

/* Insert ' every three digits of the decimal digit string digits[0..n). */
static int group_digits(char *buf, size_t cap, int negative, const char *digits, int n)
{
  char tmp[64];
  int o = 0;
  if (negative) tmp[o++] = '-';
  for (int i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) tmp[o++] = '\'';
    tmp[o++] = digits[i];
  }
  tmp[o] = 0;
  if ((size_t) o >= cap) return snprintf(buf, cap, "%s", tmp);
  memcpy(buf, tmp, (size_t) o + 1);
  return o;
}

/* Called for every number of a report: no printf. */
int format_thousands(char *buf, size_t cap, int64_t v)
{
  char digits[32];
  uint64_t mag = v < 0 ? (uint64_t) 0 - (uint64_t) v : (uint64_t) v;
  int n = 0;
  do { digits[sizeof(digits) - 1 - n++] = (char) ('0' + mag % 10); mag /= 10; } while (mag);
  return group_digits(buf, cap, v < 0, digits + sizeof(digits) - n, n);
}

int format_thousands_2dp(char *buf, size_t cap, double v)
{
  char digits[64];
  double r = round(fabs(v) * 100.) / 100.;
  int n = snprintf(digits, sizeof(digits), "%.2f", r);
  if (n < 3 || n >= (int) sizeof(digits)) return snprintf(buf, cap, "%.2f", v);
  int negative = v < 0 && r != 0;
  int len = group_digits(buf, cap, negative, digits, n - 3);
  if (len >= 0 && (size_t) len + 3 < cap) {
    memcpy(buf + len, digits + n - 3, 4);
    len += 3;
  }
  return len;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if it is not one. */
int utf8_sequence_length(const unsigned char *p)
{
  int n;
  unsigned min;
  unsigned cp;
  if (p[0] < 0x80) return 1;
  if ((p[0] & 0xe0) == 0xc0) { n = 2; cp = p[0] & 0x1f; min = 0x80; }
  else if ((p[0] & 0xf0) == 0xe0) { n = 3; cp = p[0] & 0x0f; min = 0x800; }
  else if ((p[0] & 0xf8) == 0xf0) { n = 4; cp = p[0] & 0x07; min = 0x10000; }
  else return 0;
  for (int i = 1; i < n; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

void json_write_string(FILE *out, const char *s)
{
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *) s; *p;) {
    int n = utf8_sequence_length(p);
    if (n == 0) { fputs("\\ufffd", out); ++p; continue; }   /* not UTF-8: replacement char */
    if (n > 1) { fwrite(p, 1, (size_t) n, out); p += n; continue; }
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    default:
      if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\u%04x", *p);
      else fputc(*p, out);
    }
    ++p;
  }
  fputc('"', out);
}

void html_write_string(FILE *out, const char *s)
{
  for (const unsigned char *p = (const unsigned char *) (s ? s : ""); *p; ++p) {
    int n = utf8_sequence_length(p);
    if (n == 0) { fputs("&#xfffd;", out); continue; }
    if (n > 1) { fwrite(p, 1, (size_t) n, out); p += n - 1; continue; }
    switch (*p) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    default:
      if (*p == '\t') fputs("&#9;", out);
      else if (*p < 0x20 || *p == 0x7f) fputs("&#xfffd;", out);   /* not allowed in HTML text */
      else fputc(*p, out);
    }
  }
}

const char *counter_unit(const char *key, int is_time)
{
  if (is_time) return "seconds";
  if (strcmp(key, "MEM_LIFETIME") == 0) return "microseconds";
  return strncmp(key, "MEM_", 4) == 0 ? "bytes" : "counts";
}
