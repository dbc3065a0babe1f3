/* IgProf's gprof-style text report: two flat profiles and the call graph,
 * column for column as igprof-analyse prints them (docs/analyse.md). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"


static int cmp_int64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static const struct report *sort_report;

static int compare_callers(const void *pa, const void *pb)
{
  const struct report_row *a = pa, *b = pb;
  const struct flat_profile *fp = sort_report->flat;
  int c = cmp_int64(a->edge->vals[0], b->edge->vals[0]);
  if (!c) c = cmp_int64(fp->entries[a->entry].cum[0], fp->entries[b->entry].cum[0]);
  if (!c) c = strcmp(symtab_display(sort_report->st, fp->entries[a->entry].sym),
                     symtab_display(sort_report->st, fp->entries[b->entry].sym));
  return c;
}

static int compare_callees(const void *pa, const void *pb)
{
  const struct report_row *a = pa, *b = pb;
  const struct flat_profile *fp = sort_report->flat;
  int c = -cmp_int64(a->edge->vals[0], b->edge->vals[0]);
  if (!c) c = -cmp_int64(fp->entries[a->entry].cum[0], fp->entries[b->entry].cum[0]);
  if (!c) c = strcmp(symtab_display(sort_report->st, fp->entries[a->entry].sym),
                     symtab_display(sort_report->st, fp->entries[b->entry].sym));
  return c;
}

static size_t collect(const struct report *r, uint32_t e, int callers, struct report_row **rows)
{
  const struct flat_profile *fp = r->flat;
  size_t n = 0, cap = 0;
  *rows = NULL;
  uint32_t begin = callers ? fp->in_off[e] : fp->out_off[e];
  uint32_t end = callers ? fp->in_off[e + 1] : fp->out_off[e + 1];
  for (uint32_t k = begin; k < end; ++k) {
    const struct flat_edge *edge = &fp->edges[callers ? fp->in_list[k] : k];
    if (edge->vals[0]) {
      GROW(*rows, cap, n + 1);
      (*rows)[n++] = (struct report_row) { callers ? edge->caller : edge->callee, edge };
    }
  }
  sort_report = r;
  if (n > 1) qsort(*rows, n, sizeof(**rows), callers ? compare_callers : compare_callees);
  return n;
}

size_t report_callers(const struct report *r, uint32_t e, struct report_row **rows) { return collect(r, e, 1, rows); }
size_t report_callees(const struct report *r, uint32_t e, struct report_row **rows) { return collect(r, e, 0, rows); }

size_t report_table(const struct report *r, uint32_t **rows)
{
  const struct flat_profile *fp = r->flat;
  size_t n = 0;
  *rows = xmalloc((fp->count ? fp->count : 1) * sizeof(**rows));
  for (size_t i = 0; i < fp->count; ++i)
    if (fp->entries[fp->order[i]].cum[0]) (*rows)[n++] = fp->order[i];
  return n;
}

/* ---- output helpers: the call graph prints millions of cells, so no printf ---- */

static const char spaces[] = "                                                                ";
static const char dots[] = "................................................................";

static void put_fill(FILE *out, const char *fill, int n)
{
  while (n > 0) {
    int k = n < 64 ? n : 64;
    fwrite(fill, 1, (size_t) k, out);
    n -= k;
  }
}

/* printf("%*s") and printf("%-*s") */
static void put_right(FILE *out, int width, const char *s)
{
  size_t n = strlen(s);
  put_fill(out, spaces, width - (int) n);
  fwrite(s, 1, n, out);
}

static void put_left(FILE *out, int width, const char *s)
{
  size_t n = strlen(s);
  fwrite(s, 1, n, out);
  put_fill(out, spaces, width - (int) n);
}

static void put_rank(FILE *out, const char *prefix, uint32_t rank, const char *suffix)
{
  fputs(prefix, out);
  char digits[16];
  int n = 0;
  do { digits[15 - n++] = (char) ('0' + rank % 10); rank /= 10; } while (rank);
  fwrite(digits + 16 - n, 1, (size_t) n, out);
  fputs(suffix, out);
}

/* ---- formatting ---- */

static float percent(int64_t a, int64_t b)
{
  return b ? (float) ((double) a / (double) b * 100.) : 0.f;
}

static void fmt_value(const struct report *r, char *buf, size_t cap, int64_t v)
{
  if (r->is_time) format_thousands_2dp(buf, cap, (double) v * r->tick_period);
  else format_thousands(buf, cap, v);
}

static void fmt_count(char *buf, size_t cap, int64_t v) { format_thousands(buf, cap, v); }

static void print_pct(const struct report *r, float pct, const char *fmt)
{
  if (r->diff && pct == REPORT_NEW_PCT) fputs("    new  ", r->out);
  else fprintf(r->out, fmt, (double) pct);
}

/* "%*s / %-*s" */
static void print_fraction(FILE *out, int width, const char *n, const char *d)
{
  put_right(out, width, n);
  fputs(" / ", out);
  put_left(out, width, d);
}

struct layout { int maxval, maxcnt; };

static struct layout compute_layout(const struct report *r)
{
  char a[64], b[64];
  struct layout l;
  fmt_value(r, a, sizeof(a), r->flat->totals);
  if (r->is_time) fmt_value(r, b, sizeof(b), r->flat->totfreq);
  else fmt_count(b, sizeof(b), r->flat->totfreq);
  int la = (int) strlen(a), lb = (int) strlen(b);
  l.maxcnt = la > lb ? la : lb;
  if (l.maxcnt < 8) l.maxcnt = 8;
  l.maxval = l.maxcnt + (r->is_time ? 1 : 0);
  return l;
}

/* ---- percentages, plain or relative to the baseline (-D) ---- */

float report_entry_pct(const struct report *r, const struct flat_entry *en, int self)
{
  int64_t v = self ? en->self[0] : en->cum[0];
  if (!r->diff) return percent(v, r->flat->totals);
  uint32_t b = flat_find(r->base, en->sym);
  int64_t old = b == UINT32_MAX ? 0 : (self ? r->base->entries[b].self[0] : r->base->entries[b].cum[0]);
  return old ? percent(v, llabs(old)) : REPORT_NEW_PCT;
}

float report_edge_pct(const struct report *r, const struct flat_edge *edge)
{
  if (!r->diff) return percent(edge->vals[0], r->flat->totals);
  const struct flat_profile *fp = r->flat;
  uint32_t bc = flat_find(r->base, fp->entries[edge->caller].sym);
  uint32_t be = flat_find(r->base, fp->entries[edge->callee].sym);
  const struct flat_edge *old = bc == UINT32_MAX || be == UINT32_MAX ? NULL : flat_edge_find(r->base, bc, be);
  return old ? percent(edge->vals[0], llabs(old->vals[0])) : REPORT_NEW_PCT;
}

static const char *row_name(const struct report *r, uint32_t e)
{
  return symtab_display(r->st, r->flat->entries[e].sym);
}

static void print_lib(const struct report *r, uint32_t e)
{
  if (r->show_libs) fprintf(r->out, "  %s", symtab_file_display(r->st, r->flat->entries[e].sym));
}

/* ---- flat sections ---- */

static void print_flat_header(const struct report *r, const struct layout *l, const char *title, const char *kind)
{
  fprintf(r->out, "\n%.70s\n%s\n\n", "----------------------------------------------------------------------", title);
  fputs(r->diff ? "delta %  " : "% total  ", r->out);
  fprintf(r->out, "%*s  ", l->maxval, kind);
  if (r->show_calls) fprintf(r->out, "%*s  ", l->maxcnt, "Calls");
  if (r->show_paths) fprintf(r->out, "%*s  ", l->maxcnt, "Paths");
  fputs("Function\n", r->out);
}

static void print_flat_row(const struct report *r, const struct layout *l, uint32_t e, int self, float pct)
{
  const struct flat_entry *en = &r->flat->entries[e];
  char v[64], c[64], p[64];
  print_pct(r, pct, self ? "%7.2f  " : "%7.1f  ");
  fmt_value(r, v, sizeof(v), self ? en->self[0] : en->cum[0]);
  fprintf(r->out, "%*s  ", l->maxval, v);
  fmt_count(c, sizeof(c), self ? en->self[1] : en->cum[1]);
  fmt_count(p, sizeof(p), en->self[2]);
  if (r->show_calls) fprintf(r->out, "%*s  ", l->maxcnt, c);
  if (r->show_paths) fprintf(r->out, "%*s  ", l->maxcnt, p);
  fprintf(r->out, "%s [%u]", row_name(r, e), en->rank);
  print_lib(r, e);
  fputc('\n', r->out);
}

/* IgProf lists rows in order and stops after the first one under the
 * threshold (that row is still printed). With -o ascending the small rows
 * come first, so rows under the threshold are skipped instead. */
static void print_flat_section(const struct report *r, const struct layout *l, const uint32_t *rows, size_t n, int self)
{
  for (size_t i = 0; i < n; ++i) {
    const struct flat_entry *en = &r->flat->entries[rows[i]];
    float pct = report_entry_pct(r, en, self);
    int64_t v = self ? en->self[0] : en->cum[0];
    /* |pct|: with -b alone values and shares can be negative. */
    int below = !r->diff && fabsf(pct) < (self ? 0.01f : 1.f);
    if (r->ascending && (below || v == 0)) continue;
    print_flat_row(r, l, rows[i], self, pct);
    if (below || v == 0) break;
  }
}

static const struct flat_profile *self_sort_profile;
static int self_sort_ascending;

static int compare_self(const void *pa, const void *pb)
{
  uint32_t a = *(const uint32_t *) pa, b = *(const uint32_t *) pb;
  int64_t va = llabs(self_sort_profile->entries[a].self[0]);
  int64_t vb = llabs(self_sort_profile->entries[b].self[0]);
  if (va != vb) return (va > vb) == !self_sort_ascending ? -1 : 1;
  /* Stable: keep rank order among equals. */
  return self_sort_profile->entries[a].rank < self_sort_profile->entries[b].rank ? -1 : 1;
}

/* ---- call graph ---- */

static void print_divider(const struct report *r, const struct layout *l)
{
  int divlen = 34 + 3 * l->maxval + (r->show_calls ? 2 * l->maxcnt + 5 : 0) + (r->show_paths ? 2 * l->maxcnt + 5 : 0);
  fputc('\n', r->out);
  for (int x = 0; x < (1 + divlen) / 2; x++) fputs("- ", r->out);
  fputc('\n', r->out);
}

static void print_graph_header(const struct report *r, const struct layout *l)
{
  fprintf(r->out, "%-8s", "Rank");
  fputs(r->diff ? "delta %  " : "% total  ", r->out);
  fprintf(r->out, "%*s  ", l->maxval, "Self");
  print_fraction(r->out, l->maxval, "Self", "Children");
  fputs("  ", r->out);
  if (r->show_calls) { print_fraction(r->out, l->maxcnt, "Calls", "Total"); fputs("  ", r->out); }
  if (r->show_paths) { print_fraction(r->out, l->maxcnt, "Paths", "Total"); fputs("  ", r->out); }
  fputs("Function\n", r->out);
}

static void print_other_row(const struct report *r, const struct layout *l, const struct report_row *row)
{
  const struct flat_entry *other = &r->flat->entries[row->entry];
  char a[64], b[64];
  fputs("        ", r->out);
  print_pct(r, report_edge_pct(r, row->edge), "%7.1f  ");
  put_fill(r->out, dots, l->maxval);
  fputs("  ", r->out);
  fmt_value(r, a, sizeof(a), row->edge->vals[0]);
  fmt_value(r, b, sizeof(b), other->cum[0]);
  print_fraction(r->out, l->maxval, a, b);
  fputs("  ", r->out);
  if (r->show_calls) {
    fmt_count(a, sizeof(a), row->edge->vals[1]);
    fmt_count(b, sizeof(b), other->cum[1]);
    print_fraction(r->out, l->maxcnt, a, b);
    fputs("  ", r->out);
  }
  if (r->show_paths) {
    fmt_count(a, sizeof(a), row->edge->vals[2]);
    fmt_count(b, sizeof(b), other->cum[2]);
    print_fraction(r->out, l->maxcnt, a, b);
    fputs("  ", r->out);
  }
  fputs("  ", r->out);
  fputs(row_name(r, row->entry), r->out);
  put_rank(r->out, " [", other->rank, "]");
  print_lib(r, row->entry);
  fputc('\n', r->out);
}

/* For *_MAX counters "children" is the largest callee, not cum - self. */
int64_t report_kids(const struct report *r, uint32_t e, const struct report_row *callees, size_t n)
{
  const struct flat_entry *en = &r->flat->entries[e];
  int64_t kids;
  if (!r->flat->is_max) {
    if (!value_sub(en->cum[0], en->self[0], &kids)) {
      char msg[512];
      snprintf(msg, sizeof(msg), "the children value of '%.300s'", symtab_name(r->st, en->sym));
      fatal_overflow(msg);
    }
    return kids;
  }
  int64_t m = 0;
  for (size_t i = 0; i < n; ++i) if (callees[i].edge->vals[0] > m) m = callees[i].edge->vals[0];
  return m;
}

static void print_main_row(const struct report *r, const struct layout *l, uint32_t e, int64_t kids)
{
  const struct flat_entry *en = &r->flat->entries[e];
  char rank[32], a[64], b[64];
  snprintf(rank, sizeof(rank), "[%u]", en->rank);
  fprintf(r->out, "%-8s", rank);
  print_pct(r, report_entry_pct(r, en, 0), "%7.1f  ");
  fmt_value(r, a, sizeof(a), en->cum[0]);
  put_right(r->out, l->maxval, a);
  fputs("  ", r->out);
  fmt_value(r, a, sizeof(a), en->self[0]);
  fmt_value(r, b, sizeof(b), kids);
  print_fraction(r->out, l->maxval, a, b);
  fputs("  ", r->out);
  if (r->show_calls) {
    fmt_count(a, sizeof(a), en->cum[1]);
    put_right(r->out, l->maxcnt, a);
    fputs("  ", r->out);
    put_fill(r->out, spaces, l->maxcnt + 3);
  }
  if (r->show_paths) {
    fmt_count(a, sizeof(a), en->self[2]);
    put_right(r->out, l->maxcnt, a);
    fputs("  ", r->out);
    put_fill(r->out, spaces, l->maxcnt + 3);
  }
  fputs(row_name(r, e), r->out);
  print_lib(r, e);
  fputc('\n', r->out);
}

static void print_call_graph(const struct report *r, const struct layout *l, const uint32_t *rows, size_t n)
{
  for (size_t i = 0; i < n; ++i) {
    uint32_t e = rows[i];
    struct report_row *callers, *callees;
    size_t ncallers = report_callers(r, e, &callers);
    size_t ncallees = report_callees(r, e, &callees);
    print_divider(r, l);
    if (r->flat->entries[e].rank % 10 == 1) print_graph_header(r, l);
    for (size_t k = 0; k < ncallers; ++k) print_other_row(r, l, &callers[k]);
    print_main_row(r, l, e, report_kids(r, e, callees, ncallees));
    for (size_t k = 0; k < ncallees; ++k) print_other_row(r, l, &callees[k]);
    free(callers);
    free(callees);
  }
}

int report_sampling_note(const struct report *r, char *buf, size_t cap)
{
  const struct mem_sampling *m = r->sampling;
  if (!m || !m->inputs || strncmp(r->key, "MEM_", 4) != 0) return 0;
  if (m->interval > 0)
    snprintf(buf, cap, "Estimates, sampled: one allocation per %" PRId64 " bytes on average, %" PRId64 " allocations sampled",
             m->interval, m->samples);
  else
    snprintf(buf, cap, "Estimates, sampled at different intervals, %" PRId64 " allocations sampled", m->samples);
  return 1;
}

void report_text(const struct report *r)
{
  uint32_t *rows;
  size_t n = report_table(r, &rows);
  struct layout l = compute_layout(r);
  fprintf(r->out, "Counter: %s\n", r->key);
  /* A sampled memory profile: its figures are estimates (docs/running.md). */
  char note[160];
  if (report_sampling_note(r, note, sizeof(note))) fprintf(r->out, "%s\n", note);
  print_flat_header(r, &l, r->diff ? "Flat profile (cumulatively different entries only)" : "Flat profile (cumulative >= 1%)", "Total");
  print_flat_section(r, &l, rows, n, 0);
  fputc('\n', r->out);

  uint32_t *by_self = xmalloc((n ? n : 1) * sizeof(*by_self));
  memcpy(by_self, rows, n * sizeof(*by_self));
  self_sort_profile = r->flat;
  self_sort_ascending = r->ascending;
  if (n > 1) qsort(by_self, n, sizeof(*by_self), compare_self);
  print_flat_header(r, &l, r->diff ? "Flat profile (self different entries only)" : "Flat profile (self >= 0.01%)", "Self");
  print_flat_section(r, &l, by_self, n, 1);
  free(by_self);

  fprintf(r->out, "\n\n%.70s\nCall tree profile (cumulative)\n", "----------------------------------------------------------------------");
  print_call_graph(r, &l, rows, n);
  free(rows);
}
