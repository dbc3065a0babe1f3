/* pprof's profile.proto, gzip-compressed (go tool pprof, Pyroscope, Parca).
 *
 * Every counter of the dumps is a pair of sample types (value and calls:
 * MEM_TOTAL is alloc_space and alloc_objects, PERF_TICKS cpu nanoseconds and
 * samples, ...); *_MAX counters, which do not add up, are left out. Each
 * call-tree node with a value is one sample whose stack is its path (leaf
 * first), at most REPORT_STACK_FRAMES frames and then one location
 * REPORT_DEEPER_MARKER. Each symbol is one location, in the mapping of its
 * object at the offset where it was first seen, with one line: its function
 * (bare name, source file with -g --lines) and source line. Mappings are
 * placed in disjoint address ranges (a dump has offsets, not addresses) and
 * carry the object's build id when the file can be read here. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "protobuf.h"
#include "report.h"

/* profile.proto's field numbers */
enum { PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE, PROFILE_MAPPING, PROFILE_LOCATION, PROFILE_FUNCTION,
       PROFILE_STRING_TABLE, PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD, PROFILE_COMMENT, PROFILE_DEFAULT_SAMPLE_TYPE };
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE };
enum { MAPPING_ID = 1, MAPPING_MEMORY_START, MAPPING_MEMORY_LIMIT, MAPPING_FILE_OFFSET, MAPPING_FILENAME,
       MAPPING_BUILD_ID, MAPPING_HAS_FUNCTIONS, MAPPING_HAS_FILENAMES, MAPPING_HAS_LINE_NUMBERS,
       MAPPING_HAS_INLINE_FRAMES };
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID, LOCATION_ADDRESS, LOCATION_LINE };
enum { LINE_FUNCTION_ID = 1, LINE_LINE };
enum { FUNCTION_ID = 1, FUNCTION_NAME, FUNCTION_SYSTEM_NAME, FUNCTION_FILENAME, FUNCTION_START_LINE };

/* Where mapping k (1-based) starts: objects are far apart, each below 2^40. */
#define MAPPING_SPACING (1ull << 40)

/* The sample types of one counter: its value and its calls. */
struct counter_types { const char *counter, *value_type, *value_unit, *calls_type; };
static const struct counter_types known_counters[] = {
  { "MEM_TOTAL", "alloc_space", "bytes", "alloc_objects" },
  { "MEM_LIVE", "inuse_space", "bytes", "inuse_objects" },
  { "MEM_PEAK", "peak_space", "bytes", "peak_objects" },
  { "MEM_TEMP", "temp_space", "bytes", "temp_objects" },
  { "MEM_SHORT", "short_space", "bytes", "short_objects" },
  { "MEM_LIFETIME", "lifetime", "microseconds", "freed_objects" },
  { "MMAP_TOTAL", "mmap_space", "bytes", "mmap_calls" },
  { "MMAP_LIVE", "mmap_inuse_space", "bytes", "mmap_inuse_ranges" },
};

/* One sample type: column k (0 value, 1 calls) of tree column `column`,
 * times `scale`. */
struct sample_type { uint32_t column; int k; int64_t scale; int64_t type, unit; };

struct pprof {
  const struct report *r;
  struct resolver *resolver;
  int lines;                       /* -g --lines: functions have files and lines */
  struct strpool strings;          /* string_table; id 0 is "" */
  struct sample_type *types; size_t ntypes;
  int64_t default_type;
  int64_t period_ns;
  struct idmap location_of;        /* symbol -> location id */
  uint32_t *location_sym;          /* location id - 1 -> symbol (UINT32_MAX: the deeper-frames marker) */
  size_t nlocations, locations_cap;
  struct idmap mapping_of;         /* file id -> mapping id */
  struct mapping { uint32_t file; uint64_t end; } *mappings;   /* mapping id - 1 -> file, largest offset + 1 */
  size_t nmappings, mappings_cap;
  struct idmap function_of;        /* (name string << 32 | file string) -> function id */
  struct pb_buf functions;
  gzFile gz;                       /* the output: samples go out as they are made */
  int failed;                      /* a write failed (errno set) */
};

/* Write b's bytes out once it holds OUTPUT_CHUNK or more (all of it with
 * `all`), so that the samples of a big tree need not be held at once. */
#define OUTPUT_CHUNK (1u << 20)
static void drain(struct pprof *p, struct pb_buf *b, int all)
{
  if (b->len < (all ? 1 : OUTPUT_CHUNK)) return;
  for (size_t done = 0; !p->failed && done < b->len;) {
    unsigned n = b->len - done > (1u << 30) ? 1u << 30 : (unsigned) (b->len - done);
    if (gzwrite(p->gz, b->data + done, n) != (int) n) p->failed = 1;
    done += n;
  }
  b->len = 0;
}

/* The string table's index of s. profile.proto's strings are proto3
 * `string`s, which decoders may reject unless they are UTF-8: bytes that are
 * not become U+FFFD, as in the JSON report. */
static int64_t string_id(struct pprof *p, const char *s)
{
  size_t n = strlen(s), len = 0;
  const unsigned char *u = (const unsigned char *) s;
  int valid = 1;
  for (size_t i = 0; i < n; i += len)
    if (!(len = (size_t) utf8_sequence_length(u + i))) { valid = 0; break; }
  if (valid) return strpool_intern(&p->strings, s, n);
  char *fixed = xmalloc(3 * n + 1), *o = fixed;
  for (size_t i = 0; i < n;) {
    len = (size_t) utf8_sequence_length(u + i);
    if (len) { memcpy(o, s + i, len); o += len; i += len; }
    else { memcpy(o, "\xef\xbf\xbd", 3); o += 3; i++; }
  }
  int64_t id = strpool_intern(&p->strings, fixed, (size_t) (o - fixed));
  free(fixed);
  return id;
}

static int ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

static void add_type(struct pprof *p, uint32_t column, int k, int64_t scale, const char *type, const char *unit)
{
  p->types = xrealloc(p->types, (p->ntypes + 1) * sizeof(*p->types));
  p->types[p->ntypes++] = (struct sample_type) { column, k, scale, string_id(p, type), string_id(p, unit) };
}

/* The sample types of every counter read, in the dumps' order; the report
 * counter's value is the default. */
static void choose_types(struct pprof *p, const struct reader *rd)
{
  const char *key = p->r->key;
  for (size_t c = 0; c < reader_counters(rd); ++c) {
    const char *name = reader_counter_name(rd, c);
    if (ends_with(name, "_MAX")) continue;
    if (!strcmp(name, "PERF_TICKS")) {
      add_type(p, (uint32_t) c, 0, 1, "samples", "count");
      add_type(p, (uint32_t) c, 0, p->period_ns, "cpu", "nanoseconds");
    } else {
      const struct counter_types *t = NULL;
      for (size_t i = 0; i < sizeof(known_counters) / sizeof(known_counters[0]); ++i)
        if (!strcmp(known_counters[i].counter, name)) t = &known_counters[i];
      if (t) {
        add_type(p, (uint32_t) c, 1, 1, t->calls_type, "count");
        add_type(p, (uint32_t) c, 0, 1, t->value_type, t->value_unit);
      } else {
        size_t n = strlen(name);
        char *lower = xmalloc(n + 8);
        for (size_t i = 0; i < n; ++i) lower[i] = (char) (name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
        strcpy(lower + n, "_calls");
        add_type(p, (uint32_t) c, 1, 1, lower, "count");
        lower[n] = 0;
        add_type(p, (uint32_t) c, 0, 1, lower, "count");
        free(lower);
      }
    }
    if (!strcmp(name, key)) p->default_type = p->types[p->ntypes - 1].type;
  }
}

static uint32_t mapping_for(struct pprof *p, uint32_t file)
{
  uint32_t id;
  if (!file) return 0;
  if (idmap_get(&p->mapping_of, file, &id)) return id;
  GROW(p->mappings, p->mappings_cap, p->nmappings + 1);
  p->mappings[p->nmappings] = (struct mapping) { file, 1 };
  id = (uint32_t) ++p->nmappings;
  idmap_put(&p->mapping_of, file, id);
  return id;
}

/* The function named `name` in source file `file` (string ids; 0: none). */
static uint64_t function_id(struct pprof *p, int64_t name, int64_t file)
{
  uint64_t key = (uint64_t) name << 32 | (uint64_t) file;
  uint32_t id;
  if (idmap_get(&p->function_of, key, &id)) return id;
  id = (uint32_t) p->function_of.count + 1;
  idmap_put(&p->function_of, key, id);
  size_t m = pb_begin(&p->functions, PROFILE_FUNCTION);
  pb_uint(&p->functions, FUNCTION_ID, id);
  pb_int(&p->functions, FUNCTION_NAME, name);
  pb_int(&p->functions, FUNCTION_SYSTEM_NAME, name);
  if (file) pb_int(&p->functions, FUNCTION_FILENAME, file);
  pb_end(&p->functions, m);
  return id;
}

static uint64_t function_for(struct pprof *p, uint32_t sym)
{
  struct symtab *st = p->r->st;
  int64_t file = st->source_of[sym] ? string_id(p, symtab_file_name(st, st->source_of[sym])) : 0;
  return function_id(p, string_id(p, symtab_function(st, sym)), file);
}

/* The location of symbol sym (UINT32_MAX: the deeper-frames marker). */
static uint32_t location_for(struct pprof *p, uint32_t sym)
{
  uint32_t id;
  if (idmap_get(&p->location_of, sym, &id)) return id;
  GROW(p->location_sym, p->locations_cap, p->nlocations + 1);
  p->location_sym[p->nlocations] = sym;
  id = (uint32_t) ++p->nlocations;
  idmap_put(&p->location_of, sym, id);
  return id;
}

static void write_locations(struct pprof *p, struct pb_buf *out)
{
  struct symtab *st = p->r->st;
  for (size_t i = 0; i < p->nlocations; ++i) {
    uint32_t sym = p->location_sym[i];
    size_t m = pb_begin(out, PROFILE_LOCATION);
    pb_uint(out, LOCATION_ID, i + 1);
    uint64_t function;
    int64_t line = 0;
    if (sym == UINT32_MAX) {
      function = function_id(p, string_id(p, REPORT_DEEPER_MARKER), 0);
    } else {
      uint32_t mapping = mapping_for(p, st->file_of[sym]);
      uint64_t off = st->offset_of[sym];
      if (mapping) {
        pb_uint(out, LOCATION_MAPPING_ID, mapping);
        if (off != UINT64_MAX && off < MAPPING_SPACING) {
          pb_uint(out, LOCATION_ADDRESS, mapping * MAPPING_SPACING + off);
          if (off + 1 > p->mappings[mapping - 1].end) p->mappings[mapping - 1].end = off + 1;
        }
      }
      function = function_for(p, sym);
      line = st->line_of[sym];
    }
    size_t lm = pb_begin(out, LOCATION_LINE);
    pb_uint(out, LINE_FUNCTION_ID, function);
    if (line) pb_int(out, LINE_LINE, line);
    pb_end(out, lm);
    pb_end(out, m);
  }
}

static void write_mappings(struct pprof *p, struct pb_buf *out)
{
  for (size_t i = 0; i < p->nmappings; ++i) {
    const char *path = symtab_file_name(p->r->st, p->mappings[i].file);
    char build_id[256];
    size_t m = pb_begin(out, PROFILE_MAPPING);
    pb_uint(out, MAPPING_ID, i + 1);
    pb_uint(out, MAPPING_MEMORY_START, (i + 1) * MAPPING_SPACING);
    pb_uint(out, MAPPING_MEMORY_LIMIT, (i + 1) * MAPPING_SPACING + p->mappings[i].end);
    pb_int(out, MAPPING_FILENAME, string_id(p, path));
    if (p->resolver && resolver_build_id(p->resolver, path, build_id, sizeof(build_id)))
      pb_int(out, MAPPING_BUILD_ID, string_id(p, build_id));
    pb_uint(out, MAPPING_HAS_FUNCTIONS, 1);
    if (p->lines) {
      pb_uint(out, MAPPING_HAS_FILENAMES, 1);
      pb_uint(out, MAPPING_HAS_LINE_NUMBERS, 1);
      pb_uint(out, MAPPING_HAS_INLINE_FRAMES, 1);
    }
    pb_end(out, m);
  }
}

/* Node n's values, one per sample type, added to values[]; returns whether
 * any is non-zero. */
static int add_node_values(struct pprof *p, uint32_t n, int64_t *values)
{
  int any = 0;
  for (size_t t = 0; t < p->ntypes; ++t) {
    const struct sample_type *ty = &p->types[t];
    int64_t v;
    if (__builtin_mul_overflow(tree_column(p->r->tree, ty->column, n, ty->k), ty->scale, &v)
        || !value_add(values[t], v, &values[t]))
      fatal("--pprof: the %s of '%.300s' on one of its stacks exceeds the 64-bit range",
            strpool_get(&p->strings, (uint32_t) ty->type), symtab_name(p->r->st, p->r->tree->nodes[n].sym));
    any |= values[t] != 0;
  }
  return any;
}

/* A sample: the stack locs[depth..1] (leaf first), or for the values of
 * nodes deeper than REPORT_STACK_FRAMES the marker location over
 * locs[REPORT_STACK_FRAMES..1]. */
static void write_sample(struct pprof *p, struct pb_buf *out, const uint32_t *locs, uint32_t depth, int deeper,
                         const int64_t *values)
{
  size_t m = pb_begin(out, PROFILE_SAMPLE);
  size_t ids = pb_begin(out, SAMPLE_LOCATION_ID);
  if (deeper) pb_varint(out, location_for(p, UINT32_MAX));
  for (uint32_t d = depth; d >= 1; --d) pb_varint(out, locs[d]);
  pb_end(out, ids);
  size_t vals = pb_begin(out, SAMPLE_VALUE);
  for (size_t t = 0; t < p->ntypes; ++t) pb_varint(out, (uint64_t) values[t]);
  pb_end(out, vals);
  pb_end(out, m);
  drain(p, out, 0);
}

/* Every node with a value, depth first, so that the path to the node is at
 * hand: locs[d] is the location of the node's ancestor at depth d. The
 * values of nodes deeper than REPORT_STACK_FRAMES are added up per ancestor
 * at that depth, one sample each (as --flame does), so that the output is at
 * most REPORT_STACK_FRAMES + 1 locations per node whatever the depth. */
static void write_samples(struct pprof *p, struct pb_buf *out)
{
  const struct call_tree *t = p->r->tree;
  uint32_t *stack = xmalloc(t->count * sizeof(*stack));
  uint32_t *locs = xmalloc((REPORT_STACK_FRAMES + 2) * sizeof(*locs));
  int64_t *values = xmalloc((p->ntypes + 1) * sizeof(*values));
  int64_t *deeper = xcalloc(p->ntypes + 1, sizeof(*deeper));
  int have_deeper = 0;
  size_t sp = 0;
  for (uint32_t c = t->nodes[0].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) stack[sp++] = c;
  while (sp) {
    uint32_t n = stack[--sp];
    uint32_t depth = t->nodes[n].depth;
    if (depth <= REPORT_STACK_FRAMES) {
      /* the subtree the deeper values came from is done */
      if (have_deeper) {
        write_sample(p, out, locs, REPORT_STACK_FRAMES, 1, deeper);
        memset(deeper, 0, p->ntypes * sizeof(*deeper));
        have_deeper = 0;
      }
      locs[depth] = location_for(p, t->nodes[n].sym);
      memset(values, 0, p->ntypes * sizeof(*values));
      if (add_node_values(p, n, values)) write_sample(p, out, locs, depth, 0, values);
    } else {
      have_deeper |= add_node_values(p, n, deeper);
    }
    for (uint32_t c = t->nodes[n].first_child; c != NO_NODE; c = t->nodes[c].next_sibling) stack[sp++] = c;
  }
  if (have_deeper) write_sample(p, out, locs, REPORT_STACK_FRAMES, 1, deeper);
  free(stack);
  free(locs);
  free(values);
  free(deeper);
}

static void write_value_type(struct pb_buf *out, uint32_t field, int64_t type, int64_t unit)
{
  size_t m = pb_begin(out, field);
  pb_int(out, VALUE_TYPE_TYPE, type);
  pb_int(out, VALUE_TYPE_UNIT, unit);
  pb_end(out, m);
}

/* Sample types and samples first (the samples stream out), then what they
 * refer to, and the string table last, once every string is known. */
static void encode(struct pprof *p, const struct reader *rd)
{
  struct pb_buf out = { 0 };
  choose_types(p, rd);
  for (size_t t = 0; t < p->ntypes; ++t) write_value_type(&out, PROFILE_SAMPLE_TYPE, p->types[t].type, p->types[t].unit);
  write_samples(p, &out);
  write_locations(p, &out);
  drain(p, &out, 0);
  write_mappings(p, &out);
  drain(p, &out, 1);
  drain(p, &p->functions, 1);
  int64_t comment = string_id(p, "igprof-analyse");
  if (p->period_ns) {
    write_value_type(&out, PROFILE_PERIOD_TYPE, string_id(p, "cpu"), string_id(p, "nanoseconds"));
    pb_int(&out, PROFILE_PERIOD, p->period_ns);
  }
  pb_int(&out, PROFILE_COMMENT, comment);
  if (p->default_type) pb_int(&out, PROFILE_DEFAULT_SAMPLE_TYPE, p->default_type);
  for (size_t i = 0; i < p->strings.count; ++i) {
    pb_string(&out, PROFILE_STRING_TABLE, strpool_get(&p->strings, (uint32_t) i));
    drain(p, &out, 0);
  }
  drain(p, &out, 1);
  pb_free(&out);
}

int report_pprof(const struct report *r, const struct reader *rd, struct resolver *resolver, int lines, const char *path)
{
  struct pprof p = { .r = r, .resolver = resolver, .lines = lines };
  strpool_init(&p.strings);
  string_id(&p, "");
  idmap_init(&p.location_of);
  idmap_init(&p.mapping_of);
  idmap_init(&p.function_of);
  p.period_ns = (int64_t) llround(r->tick_period * 1e9);
  int to_stdout = !strcmp(path, "-");
  errno = 0;
  p.gz = to_stdout ? gzdopen(dup(1), "wb") : gzopen(path, "wb");
  if (p.gz) {
    encode(&p, rd);
    if (gzclose(p.gz) != Z_OK) p.failed = 1;
  }
  int ok = p.gz && !p.failed;
  if (!ok) fprintf(stderr, "igprof-analyse: %s: cannot write: %s\n", to_stdout ? "standard output" : path,
                   strerror(errno ? errno : EIO));
  pb_free(&p.functions);
  strpool_free(&p.strings);
  idmap_free(&p.location_of);
  idmap_free(&p.mapping_of);
  idmap_free(&p.function_of);
  free(p.types);
  free(p.location_sym);
  free(p.mappings);
  return ok ? 0 : -1;
}
