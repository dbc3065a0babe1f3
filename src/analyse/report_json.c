/* JSON report with IgProf's structure (summary, mainrows, files, symbols,
 * callers, callees), but every string escaped so the result is valid JSON.
 * Two shapes (docs/analyse.json-schema.json): IgProf's positional rows, or
 * with --json-objects one object per row whose members are named and whose
 * symbols are written out, so that a query names what it reads. */
#include <stdlib.h>

#include "report.h"

#define JSON_FORMAT "igprof-analyse"
#define JSON_VERSION 1

struct id_assign { struct idmap map; uint32_t next; };

/* Dense index by first appearance in rank order. */
static uint32_t first_seen(struct id_assign *a, uint32_t key, int *is_new)
{
  uint32_t v;
  *is_new = !idmap_get(&a->map, key, &v);
  if (*is_new) { v = a->next++; idmap_put(&a->map, key, v); }
  return v;
}

/* A percentage; an entry the -D baseline lacks is -101 in positional rows
 * (IgProf's code for "new") and null in object rows. */
static void print_pct(const struct report *r, float pct)
{
  if (pct == REPORT_NEW_PCT) fputs(r->json_objects ? "null" : "-101", r->out);
  else fprintf(r->out, "%.2f", (double) pct);
}

static void print_edge(const struct report *r, uint32_t entry, uint32_t other, const struct flat_edge *e, int callers)
{
  FILE *out = r->out;
  const struct flat_entry *en = &r->flat->entries[entry], *ot = &r->flat->entries[other];
  if (!r->json_objects) {
    fprintf(out, "[%u, %u, %" PRId64 ", %" PRId64 ", %" PRId64 ", ", en->rank, ot->rank, e->vals[0], e->vals[1], e->vals[2]);
  } else {
    fprintf(out, "{\"rank\": %u, \"symbol\": ", en->rank);
    json_write_string(out, symtab_display(r->st, en->sym));
    fprintf(out, ", \"%s\": %u, \"%s_symbol\": ", callers ? "caller" : "callee", ot->rank, callers ? "caller" : "callee");
    json_write_string(out, symtab_display(r->st, ot->sym));
    fprintf(out, ", \"value\": %" PRId64 ", \"calls\": %" PRId64 ", \"paths\": %" PRId64 ", \"pct\": ",
            e->vals[0], e->vals[1], e->vals[2]);
  }
  print_pct(r, report_edge_pct(r, e));
  fputc(r->json_objects ? '}' : ']', out);
}

static void print_edges(const struct report *r, const uint32_t *rows, size_t n, int callers)
{
  int first = 1;
  for (size_t i = 0; i < n; ++i) {
    struct report_row *list;
    size_t k = callers ? report_callers(r, rows[i], &list) : report_callees(r, rows[i], &list);
    for (size_t j = 0; j < k; ++j) {
      if (!first) fputs(",\n", r->out);
      print_edge(r, rows[i], list[j].entry, list[j].edge, callers);
      first = 0;
    }
    free(list);
  }
}

static void print_summary(const struct report *r)
{
  FILE *out = r->out;
  fprintf(out, "{\n\"format\": \"%s\",\n\"version\": %d,\n\"rows\": \"%s\",\n\"summary\": {\n   \"counter\": ",
          JSON_FORMAT, JSON_VERSION, r->json_objects ? "objects" : "arrays");
  json_write_string(out, r->key);
  fputs(",\n   \"unit\": ", out);
  json_write_string(out, counter_unit(r->key, r->is_time));
  fprintf(out, ",\n   \"total_counts\": %" PRId64 ",\n   \"total_freq\": %" PRId64 ",\n   \"tick_period\": %f",
          r->flat->totals, r->flat->totfreq, r->tick_period);
  /* A sampled memory profile: its figures are estimates. */
  char note[160];
  const struct mem_sampling *m = r->sampling;
  if (report_sampling_note(r, note, sizeof(note))) {
    fputs(",\n   \"sampled\": {\"interval\": ", out);
    if (m->interval > 0) fprintf(out, "%" PRId64, m->interval);
    else fputs("null", out);
    fprintf(out, ", \"allocations_sampled\": %" PRId64 ", \"inputs\": %d}", m->samples, m->inputs);
  }
  fputs("\n},\n", out);
}

/* One main row: rank, symbol, file, self, total, kids, self calls, total
 * calls, self paths, total paths, pct (positional: symbol and file are
 * indexes into "symbols" and "files"). */
static void print_mainrow(const struct report *r, uint32_t e, uint32_t sym_index, uint32_t file_index)
{
  FILE *out = r->out;
  const struct flat_entry *en = &r->flat->entries[e];
  struct report_row *callees;
  size_t nc = report_callees(r, e, &callees);
  int64_t kids = report_kids(r, e, callees, nc);
  free(callees);
  if (!r->json_objects) {
    fprintf(out, "[%u, %u, %u, %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", ",
            en->rank, sym_index, file_index, en->self[0], en->cum[0], kids, en->self[1], en->cum[1], en->self[2], en->cum[2]);
  } else {
    fprintf(out, "{\"rank\": %u, \"symbol\": ", en->rank);
    json_write_string(out, symtab_display(r->st, en->sym));
    fputs(", \"file\": ", out);
    json_write_string(out, symtab_file_display(r->st, en->sym));
    fprintf(out, ", \"self\": %" PRId64 ", \"total\": %" PRId64 ", \"kids\": %" PRId64 ", \"self_calls\": %" PRId64
            ", \"total_calls\": %" PRId64 ", \"self_paths\": %" PRId64 ", \"total_paths\": %" PRId64 ", \"pct\": ",
            en->self[0], en->cum[0], kids, en->self[1], en->cum[1], en->self[2], en->cum[2]);
  }
  print_pct(r, report_entry_pct(r, en, 0));
  fputc(r->json_objects ? '}' : ']', out);
}

void report_json(const struct report *r)
{
  FILE *out = r->out;
  const struct flat_profile *fp = r->flat;
  uint32_t *rows;
  size_t n = report_table(r, &rows);
  struct id_assign syms = { .next = 0 }, files = { .next = 0 };
  idmap_init(&syms.map);
  idmap_init(&files.map);
  uint32_t *file_order = xmalloc((n ? n : 1) * sizeof(*file_order));
  size_t nfiles = 0;

  print_summary(r);
  fputs("\"mainrows\": [\n", out);
  for (size_t i = 0; i < n; ++i) {
    const struct flat_entry *en = &fp->entries[rows[i]];
    int is_new;
    uint32_t s = first_seen(&syms, en->sym, &is_new);
    uint32_t f = first_seen(&files, r->st->file_of[en->sym], &is_new);
    if (is_new) file_order[nfiles++] = en->sym;
    if (i) fputs(",\n", out);
    print_mainrow(r, rows[i], s, f);
  }
  fputs("],\n", out);
  if (!r->json_objects) {
    fputs("\"files\": [\n", out);
    for (size_t i = 0; i < nfiles; ++i) {
      if (i) fputs(",\n", out);
      json_write_string(out, symtab_file_display(r->st, file_order[i]));
    }
    fputs("],\n\"symbols\": [\n", out);
    for (size_t i = 0; i < n; ++i) {
      if (i) fputs(",\n", out);
      json_write_string(out, symtab_display(r->st, fp->entries[rows[i]].sym));
    }
    fputs("],\n", out);
  }
  fputs("\"callers\": [\n", out);
  print_edges(r, rows, n, 1);
  fputs("],\n\"callees\": [\n", out);
  print_edges(r, rows, n, 0);
  fputs("]\n}\n", out);
  free(rows);
  free(file_order);
  idmap_free(&syms.map);
  idmap_free(&files.map);
}
