/* Small building blocks of igprof-analyse: checked allocation, fatal errors,
 * an append-only string pool with interning, and an integer-keyed hash map.
 * Everything the reader touches per dump line is allocation-free once these
 * structures have grown to the size of the profile. */
#ifndef IGPROF_ANALYSE_UTIL_H
#define IGPROF_ANALYSE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* Every error exit goes through here: exit(status), or the hook when one is
 * set (the fuzzing harness longjmps out instead of exiting). */
extern void (*analyse_exit_hook)(int status);
_Noreturn void analyse_exit(int status);

/* The name errors start with: "igprof-analyse" unless the program sets it. */
extern const char *program_name;

/* Print "<program_name>: <message>" on stderr and exit 1. */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "<program_name>: warning: <message>" on stderr. */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Every figure of a profile is an exact int64_t in [-INT64_MAX, INT64_MAX]
 * (INT64_MIN is left out so that negating or taking |v| is always defined).
 * These compute a + b and a - b; they return 0 and leave *out unchanged when
 * the result would leave that range, so callers report the overflow instead
 * of wrapping. */
static inline int value_add(int64_t a, int64_t b, int64_t *out)
{
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r == INT64_MIN) return 0;
  *out = r;
  return 1;
}

static inline int value_sub(int64_t a, int64_t b, int64_t *out)
{
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r) || r == INT64_MIN) return 0;
  *out = r;
  return 1;
}

#define VALUE_RANGE_TEXT "-9'223'372'036'854'775'807 to 9'223'372'036'854'775'807"

/* The message for a sum that left that range (what = which sum). */
_Noreturn void fatal_overflow(const char *what);

/* Grow *array (element size elem) so that index `need - 1` is valid. */
void grow_array(void **array, size_t *cap, size_t need, size_t elem);
#define GROW(arr, cap, need) grow_array((void **) &(arr), &(cap), (need), sizeof(*(arr)))

/* Interned strings: each distinct string gets a dense id starting at 0.
 * Strings are NUL-terminated and never move once interned. */
struct strpool {
  char **chunks;       /* storage chunks, each at least 1 MiB */
  size_t nchunks, chunk_cap, chunk_used, chunk_size;
  const char **str;    /* id -> string */
  uint32_t *len;       /* id -> length */
  uint64_t *hash;      /* id -> hash */
  size_t count, cap;
  uint32_t *slots;     /* open addressing: id + 1, 0 = empty */
  size_t nslots, nindexed;   /* nindexed: ids that have a slot (strpool_add's have none) */
};

void strpool_init(struct strpool *p);
void strpool_free(struct strpool *p);
/* Id of s[0..len), interning it if new. */
uint32_t strpool_intern(struct strpool *p, const char *s, size_t len);
/* Store s[0..len) under a new id without interning it: strpool_find and
 * strpool_intern never return that id, even for an equal string. */
uint32_t strpool_add(struct strpool *p, const char *s, size_t len);
/* Id of s[0..len) or UINT32_MAX if absent. */
uint32_t strpool_find(const struct strpool *p, const char *s, size_t len);
static inline const char *strpool_get(const struct strpool *p, uint32_t id) { return p->str[id]; }

/* Map from a 64-bit key to a 32-bit value (open addressing, linear probe). */
struct idmap {
  uint64_t *keys;
  uint32_t *vals;      /* value + 1; 0 = empty slot */
  size_t nslots, count;
};

void idmap_init(struct idmap *m);
void idmap_free(struct idmap *m);
void idmap_clear(struct idmap *m);
/* Returns 1 and sets *val when present. */
int idmap_get(const struct idmap *m, uint64_t key, uint32_t *val);
void idmap_put(struct idmap *m, uint64_t key, uint32_t val);

uint64_t hash_bytes(const void *data, size_t len);
static inline uint64_t hash_u64(uint64_t x)
{
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Format v with ' as thousands separator ("-1'234'567"); returns length. */
int format_thousands(char *buf, size_t cap, int64_t v);
/* Format v rounded to 2 decimals with thousands separators ("1'234.50"). */
int format_thousands_2dp(char *buf, size_t cap, double v);

/* The unit of a counter's values, as reports name it: "seconds" for a
 * sampled (timed) profile, "microseconds" for MEM_LIFETIME (summed block
 * ages), "bytes" for the other MEM_* counters, "counts" otherwise. */
const char *counter_unit(const char *key, int is_time);

/* Length (1-4) of the valid UTF-8 sequence at p, 0 if p does not start one. */
int utf8_sequence_length(const unsigned char *p);

/* Write s as a JSON string literal (with quotes). */
void json_write_string(FILE *out, const char *s);

/* Write s as HTML text: &<>" escaped; bytes that are not UTF-8 and control
 * characters other than tab become U+FFFD. NULL writes nothing. */
void html_write_string(FILE *out, const char *s);

#endif
