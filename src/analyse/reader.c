#include "reader.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/dump_format.h"
#include "util.h"

/* One FN definition of the current dump, after symbolisation and renaming. */
struct frame {
  uint32_t raw_sym;        /* symbol before -ml/-mr (what filters look at) */
  uint32_t first, count;   /* mapped symbols in reader.frame_syms, outermost first */
  uint8_t profiler;        /* defined in the profiler's own library */
  uint64_t line;           /* where the dump defined it */
};

/* An F or V definition of the current dump. */
struct file_def { uint32_t file; uint64_t line; };
struct counter_def { uint8_t is_key, is_timeline; uint32_t column; uint64_t line; };   /* is_timeline: HEAP_TIMELINE or HEAP_SNAPSHOT */

/* A counter of the current line, for the tree's columns (all_counters). */
struct column_value { uint32_t column; int64_t value, ticks; };

enum section { SECTION_STACKS, SECTION_TIMELINE, SECTION_SNAPSHOT, SECTION_HISTOGRAM, SECTION_SAMPLING };

/* A line read before the report counter was known (it carries no counter). */
struct pending_line { uint32_t depth, frame; };

struct line_source {
  gzFile gz;
  const char *path;
  char *buf; size_t len, pos;
  char *line; size_t line_cap;
  uint64_t lineno;
  int eof;
};

struct reader {
  struct read_options opt;
  struct symtab *st;
  struct call_tree *tree;
  char *key;
  int key_is_max, key_is_time, key_is_mem;
  double tick_period;
  int have_period;
  struct strpool counter_names;   /* every counter name seen, for messages; id = column */
  struct column_value *line_columns; size_t nline_columns, line_columns_cap;

  /* per dump */
  struct line_source src;
  int base;
  struct idmap fn_ids, file_ids, counter_ids;   /* id -> frame, file_defs, counter_defs index */
  struct file_def *file_defs; size_t nfile_defs, file_defs_cap;
  struct counter_def *counter_defs; size_t ncounter_defs, counter_defs_cap;
  uint32_t *fn_dense; size_t fn_dense_cap;   /* small FN ids -> frame + 1 (0 = none) */
  struct frame *frames; size_t nframes, frames_cap;
  uint32_t *frame_syms; size_t nframe_syms, frame_syms_cap;
  uint32_t cur_depth;
  uint32_t *path; uint32_t *ma_state; size_t path_cap;
  struct pending_line *pending; size_t npending, pending_cap;
  char *scratch; size_t scratch_cap;
  uint64_t lines_total;
  /* the heap timeline (docs/dump-format.md): lines under a depth-1 frame
   * @igprof_heap_timeline are samples, not stacks */
  int section;               /* enum section of the current depth-1 frame's lines */
  int dump_has_timeline, dump_has_histogram;
  struct heap_snapshot *snapshot; /* the one being read (section SNAPSHOT) */
  struct size_histogram sizes;
  struct mem_sampling sampling;
  int dump_has_sampling;
  char *dump_program;
  struct heap_timeline timeline;
};

#define CHUNK (256u * 1024u)

static _Noreturn void __attribute__((format(printf, 2, 3)))
parse_error(struct reader *rd, const char *fmt, ...)
{
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "%s:%" PRIu64 ": ", rd->src.path, rd->src.lineno);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  analyse_exit(1);
}

/* ---- line input over zlib (which reads uncompressed files transparently) ---- */

static void source_open(struct reader *rd, const char *path)
{
  struct line_source *s = &rd->src;
  s->path = path;
  s->lineno = 0;
  s->eof = 0;
  s->len = s->pos = 0;
  if (strcmp(path, "-") == 0) {
    s->path = "<stdin>";
    s->gz = gzdopen(dup(0), "rb");
  } else {
    s->gz = gzopen(path, "rb");
  }
  if (!s->gz) {
    fflush(stdout);
    fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno ? errno : ENOMEM));
    analyse_exit(1);
  }
  gzbuffer(s->gz, CHUNK);
}

static void source_fill(struct reader *rd)
{
  struct line_source *s = &rd->src;
  int n = gzread(s->gz, s->buf, CHUNK);
  uint64_t lineno = s->lineno;
  s->lineno = lineno + 1;    /* errors here concern the line being read */
  if (n < 0 || (n == 0 && !gzeof(s->gz))) {
    int err = 0;
    const char *msg = gzerror(s->gz, &err);
    if (err == Z_ERRNO) msg = strerror(errno);
    parse_error(rd, "read error: %s", msg);
  }
  if (n == 0) {
    int err = 0;
    const char *msg = gzerror(s->gz, &err);
    /* zlib prefixes its message with the path, which we print already. */
    size_t plen = strlen(s->path);
    if (!strncmp(msg, s->path, plen) && !strncmp(msg + plen, ": ", 2)) msg += plen + 2;
    if (err != Z_OK) parse_error(rd, "corrupt or truncated compressed data: %s", msg);
    s->eof = 1;
  }
  s->lineno = lineno;
  s->len = (size_t) (n > 0 ? n : 0);
  s->pos = 0;
}

/* Next line without its newline (in line and len); 0 at end of input. A final
 * line without a newline still counts. */
static int source_line(struct reader *rd, char **line, size_t *len)
{
  struct line_source *s = &rd->src;
  size_t used = 0;
  int have = 0;
  for (;;) {
    if (s->pos == s->len) {
      if (s->eof) break;
      source_fill(rd);
      if (s->len == 0) break;
    }
    char *start = s->buf + s->pos;
    size_t avail = s->len - s->pos;
    char *nl = memchr(start, '\n', avail);
    size_t n = nl ? (size_t) (nl - start) : avail;
    if (nl && !have) {
      /* Common case: the whole line is inside the buffer, no copy. */
      s->pos += n + 1;
      s->lineno++;
      start[n] = 0;
      *line = start;
      *len = n;
      return 1;
    }
    have = 1;
    GROW(s->line, s->line_cap, used + n + 1);
    memcpy(s->line + used, start, n);
    used += n;
    s->pos += n + (nl ? 1 : 0);
    if (nl) break;
  }
  if (!have) return 0;
  s->lineno++;
  s->line[used] = 0;
  *line = s->line;
  *len = used;
  return 1;
}

/* ---- token helpers; p walks the line, end is its NUL ---- */

static int expect(char **p, const char *lit)
{
  size_t n = strlen(lit);
  if (strncmp(*p, lit, n) != 0) return 0;
  *p += n;
  return 1;
}

static int parse_int(char **p, int base, int64_t *out)
{
  char *s = *p;
  int neg = 0;
  uint64_t v = 0;
  if (*s == '-') { neg = 1; ++s; }
  char *digits = s;
  for (;; ++s) {
    int d = igprof_hex_digit_value((unsigned char) *s);
    if (d < 0 || d >= base) break;
    if (v > (UINT64_MAX - (uint64_t) d) / (uint64_t) base) return 0;
    v = v * (uint64_t) base + (uint64_t) d;
  }
  if (s == digits || v > (uint64_t) INT64_MAX) return 0;
  *out = neg ? -(int64_t) v : (int64_t) v;
  *p = s;
  return 1;
}

static char *scratch(struct reader *rd, size_t n)
{
  GROW(rd->scratch, rd->scratch_cap, n + 1);
  return rd->scratch;
}

/* An FN/F/V id as the dump writes it (hexadecimal in HEX dumps). */
struct id_text { char s[24]; };

static struct id_text id_text(const struct reader *rd, int64_t id)
{
  struct id_text t;
  uint64_t mag = id < 0 ? (uint64_t) 0 - (uint64_t) id : (uint64_t) id;
  snprintf(t.s, sizeof(t.s), rd->base == 16 ? "%s%" PRIx64 : "%s%" PRIu64, id < 0 ? "-" : "", mag);
  return t;
}

/* ---- report counter ---- */

static void set_key(struct reader *rd, const char *name)
{
  size_t n = strlen(name);
  rd->key = xstrdup(name);
  rd->key_is_max = n >= 4 && strcmp(name + n - 4, "_MAX") == 0;
  rd->key_is_time = strcmp(name, "PERF_TICKS") == 0 || strncmp(name, "NRG_", 4) == 0;
  rd->key_is_mem = strncmp(name, "MEM_", 4) == 0;
}

struct reader *reader_new(const struct read_options *opts, struct symtab *st)
{
  struct reader *rd = xcalloc(1, sizeof(*rd));
  rd->opt = *opts;
  rd->st = st;
  if (opts->key) set_key(rd, opts->key);
  strpool_init(&rd->counter_names);
  idmap_init(&rd->fn_ids);
  idmap_init(&rd->file_ids);
  idmap_init(&rd->counter_ids);
  rd->src.buf = xmalloc(CHUNK);
  return rd;
}

void reader_free(struct reader *rd)
{
  if (!rd) return;
  if (rd->src.gz) gzclose(rd->src.gz);
  free(rd->key);
  free(rd->src.buf);
  free(rd->src.line);
  strpool_free(&rd->counter_names);
  free(rd->line_columns);
  idmap_free(&rd->fn_ids);
  free(rd->fn_dense);
  idmap_free(&rd->file_ids);
  idmap_free(&rd->counter_ids);
  free(rd->frames);
  free(rd->file_defs);
  free(rd->counter_defs);
  free(rd->frame_syms);
  free(rd->dump_program);
  free(rd->timeline.samples);
  for (size_t i = 0; i < rd->timeline.nsnapshots; ++i) tree_free(&rd->timeline.snapshots[i].tree);
  free(rd->timeline.snapshots);
  free(rd->timeline.path);
  free(rd->timeline.program);
  free(rd->path);
  free(rd->ma_state);
  free(rd->pending);
  free(rd->scratch);
  free(rd);
}

const char *reader_key(const struct reader *rd) { return rd->key; }
double reader_tick_period(const struct reader *rd) { return rd->tick_period; }
int reader_key_is_max(const struct reader *rd) { return rd->key_is_max; }
int reader_key_is_time(const struct reader *rd) { return rd->key_is_time; }

static size_t decode_name(char *s, size_t len);

/* ---- header: P=([HEX ]ID=<pid> N=(<program>) T=<period>) ---- */

#define TICK_PERIOD_MAX 1e6

static void parse_header(struct reader *rd, char *line, size_t len)
{
  char *p = line;
  int64_t pid;
  if (!expect(&p, "P=(")) parse_error(rd, "not an igprof dump: expected a header line starting with 'P=('");
  rd->base = expect(&p, "HEX ") ? 16 : 10;
  if (!expect(&p, "ID=") || !parse_int(&p, rd->base, &pid) || !expect(&p, " N=("))
    parse_error(rd, "malformed header: expected 'ID=<pid> N=(<program>)'");
  /* The program name may contain ')' in IgProf's unescaped dumps: the name
   * ends at the last ") T=". */
  char *t = NULL;
  for (char *q = p; (q = strstr(q, ") T=")) != NULL; ++q) t = q;
  if (!t) parse_error(rd, "malformed header: missing ') T=<tick period>'");
  free(rd->dump_program);
  rd->dump_program = xmalloc((size_t) (t - p) + 1);
  memcpy(rd->dump_program, p, (size_t) (t - p));
  decode_name(rd->dump_program, (size_t) (t - p));
  char *num = t + 4, *endp = NULL;
  errno = 0;
  double period = strtod(num, &endp);
  if (endp == num || *endp != ')' || endp + 1 != line + len)
    parse_error(rd, "malformed header: bad tick period '%.*s'", (int) (line + len - num), num);
  /* Times are ticks x period: only a finite, non-negative period of at most
   * TICK_PERIOD_MAX seconds keeps every time finite. */
  int nlen = (int) (endp - num);
  if (isnan(period)) parse_error(rd, "malformed header: tick period '%.*s' is not a number", nlen, num);
  if (isinf(period)) parse_error(rd, "malformed header: tick period '%.*s' is infinite", nlen, num);
  if (period < 0) parse_error(rd, "malformed header: tick period '%.*s' is negative", nlen, num);
  if (period > TICK_PERIOD_MAX)
    parse_error(rd, "malformed header: tick period '%.*s' is out of range (0 to %.0f seconds)", nlen, num, TICK_PERIOD_MAX);
  if (!rd->have_period) {
    rd->tick_period = period;
    rd->have_period = 1;
  } else if (period != rd->tick_period && rd->key_is_time) {
    warn("%s: tick period %f differs from the first input's %f; times use the first",
         rd->src.path, period, rd->tick_period);
  }
}

/* ---- symbol naming for an FN definition ---- */

static const char *base_name(const char *path)
{
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

static void add_frame_sym(struct reader *rd, uint32_t sym)
{
  if (rd->opt.merge) sym = merge_map_symbol(rd->opt.merge, rd->st, sym);
  GROW(rd->frame_syms, rd->frame_syms_cap, rd->nframe_syms + 1);
  rd->frame_syms[rd->nframe_syms++] = sym;
}

/* Writers number FN ids 0, 1, 2, ... so a plain array serves nearly every
 * lookup; other ids go to the hash map. */
#define FN_DENSE_LIMIT (1u << 24)

static void set_fn(struct reader *rd, int64_t id, uint32_t frame)
{
  if (id >= 0 && id < FN_DENSE_LIMIT) {
    GROW(rd->fn_dense, rd->fn_dense_cap, (size_t) id + 1);
    rd->fn_dense[id] = frame + 1;
  } else {
    idmap_put(&rd->fn_ids, (uint64_t) id, frame);
  }
}

static int get_fn(const struct reader *rd, int64_t id, uint32_t *frame)
{
  if (id >= 0 && id < FN_DENSE_LIMIT) {
    if ((size_t) id >= rd->fn_dense_cap || !rd->fn_dense[id]) return 0;
    *frame = rd->fn_dense[id] - 1;
    return 1;
  }
  return idmap_get(&rd->fn_ids, (uint64_t) id, frame);
}

/* Create frame for FN `id` with decoded name, file and offset. */
static void define_frame(struct reader *rd, int64_t id, const char *name, uint32_t file, int64_t fileoff)
{
  struct symtab *st = rd->st;
  const char *path = symtab_file_name(st, file);
  struct frame f = { 0 };
  f.first = (uint32_t) rd->nframe_syms;
  f.profiler = strstr(path, "libigprof") != NULL;
  int unnamed = name[0] == '@' && name[1] == '?';
  struct resolved_frame resolved[RESOLVE_MAX_FRAMES];
  size_t n = 0;
  if (rd->opt.resolver && *path && fileoff >= 0)
    n = resolver_lookup(rd->opt.resolver, path, (uint64_t) fileoff, resolved);
  if (n) {
    for (size_t i = 0; i < n; ++i) {
      const struct resolved_frame *r = &resolved[i];
      uint32_t sym = symtab_symbol(st, r->name, strlen(r->name), file);
      symtab_set_source(st, sym, r->function, r->source, r->line);
      if (fileoff >= 0) symtab_set_offset(st, sym, (uint64_t) fileoff);
      if (i == 0) f.raw_sym = sym;
      add_frame_sym(rd, sym);
    }
  } else {
    const char *shown = name;
    if (unnamed && rd->opt.resolver && *path) {
      /* -g found no symbol covering the address. */
      char *buf = scratch(rd, strlen(path) + 32);
      sprintf(buf, "%s+0x%" PRIx64, base_name(path), (uint64_t) fileoff);
      shown = buf;
    } else if (unnamed && fileoff > 0) {
      /* IgProf's naming of unresolved call sites. */
      char *buf = scratch(rd, strlen(path) + 64);
      if (*path) sprintf(buf, "@{%s+%" PRId64 "}", base_name(path), fileoff);
      else sprintf(buf, "@?0x%" PRIx64 "{<dynamically-generated>}", (uint64_t) fileoff);
      shown = buf;
    }
    f.raw_sym = symtab_symbol(st, shown, strlen(shown), file);
    if (fileoff >= 0) symtab_set_offset(st, f.raw_sym, (uint64_t) fileoff);
    add_frame_sym(rd, f.raw_sym);
  }
  f.count = (uint32_t) rd->nframe_syms - f.first;
  f.line = rd->src.lineno;
  GROW(rd->frames, rd->frames_cap, rd->nframes + 1);
  rd->frames[rd->nframes] = f;
  set_fn(rd, id, (uint32_t) rd->nframes);
  rd->nframes++;
}

/* Find the end of a "(...)" field that is followed by `after`; IgProf's
 * writer does not escape ')' so the first ')' is not necessarily the end. */
static char *field_end(char *p, const char *after)
{
  size_t n = strlen(after);
  for (char *q = p; (q = strchr(q, ')')) != NULL; ++q)
    if (strncmp(q + 1, after, n) == 0) return q;
  return NULL;
}

/* Undo the dump's percent escape in place (igprof_name_unescape) and
 * terminate the name. */
static size_t decode_name(char *s, size_t len)
{
  size_t o = igprof_name_unescape(s, len);
  s[o] = 0;
  return o;
}

/* Canonical path of the first regular file called `name` in $PATH, or NULL. */
static char *search_path(const char *name)
{
  const char *dirs = getenv("PATH");
  char buf[4096];
  for (const char *d = dirs ? dirs : ""; d && *d;) {
    const char *colon = strchr(d, ':');
    size_t n = colon ? (size_t) (colon - d) : strlen(d);
    if (snprintf(buf, sizeof(buf), "%.*s/%s", (int) n, n ? d : ".", name) < (int) sizeof(buf)) {
      struct stat sb;
      if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode)) return realpath(buf, NULL);
    }
    d = colon ? colon + 1 : NULL;
  }
  return NULL;
}

/* FN<id>=(F<fid>[=(path)]+<off> N=(<name>))  -- p is just after "FN<id>". */
static void parse_fn_definition(struct reader *rd, char **pp, int64_t id)
{
  char *p = *pp;
  int64_t fid, fileoff;
  uint32_t file, def;
  if (get_fn(rd, id, &def))
    parse_error(rd, "function FN%s redefined (first defined on line %" PRIu64 ")", id_text(rd, id).s, rd->frames[def].line);
  if (!expect(&p, "=(F") || !parse_int(&p, rd->base, &fid))
    parse_error(rd, "malformed function definition: expected '=(F<file id>'");
  if (*p == '=') {
    if (idmap_get(&rd->file_ids, (uint64_t) fid, &def))
      parse_error(rd, "file F%s redefined (first defined on line %" PRIu64 ")", id_text(rd, fid).s, rd->file_defs[def].line);
    p++;
    if (*p != '(') parse_error(rd, "malformed file definition: expected '=(<path>)'");
    char *end = field_end(++p, "+");
    if (!end) parse_error(rd, "malformed file definition: missing ')+' after the path");
    size_t len = decode_name(p, (size_t) (end - p));
    /* Like IgProf, canonicalise paths that exist here, so one library seen
     * through two paths (/lib vs /usr/lib) is one library, and look bare
     * program names up in $PATH. */
    char *real = *p && !strchr(p, '/') ? search_path(p) : *p ? realpath(p, NULL) : NULL;
    file = real ? symtab_file(rd->st, real, strlen(real)) : symtab_file(rd->st, p, len);
    free(real);
    GROW(rd->file_defs, rd->file_defs_cap, rd->nfile_defs + 1);
    rd->file_defs[rd->nfile_defs] = (struct file_def) { file, rd->src.lineno };
    idmap_put(&rd->file_ids, (uint64_t) fid, (uint32_t) rd->nfile_defs++);
    p = end + 1;
  } else if (idmap_get(&rd->file_ids, (uint64_t) fid, &def)) {
    file = rd->file_defs[def].file;
  } else {
    parse_error(rd, "file F%s referenced before its definition", id_text(rd, fid).s);
  }
  if (!expect(&p, "+") || !parse_int(&p, rd->base, &fileoff) || !expect(&p, " N=("))
    parse_error(rd, "malformed function definition: expected '+<offset> N=(<name>)'");
  char *end = field_end(p, ")+");
  if (!end) parse_error(rd, "malformed function definition: missing '))+' after the name");
  decode_name(p, (size_t) (end - p));
  define_frame(rd, id, p, file, fileoff);
  *pp = end + 2;
}

/* ---- placing a line in the tree ---- */

static int frame_folds(const struct reader *rd, const struct frame *f)
{
  if (rd->opt.no_filter) return 0;
  return f->profiler || (rd->key_is_mem && (rd->st->flags[f->raw_sym] & SYM_ALLOCATOR));
}

static uint32_t place(struct reader *rd, uint32_t depth, uint32_t frame_index)
{
  const struct frame *f = &rd->frames[frame_index];
  uint32_t node = rd->path[depth - 1];
  uint32_t state = rd->ma_state[depth - 1];
  if (!frame_folds(rd, f)) {
    for (uint32_t i = 0; i < f->count; ++i) {
      uint32_t sym = rd->frame_syms[f->first + i];
      if (rd->opt.merge && merge_has_ancestors(rd->opt.merge))
        sym = merge_ancestors_apply(rd->opt.merge, rd->st, sym, &state);
      if (rd->opt.merge && merge_collapses(rd->opt.merge) && rd->tree->nodes[node].sym == sym) continue;
      node = tree_child(rd->tree, node, sym);
    }
  }
  rd->path[depth] = node;
  rd->ma_state[depth] = state;
  return node;
}

static void grow_path(struct reader *rd, size_t need)
{
  size_t cap = rd->path_cap;
  GROW(rd->path, cap, need);
  cap = rd->path_cap;
  GROW(rd->ma_state, cap, need);
  rd->path_cap = cap;
}

static void flush_pending(struct reader *rd)
{
  for (size_t i = 0; i < rd->npending; ++i) place(rd, rd->pending[i].depth, rd->pending[i].frame);
  rd->npending = 0;
}

static int hit_filtered(const struct read_options *o, int64_t value, int64_t ticks)
{
  if (o->min_count > 0 && value < o->min_count) return 1;
  if (o->max_count > 0 && value > o->max_count) return 1;
  if (o->min_calls > 0 && ticks < o->min_calls) return 1;
  if (o->max_calls > 0 && ticks > o->max_calls) return 1;
  if (o->min_avg > 0 && ticks && value / ticks < o->min_avg) return 1;
  if (o->max_avg > 0 && ticks && value / ticks > o->max_avg) return 1;
  return 0;
}

static _Noreturn void stack_overflow_error(struct reader *rd)
{
  parse_error(rd, "the %s sum of this stack exceeds the 64-bit range of counter values (" VALUE_RANGE_TEXT ")", rd->key);
}

/* " V<id>[=(<name>)]:(<ticks>,<value>,<peak>)" {";LK=(0x<addr>,<size>)"} */
static void parse_counter(struct reader *rd, char **pp, int *has_key, int64_t *value, int64_t *ticks,
                          int64_t sample[3], int *has_sample)
{
  char *p = *pp;
  int64_t cid, t, v, pk;
  uint32_t def;
  int is_key, is_timeline;
  uint32_t column = UINT32_MAX;
  if (!expect(&p, " V") || !parse_int(&p, rd->base, &cid))
    parse_error(rd, "malformed counter: expected ' V<id>'");
  if (*p == '=') {
    if (idmap_get(&rd->counter_ids, (uint64_t) cid, &def))
      parse_error(rd, "counter V%s redefined (first defined on line %" PRIu64 ")", id_text(rd, cid).s, rd->counter_defs[def].line);
    if (!expect(&p, "=(")) parse_error(rd, "malformed counter definition: expected '=(<name>)'");
    char *end = field_end(p, ":(");
    if (!end) parse_error(rd, "malformed counter definition: missing '):(' after the name");
    *end = 0;
    is_timeline = !strcmp(p, HEAP_TIMELINE_COUNTER) || !strcmp(p, HEAP_SNAPSHOT_COUNTER)
                  || !strcmp(p, SIZE_HISTOGRAM_COUNTER) || !strcmp(p, MEM_SAMPLING_COUNTER);
    column = is_timeline ? UINT32_MAX : strpool_intern(&rd->counter_names, p, (size_t) (end - p));
    if (!rd->key && !is_timeline) set_key(rd, p);
    is_key = rd->key && strcmp(p, rd->key) == 0;
    GROW(rd->counter_defs, rd->counter_defs_cap, rd->ncounter_defs + 1);
    rd->counter_defs[rd->ncounter_defs] = (struct counter_def) { (uint8_t) is_key, (uint8_t) is_timeline, column, rd->src.lineno };
    idmap_put(&rd->counter_ids, (uint64_t) cid, (uint32_t) rd->ncounter_defs++);
    p = end + 1;
  } else if (idmap_get(&rd->counter_ids, (uint64_t) cid, &def)) {
    is_key = rd->counter_defs[def].is_key;
    is_timeline = rd->counter_defs[def].is_timeline;
    column = rd->counter_defs[def].column;
  } else {
    parse_error(rd, "counter V%s referenced before its definition", id_text(rd, cid).s);
  }
  if (!expect(&p, ":(") || !parse_int(&p, rd->base, &t) || !expect(&p, ",")
      || !parse_int(&p, rd->base, &v) || !expect(&p, ",") || !parse_int(&p, rd->base, &pk)
      || !expect(&p, ")"))
    parse_error(rd, "malformed counter values: expected ':(<ticks>,<value>,<peak>)'");
  while (*p == ';') {
    int64_t addr, size;
    if (!expect(&p, ";LK=(0x") || !parse_int(&p, 16, &addr) || !expect(&p, ",")
        || !parse_int(&p, rd->base, &size) || !expect(&p, ")"))
      parse_error(rd, "malformed leak record: expected ';LK=(0x<address>,<size>)'");
  }
  if (is_timeline) {
    sample[0] = pk;
    sample[1] = v;
    sample[2] = t;
    *has_sample = 1;
  }
  if (rd->opt.all_counters && !is_timeline && !rd->section) {
    GROW(rd->line_columns, rd->line_columns_cap, rd->nline_columns + 1);
    rd->line_columns[rd->nline_columns++] = (struct column_value) { column, v, t };
  }
  if (is_key && !rd->section) {
    int64_t val = rd->opt.peak ? pk : v;
    if (!hit_filtered(&rd->opt, val, t)) {
      /* A line may give the report counter more than once (two V ids of
       * one name): the values add up like two lines of the stack. */
      int ok = 1;
      if (rd->key_is_max) { if (!*has_key || val > *value) *value = val; }
      else ok = value_add(*value, val, value);
      if (!ok || !value_add(*ticks, t, ticks)) stack_overflow_error(rd);
    }
    *has_key = 1;
  }
  *pp = p;
}

/* One timeline sample (us, bytes, blocks), in the dump's order. Only one
 * input may hold a timeline: they are not merged. */
static void add_sample(struct reader *rd, const int64_t sample[3])
{
  struct heap_timeline *tl = &rd->timeline;
  if (!rd->dump_has_timeline) {
    rd->dump_has_timeline = 1;
    if (tl->inputs++) {
      tl->count = 0;   /* the caller sees inputs > 1 and says so */
    }
    free(tl->path);
    free(tl->program);
    tl->path = xstrdup(rd->src.path);
    tl->program = xstrdup(rd->dump_program ? rd->dump_program : "");
  }
  if (sample[0] < 0 || sample[1] < 0 || sample[2] < 0)
    parse_error(rd, "malformed heap timeline sample: negative time, bytes or blocks");
  if (tl->count && sample[0] < tl->samples[tl->count - 1].us)
    parse_error(rd, "malformed heap timeline: sample times go backwards");
  GROW(tl->samples, tl->cap, tl->count + 1);
  tl->samples[tl->count++] = (struct heap_sample) { sample[0], sample[1], sample[2] };
}

/* One size class of the histogram: the FN offset is its class k. */
static void size_class_line(struct reader *rd, int64_t k, const int64_t sample[3])
{
  struct size_histogram *h = &rd->sizes;
  if (k < 0 || k >= SIZE_CLASSES) parse_error(rd, "malformed size histogram: size class %" PRId64 " (0 to 64)", k);
  if (sample[2] < 0 || sample[1] < 0) parse_error(rd, "malformed size histogram: negative allocations or bytes");
  if (!rd->dump_has_histogram) {
    rd->dump_has_histogram = 1;
    h->inputs++;
  }
  if (!value_add(h->count[k], sample[2], &h->count[k]) || !value_add(h->bytes[k], sample[1], &h->bytes[k]))
    parse_error(rd, "the size histogram's sums exceed the 64-bit range");
}

/* The dump's @igprof_mem_sampling line: (sampled, T, 0) in sample[2], [1]. */
static void sampling_line(struct reader *rd, const int64_t sample[3])
{
  struct mem_sampling *m = &rd->sampling;
  if (sample[2] < 0 || sample[1] <= 0) parse_error(rd, "malformed sampling line: negative allocations or an interval below 1");
  if (rd->dump_has_sampling) parse_error(rd, "malformed sampling line: a second one in the dump");
  rd->dump_has_sampling = 1;
  if (!m->inputs++) m->interval = sample[1];
  else if (m->interval != sample[1]) m->interval = -1;
  if (!value_add(m->samples, sample[2], &m->samples)) parse_error(rd, "the sampled allocations exceed the 64-bit range");
}

/* A line of a detailed snapshot (after the timeline it belongs to): the
 * depth-1 frame starts one (its offset: the timeline sample), the lines
 * under it are its stacks, placed in a tree of its own with the same
 * folding and renaming as the profile's. Kept only when asked for. */
static void snapshot_line(struct reader *rd, uint32_t depth, uint32_t frame, int64_t symoff, const int64_t *sample)
{
  struct heap_timeline *tl = &rd->timeline;
  if (depth == 1 && (!rd->dump_has_timeline || symoff < 0 || (size_t) symoff >= tl->count))
    parse_error(rd, "malformed heap snapshot: sample %" PRId64 " is not in the timeline", symoff);
  if (!rd->opt.snapshots || tl->inputs > 1) return;
  if (depth == 1) {
    GROW(tl->snapshots, tl->snapshots_cap, tl->nsnapshots + 1);
    rd->snapshot = &tl->snapshots[tl->nsnapshots++];
    rd->snapshot->sample = (size_t) symoff;
    tree_init(&rd->snapshot->tree, rd->st->spontaneous, 0);
    rd->path[1] = 0;
    rd->ma_state[1] = 0;
    return;
  }
  struct call_tree *stacks = rd->tree;
  rd->tree = &rd->snapshot->tree;
  uint32_t node = place(rd, depth, frame);
  if (sample && !tree_add(rd->tree, node, sample[1], sample[2])) stack_overflow_error(rd);
  rd->tree = stacks;
}

/* Depths index 32-bit arrays; a dump this deep would have 4 billion lines. */
#define STACK_DEPTH_MAX (UINT32_MAX - 2)

static void parse_line(struct reader *rd, char *line)
{
  char *p = line;
  int64_t depth, id, symoff;
  uint32_t frame;
  if (!expect(&p, "C") || !parse_int(&p, rd->base, &depth))
    parse_error(rd, "malformed stack line: expected 'C<depth>'");
  if (depth < 1) parse_error(rd, "stack depth %" PRId64 " is invalid (depths start at 1)", depth);
  if (depth > STACK_DEPTH_MAX) parse_error(rd, "stack depth %" PRId64 " is beyond the limit of %u frames", depth, STACK_DEPTH_MAX);
  if ((uint64_t) depth > (uint64_t) rd->cur_depth + 1)
    parse_error(rd, "stack depth %" PRId64 " follows depth %" PRIu32 " (a frame may be at most one level deeper than the line before)",
                depth, rd->cur_depth);
  if (!expect(&p, " FN") || !parse_int(&p, rd->base, &id))
    parse_error(rd, "malformed stack line: expected ' FN<id>' after the depth");
  if (*p == '=') {
    parse_fn_definition(rd, &p, id);
  } else if (!get_fn(rd, id, &frame)) {
    parse_error(rd, "function FN%s referenced before its definition", id_text(rd, id).s);
  }
  get_fn(rd, id, &frame);
  if (!expect(&p, "+") || !parse_int(&p, rd->base, &symoff))
    parse_error(rd, "malformed stack line: expected '+<offset>' after the function");
  int has_key = 0, has_sample = 0;
  int64_t value = 0, ticks = 0, sample[3];
  if (depth == 1) {
    const char *name = symtab_name(rd->st, rd->frames[frame].raw_sym);
    rd->section = !strcmp(name, HEAP_TIMELINE_FRAME) ? SECTION_TIMELINE
                : !strcmp(name, HEAP_SNAPSHOT_FRAME) ? SECTION_SNAPSHOT
                : !strcmp(name, SIZE_HISTOGRAM_FRAME) ? SECTION_HISTOGRAM
                : !strcmp(name, MEM_SAMPLING_FRAME) ? SECTION_SAMPLING : SECTION_STACKS;
  }
  rd->nline_columns = 0;
  while (*p == ' ') parse_counter(rd, &p, &has_key, &value, &ticks, sample, &has_sample);
  if (*p) parse_error(rd, "unexpected text '%.20s' at the end of the line", p);

  rd->cur_depth = (uint32_t) depth;
  grow_path(rd, (size_t) depth + 1);
  if (rd->section == SECTION_TIMELINE) {
    if (has_sample) add_sample(rd, sample);
    return;
  }
  if (rd->section == SECTION_HISTOGRAM) {
    if (depth == 2 && has_sample) size_class_line(rd, symoff, sample);
    return;
  }
  if (rd->section == SECTION_SAMPLING) {
    if (depth == 1 && has_sample) sampling_line(rd, sample);
    return;
  }
  if (rd->section == SECTION_SNAPSHOT) {
    snapshot_line(rd, (uint32_t) depth, frame, symoff, has_sample ? sample : NULL);
    return;
  }
  rd->tree->is_max = rd->key_is_max;
  if (!rd->key) {
    GROW(rd->pending, rd->pending_cap, rd->npending + 1);
    rd->pending[rd->npending++] = (struct pending_line) { (uint32_t) depth, frame };
    return;
  }
  if (rd->npending) flush_pending(rd);
  uint32_t node = place(rd, (uint32_t) depth, frame);
  if (has_key && !tree_add(rd->tree, node, value, ticks)) stack_overflow_error(rd);
  for (size_t i = 0; i < rd->nline_columns; ++i) {
    const struct column_value *c = &rd->line_columns[i];
    if (!tree_add_column(rd->tree, node, c->column, c->value, c->ticks))
      parse_error(rd, "the %s sum of this stack exceeds the 64-bit range of counter values (" VALUE_RANGE_TEXT ")",
                  strpool_get(&rd->counter_names, c->column));
  }
}

void reader_read(struct reader *rd, const char *path, struct call_tree *tree)
{
  char *line;
  size_t len;
  rd->tree = tree;
  source_open(rd, path);
  if (rd->opt.verbose) fprintf(stderr, "igprof-analyse: reading %s\n", rd->src.path);
  if (!source_line(rd, &line, &len)) {
    rd->src.lineno = 1;
    parse_error(rd, "empty input, not an igprof dump");
  }
  parse_header(rd, line, len);
  idmap_clear(&rd->fn_ids);
  if (rd->fn_dense) memset(rd->fn_dense, 0, rd->fn_dense_cap * sizeof(*rd->fn_dense));
  idmap_clear(&rd->file_ids);
  idmap_clear(&rd->counter_ids);
  rd->nfile_defs = rd->ncounter_defs = 0;
  rd->nframes = 0;
  rd->nframe_syms = 0;
  rd->cur_depth = 0;
  rd->section = rd->dump_has_timeline = rd->dump_has_histogram = rd->dump_has_sampling = 0;
  grow_path(rd, 1);
  rd->path[0] = 0;
  rd->ma_state[0] = 0;
  while (source_line(rd, &line, &len)) {
    if (len == 0) parse_error(rd, "empty line");
    if (strlen(line) != len) parse_error(rd, "NUL byte inside a line");
    parse_line(rd, line);
    if (rd->opt.verbose && (++rd->lines_total % 1000000) == 0)
      fprintf(stderr, "igprof-analyse: %" PRIu64 " lines read\n", rd->lines_total);
  }
  gzclose(rd->src.gz);
  rd->src.gz = NULL;
  if (rd->key) {
    tree->is_max = rd->key_is_max;
    if (rd->npending) flush_pending(rd);
  }
  rd->npending = 0;
}

const struct heap_timeline *reader_timeline(const struct reader *rd) { return &rd->timeline; }
size_t reader_counters(const struct reader *rd) { return rd->counter_names.count; }
const char *reader_counter_name(const struct reader *rd, size_t i) { return strpool_get(&rd->counter_names, (uint32_t) i); }
const struct size_histogram *reader_size_histogram(const struct reader *rd) { return &rd->sizes; }
const struct mem_sampling *reader_mem_sampling(const struct reader *rd) { return &rd->sampling; }

void reader_finish(struct reader *rd)
{
  if (rd->key && strpool_find(&rd->counter_names, rd->key, strlen(rd->key)) != UINT32_MAX) return;
  fflush(stdout);
  if (!rd->counter_names.count) {
    fprintf(stderr, "igprof-analyse: no counter values in the profile data\n");
    analyse_exit(1);
  }
  fprintf(stderr, "igprof-analyse: no counter named '%s' in the profile data; it has:", rd->key);
  for (size_t i = 0; i < rd->counter_names.count; ++i)
    fprintf(stderr, " %s", strpool_get(&rd->counter_names, (uint32_t) i));
  fputc('\n', stderr);
  analyse_exit(1);
}
