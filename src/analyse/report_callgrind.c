/* Callgrind format for KCachegrind: one function block per flat entry with
 * its self cost, then one call record per callee with the inclusive cost that
 * flows through that call. Names are compressed as "(id) name" on first use. */
#include <stdlib.h>

#include "report.h"

/* Callgrind is line oriented: control characters in a name become '?'. */
static void put_name(FILE *out, const char *s)
{
  for (; *s; ++s) fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

static void name_ref(FILE *out, const char *kind, struct idmap *seen, uint32_t key, const char *name)
{
  uint32_t id;
  fprintf(out, "%s=", kind);
  if (idmap_get(seen, key, &id)) { fprintf(out, "(%u)\n", id + 1); return; }
  id = (uint32_t) seen->count;
  idmap_put(seen, key, id);
  fprintf(out, "(%u) ", id + 1);
  put_name(out, name);
  fputc('\n', out);
}

void report_callgrind(const struct report *r, FILE *out)
{
  const struct flat_profile *fp = r->flat;
  struct idmap fns, files;
  idmap_init(&fns);
  idmap_init(&files);
  fprintf(out, "# callgrind format\nversion: 1\ncreator: igprof-analyse\npositions: line\nevents: %s\n", r->key);
  fprintf(out, "summary: %" PRId64 "\n\n", fp->totals);
  for (size_t i = 0; i < fp->count; ++i) {
    uint32_t e = fp->order[i];
    const struct flat_entry *en = &fp->entries[e];
    name_ref(out, "fl", &files, r->st->file_of[en->sym], symtab_file_display(r->st, en->sym));
    name_ref(out, "fn", &fns, en->sym, symtab_display(r->st, en->sym));
    fprintf(out, "0 %" PRId64 "\n", en->self[0]);
    struct report_row *callees;
    size_t n = report_callees(r, e, &callees);
    for (size_t k = 0; k < n; ++k) {
      const struct flat_entry *c = &fp->entries[callees[k].entry];
      name_ref(out, "cfl", &files, r->st->file_of[c->sym], symtab_file_display(r->st, c->sym));
      name_ref(out, "cfn", &fns, c->sym, symtab_display(r->st, c->sym));
      fprintf(out, "calls=%" PRId64 " 0\n0 %" PRId64 "\n", callees[k].edge->vals[1], callees[k].edge->vals[0]);
    }
    free(callees);
    fputc('\n', out);
  }
  idmap_free(&fns);
  idmap_free(&files);
}
