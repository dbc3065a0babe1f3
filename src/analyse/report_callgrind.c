/* Callgrind format for KCachegrind and callgrind_annotate.
 *
 * One block per function: `ob=` its object (library or program), `fl=` its
 * source file, `fn=` its bare name. With -g --lines a function's flat entries
 * ("f at a.c:10", "f at a.c:12") are the cost lines of one block at their
 * source lines, an entry from another file (code of a header) preceded by
 * `fi=` and the return to the function's own file by `fe=`; without line
 * information the file is "???" and every cost is on line 0, as valgrind
 * writes code without debug information. After each cost line come the
 * calls made from that line: `cob=`/`cfi=`/`cfn=` the callee, `calls=<calls>
 * <callee's line>`, then the line and the inclusive cost that flowed through
 * the call. Names are compressed as "(id) name" on first use. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define NO_SOURCE "???"

/* Callgrind is line oriented: control characters in a name become '?'. */
static void put_name(FILE *out, const char *s)
{
  for (; *s; ++s) fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

/* The compressed names of one kind (objects, files, functions). */
struct name_ids { struct strpool seen; };

static void name_ref(FILE *out, const char *kind, struct name_ids *ids, const char *name)
{
  size_t before = ids->seen.count;
  uint32_t id = strpool_intern(&ids->seen, name, strlen(name));
  fprintf(out, "%s=(%u)", kind, id + 1);
  if (ids->seen.count != before) {
    fputc(' ', out);
    put_name(out, name);
  }
  fputc('\n', out);
}

/* Entries grouped by function (object and bare name), groups in the rank
 * order of their first entry: group g's entries are
 * members[start[g] .. start[g + 1]), in rank order; entry e is in group
 * group_of[e]. */
struct function_groups { uint32_t *members, *start, *group_of; size_t count; };

struct callgrind {
  const struct report *r;
  FILE *out;
  struct name_ids objects, files, functions;
  struct function_groups groups;
};

static const char *source_of(const struct report *r, uint32_t entry)
{
  uint32_t src = r->st->source_of[r->flat->entries[entry].sym];
  return src ? symtab_file_name(r->st, src) : NO_SOURCE;
}

static uint32_t line_of(const struct report *r, uint32_t entry)
{
  return r->st->line_of[r->flat->entries[entry].sym];
}

static void group_functions(const struct report *r, struct function_groups *g)
{
  const struct flat_profile *fp = r->flat;
  struct strpool names;
  struct idmap by_key;
  uint32_t *group_of = g->group_of = xmalloc((fp->count ? fp->count : 1) * sizeof(*group_of));
  strpool_init(&names);
  idmap_init(&by_key);
  g->count = 0;
  g->start = xcalloc(fp->count + 2, sizeof(*g->start));
  for (size_t i = 0; i < fp->count; ++i) {
    uint32_t e = fp->order[i], sym = fp->entries[e].sym, group;
    const char *fn = symtab_function(r->st, sym);
    uint64_t key = (uint64_t) r->st->file_of[sym] << 32 | strpool_intern(&names, fn, strlen(fn));
    if (!idmap_get(&by_key, key, &group)) idmap_put(&by_key, key, group = (uint32_t) g->count++);
    group_of[e] = group;
    g->start[group + 1]++;
  }
  for (size_t k = 0; k < g->count; ++k) g->start[k + 1] += g->start[k];
  uint32_t *fill = xmalloc((g->count + 1) * sizeof(*fill));
  memcpy(fill, g->start, (g->count + 1) * sizeof(*fill));
  g->members = xmalloc((fp->count ? fp->count : 1) * sizeof(*g->members));
  for (size_t i = 0; i < fp->count; ++i) g->members[fill[group_of[fp->order[i]]]++] = fp->order[i];
  free(fill);
  idmap_free(&by_key);
  strpool_free(&names);
}

/* The source file of entry e's function: that of its group's first entry. */
static const char *function_source(const struct callgrind *cg, uint32_t e)
{
  const struct function_groups *g = &cg->groups;
  return source_of(cg->r, g->members[g->start[g->group_of[e]]]);
}

/* Entry e's calls, each from e's line to the callee's. */
static void write_calls(struct callgrind *cg, uint32_t e)
{
  const struct report *r = cg->r;
  struct report_row *callees;
  size_t n = report_callees(r, e, &callees);
  for (size_t k = 0; k < n; ++k) {
    uint32_t c = callees[k].entry, sym = r->flat->entries[c].sym;
    name_ref(cg->out, "cob", &cg->objects, symtab_file_display(r->st, sym));
    name_ref(cg->out, "cfi", &cg->files, function_source(cg, c));
    name_ref(cg->out, "cfn", &cg->functions, symtab_function(r->st, sym));
    fprintf(cg->out, "calls=%" PRId64 " %u\n%u %" PRId64 "\n", callees[k].edge->vals[1], line_of(r, c), line_of(r, e),
            callees[k].edge->vals[0]);
  }
  free(callees);
}

static void write_function(struct callgrind *cg, const uint32_t *members, size_t n)
{
  const struct report *r = cg->r;
  uint32_t first_sym = r->flat->entries[members[0]].sym;
  const char *home = source_of(r, members[0]), *current = home;
  name_ref(cg->out, "ob", &cg->objects, symtab_file_display(r->st, first_sym));
  name_ref(cg->out, "fl", &cg->files, home);
  name_ref(cg->out, "fn", &cg->functions, symtab_function(r->st, first_sym));
  for (size_t i = 0; i < n; ++i) {
    uint32_t e = members[i];
    const char *src = source_of(r, e);
    if (strcmp(src, current)) {
      name_ref(cg->out, strcmp(src, home) ? "fi" : "fe", &cg->files, src);
      current = src;
    }
    fprintf(cg->out, "%u %" PRId64 "\n", line_of(r, e), r->flat->entries[e].self[0]);
    write_calls(cg, e);
  }
  fputc('\n', cg->out);
}

void report_callgrind(const struct report *r, FILE *out)
{
  struct callgrind cg = { .r = r, .out = out };
  struct function_groups *groups = &cg.groups;
  strpool_init(&cg.objects.seen);
  strpool_init(&cg.files.seen);
  strpool_init(&cg.functions.seen);
  group_functions(r, groups);
  fprintf(out, "# callgrind format\nversion: 1\ncreator: igprof-analyse\npositions: line\nevents: %s\n", r->key);
  fprintf(out, "summary: %" PRId64 "\n\n", r->flat->totals);
  for (size_t g = 0; g < groups->count; ++g)
    write_function(&cg, groups->members + groups->start[g], groups->start[g + 1] - groups->start[g]);
  free(groups->members);
  free(groups->start);
  free(groups->group_of);
  strpool_free(&cg.objects.seen);
  strpool_free(&cg.files.seen);
  strpool_free(&cg.functions.seen);
}
