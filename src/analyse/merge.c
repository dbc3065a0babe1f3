#include "merge.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct substitution {
  pcre2_code *re;
  char *with;               /* replacement; \0..\9 are capture groups */
};

struct merge_rules {
  int merge_libraries;
  struct substitution *subs;
  size_t nsubs, subs_cap;
  pcre2_code **ancestors;   /* -ma RE1>RE2>...>REn */
  size_t nancestors;
  char *ancestors_new;      /* -ma .../NEW */
  pcre2_match_data *md;
  struct idmap mapped;      /* sym -> -ml/-mr result */
  struct idmap matches;     /* (sym, pattern) -> 1 + matched */
  struct idmap renamed;     /* sym -> -ma descendant name ("NEW:sym") */
  char *buf; size_t buf_cap;
};

static pcre2_code *compile(const char *pattern, size_t len, const char *option)
{
  int err;
  PCRE2_SIZE off;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR) pattern, len, 0, &err, &off, NULL);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fatal("%s: bad regular expression '%.*s' at offset %zu: %s", option, (int) len, pattern,
          (size_t) off, (char *) msg);
  }
  return re;
}

/* 's/RE/WITH/' rules separated by ';'; any character after 's' is the separator. */
static void parse_substitutions(struct merge_rules *m, const char *spec)
{
  const char *p = spec;
  while (*p) {
    if (*p != 's' || !p[1]) fatal("-mr: expected 's<sep>REGEXP<sep>REPLACEMENT<sep>' at '%s'", p);
    char sep = p[1];
    const char *re = p + 2, *re_end = strchr(re, sep);
    if (!re_end) fatal("-mr: missing separator '%c' after the regular expression in '%s'", sep, p);
    const char *with = re_end + 1, *with_end = strchr(with, sep);
    if (!with_end) fatal("-mr: missing closing separator '%c' after the replacement in '%s'", sep, p);
    GROW(m->subs, m->subs_cap, m->nsubs + 1);
    struct substitution *s = &m->subs[m->nsubs++];
    s->re = compile(re, (size_t) (re_end - re), "-mr");
    s->with = xmalloc((size_t) (with_end - with) + 1);
    memcpy(s->with, with, (size_t) (with_end - with));
    s->with[with_end - with] = 0;
    p = with_end + 1;
    if (*p == ';') ++p;
    else if (*p) fatal("-mr: expected ';' between rules at '%s'", p);
  }
}

/* 'RE1>RE2>...>REn/NEW'. The last '/' separates the new name, so patterns
 * may contain '/' but NEW may not. */
static void parse_ancestors(struct merge_rules *m, const char *spec)
{
  const char *slash = strrchr(spec, '/');
  if (!slash || slash == spec || !slash[1]) fatal("-ma: expected 'REGEXP1>REGEXP2>...>REGEXPn/NEWNAME', got '%s'", spec);
  m->ancestors_new = xstrdup(slash + 1);
  const char *p = spec;
  while (p < slash) {
    const char *gt = memchr(p, '>', (size_t) (slash - p));
    const char *end = gt ? gt : slash;
    if (end == p) fatal("-ma: empty pattern in '%s'", spec);
    if (m->nancestors == 255) fatal("-ma: at most 255 ancestor patterns");
    m->ancestors = xrealloc(m->ancestors, (m->nancestors + 1) * sizeof(*m->ancestors));
    m->ancestors[m->nancestors++] = compile(p, (size_t) (end - p), "-ma");
    p = end + 1;
  }
}

struct merge_rules *merge_rules_new(int merge_libraries, const char *regexp_spec, const char *ancestors_spec)
{
  if (!merge_libraries && !regexp_spec && !ancestors_spec) return NULL;
  struct merge_rules *m = xcalloc(1, sizeof(*m));
  m->merge_libraries = merge_libraries;
  if (regexp_spec) {
    if (!*regexp_spec) fatal("-mr: empty rule");
    parse_substitutions(m, regexp_spec);
  }
  if (ancestors_spec) parse_ancestors(m, ancestors_spec);
  m->md = pcre2_match_data_create(10, NULL);
  idmap_init(&m->mapped);
  idmap_init(&m->matches);
  idmap_init(&m->renamed);
  return m;
}

void merge_rules_free(struct merge_rules *m)
{
  if (!m) return;
  for (size_t i = 0; i < m->nsubs; ++i) { pcre2_code_free(m->subs[i].re); free(m->subs[i].with); }
  for (size_t i = 0; i < m->nancestors; ++i) pcre2_code_free(m->ancestors[i]);
  free(m->subs); free(m->ancestors); free(m->ancestors_new); free(m->buf);
  pcre2_match_data_free(m->md);
  idmap_free(&m->mapped); idmap_free(&m->matches); idmap_free(&m->renamed);
  free(m);
}

int merge_collapses(const struct merge_rules *m) { return m && (m->merge_libraries || m->nsubs); }
int merge_has_ancestors(const struct merge_rules *m) { return m && m->nancestors; }

static void buf_append(struct merge_rules *m, size_t *len, const char *s, size_t n)
{
  GROW(m->buf, m->buf_cap, *len + n + 1);
  memcpy(m->buf + *len, s, n);
  *len += n;
  m->buf[*len] = 0;
}

/* Global substitution of s->re in subject; returns 1 and the result in
 * m->buf when anything matched. */
static int substitute(struct merge_rules *m, const struct substitution *s, const char *subject)
{
  size_t slen = strlen(subject), start = 0, out = 0;
  int matched = 0;
  buf_append(m, &out, "", 0);
  while (start <= slen) {
    int rc = pcre2_match(s->re, (PCRE2_SPTR) subject, slen, start, 0, m->md, NULL);
    if (rc < 0) break;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
    matched = 1;
    buf_append(m, &out, subject + start, ov[0] - start);
    for (const char *w = s->with; *w; ++w) {
      if (*w == '\\' && w[1] >= '0' && w[1] <= '9') {
        int g = w[1] - '0';
        if (g < rc && ov[2 * g] != PCRE2_UNSET) buf_append(m, &out, subject + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
        ++w;
      } else if (*w == '\\' && w[1] == '\\') {
        buf_append(m, &out, "\\", 1);
        ++w;
      } else {
        buf_append(m, &out, w, 1);
      }
    }
    if (ov[1] == ov[0]) {
      if (ov[1] < slen) buf_append(m, &out, subject + ov[1], 1);
      start = ov[1] + 1;
    } else {
      start = ov[1];
    }
  }
  if (start < slen) buf_append(m, &out, subject + start, slen - start);
  return matched;
}

uint32_t merge_map_symbol(struct merge_rules *m, struct symtab *st, uint32_t sym)
{
  uint32_t out;
  if (!m || (!m->merge_libraries && !m->nsubs)) return sym;
  if (idmap_get(&m->mapped, sym, &out)) return out;
  uint32_t file = st->file_of[sym];
  out = sym;
  if (m->merge_libraries) {
    const char *path = symtab_file_display(st, sym);
    out = symtab_symbol(st, path, strlen(path), file);
  }
  /* The first rule that changes the name wins; a rule that does not match
   * the name is tried on the library path. */
  for (size_t i = 0; i < m->nsubs; ++i) {
    const char *name = symtab_name(st, out);
    if (substitute(m, &m->subs[i], name) && strcmp(m->buf, name) != 0) {
      out = symtab_symbol(st, m->buf, strlen(m->buf), file);
      break;
    }
    const char *path = symtab_file_display(st, out);
    if (substitute(m, &m->subs[i], path) && strcmp(m->buf, path) != 0) {
      out = symtab_symbol(st, m->buf, strlen(m->buf), file);
      break;
    }
  }
  idmap_put(&m->mapped, sym, out);
  return out;
}

static int ancestor_matches(struct merge_rules *m, struct symtab *st, uint32_t sym, uint32_t pattern)
{
  uint64_t key = ((uint64_t) sym << 8) | pattern;
  uint32_t v;
  if (idmap_get(&m->matches, key, &v)) return (int) v;
  const char *name = symtab_name(st, sym);
  v = pcre2_match(m->ancestors[pattern], (PCRE2_SPTR) name, strlen(name), 0, 0, m->md, NULL) >= 0;
  idmap_put(&m->matches, key, v);
  return (int) v;
}

uint32_t merge_ancestors_apply(struct merge_rules *m, struct symtab *st, uint32_t sym, uint32_t *state)
{
  uint32_t n = (uint32_t) m->nancestors;
  if (*state >= n) {
    /* Below a fully matched ancestor chain: "NEW:<name>". */
    uint32_t out;
    if (idmap_get(&m->renamed, sym, &out)) return out;
    const char *name = symtab_name(st, sym);
    size_t len = 0;
    buf_append(m, &len, m->ancestors_new, strlen(m->ancestors_new));
    buf_append(m, &len, ":", 1);
    buf_append(m, &len, name, strlen(name));
    out = symtab_symbol(st, m->buf, len, st->file_of[sym]);
    idmap_put(&m->renamed, sym, out);
    return out;
  }
  if (!ancestor_matches(m, st, sym, *state)) return sym;
  if (++*state < n) return sym;
  return symtab_symbol(st, m->ancestors_new, strlen(m->ancestors_new), st->file_of[sym]);
}
