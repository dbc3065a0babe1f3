/* JSON report with IgProf's structure (summary, mainrows, files, symbols,
 * callers, callees), but every string escaped so the result is valid JSON. */
#include <stdlib.h>

#include "report.h"

struct id_assign { struct idmap map; uint32_t next; };

/* Dense index by first appearance in rank order. */
static uint32_t first_seen(struct id_assign *a, uint32_t key, int *is_new)
{
  uint32_t v;
  *is_new = !idmap_get(&a->map, key, &v);
  if (*is_new) { v = a->next++; idmap_put(&a->map, key, v); }
  return v;
}

static void print_pct(FILE *out, float pct)
{
  if (pct == REPORT_NEW_PCT) fputs("-101", out);
  else fprintf(out, "%.2f", (double) pct);
}

static void print_edges(const struct report *r, const uint32_t *rows, size_t n, int callers)
{
  int first = 1;
  for (size_t i = 0; i < n; ++i) {
    struct report_row *list;
    size_t k = callers ? report_callers(r, rows[i], &list) : report_callees(r, rows[i], &list);
    for (size_t j = 0; j < k; ++j) {
      const struct flat_edge *e = list[j].edge;
      fprintf(r->out, "%s[%u, %u, %" PRId64 ", %" PRId64 ", %" PRId64 ", ", first ? "" : ",\n",
              r->flat->entries[rows[i]].rank, r->flat->entries[list[j].entry].rank,
              e->vals[0], e->vals[1], e->vals[2]);
      print_pct(r->out, report_edge_pct(r, e));
      fputc(']', r->out);
      first = 0;
    }
    free(list);
  }
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

  fputs("{\n\"summary\": {\n   \"counter\": ", out);
  json_write_string(out, r->key);
  fprintf(out, ",\n   \"total_counts\": %" PRId64 ",\n   \"total_freq\": %" PRId64 ",\n   \"tick_period\": %f\n},\n",
          fp->totals, fp->totfreq, r->tick_period);
  fputs("\"mainrows\": [\n", out);
  for (size_t i = 0; i < n; ++i) {
    const struct flat_entry *en = &fp->entries[rows[i]];
    int is_new;
    uint32_t s = first_seen(&syms, en->sym, &is_new);
    uint32_t file = r->st->file_of[en->sym];
    uint32_t f = first_seen(&files, file, &is_new);
    if (is_new) file_order[nfiles++] = en->sym;
    struct report_row *callees;
    size_t nc = report_callees(r, rows[i], &callees);
    fprintf(out, "%s[%u, %u, %u, %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", ",
            i ? ",\n" : "", en->rank, s, f, en->self[0], en->cum[0], report_kids(r, rows[i], callees, nc),
            en->self[1], en->cum[1], en->self[2], en->cum[2]);
    print_pct(out, report_entry_pct(r, en, 0));
    fputc(']', out);
    free(callees);
  }
  fputs("],\n\"files\": [\n", out);
  for (size_t i = 0; i < nfiles; ++i) {
    if (i) fputs(",\n", out);
    json_write_string(out, symtab_file_display(r->st, file_order[i]));
  }
  fputs("],\n\"symbols\": [\n", out);
  for (size_t i = 0; i < n; ++i) {
    if (i) fputs(",\n", out);
    json_write_string(out, symtab_display(r->st, fp->entries[rows[i]].sym));
  }
  fputs("],\n\"callers\": [\n", out);
  print_edges(r, rows, n, 1);
  fputs("],\n\"callees\": [\n", out);
  print_edges(r, rows, n, 0);
  fputs("]\n}\n", out);
  free(rows);
  free(file_order);
  idmap_free(&syms.map);
  idmap_free(&files.map);
}
