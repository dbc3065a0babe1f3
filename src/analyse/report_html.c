/* A self-contained HTML report: the flat profile as a table and one block per
 * entry with its callers and callees, every name a link to its own block. No
 * scripts, no external resources; names are HTML-escaped and bytes that are
 * not UTF-8 become U+FFFD. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

static void put_value(const struct report *r, int64_t v)
{
  char buf[64];
  if (r->is_time) format_thousands_2dp(buf, sizeof(buf), (double) v * r->tick_period);
  else format_thousands(buf, sizeof(buf), v);
  fputs(buf, r->out);
}

static void put_pct(const struct report *r, float pct)
{
  if (pct == REPORT_NEW_PCT) fputs("new", r->out);
  else fprintf(r->out, "%.2f", (double) pct);
}

static void put_link(const struct report *r, uint32_t e)
{
  const struct flat_entry *en = &r->flat->entries[e];
  fprintf(r->out, "<a href=\"#r%u\">", en->rank);
  html_write_string(r->out, symtab_display(r->st, en->sym));
  fprintf(r->out, "</a> [%u]", en->rank);
}

static void put_edges(const struct report *r, uint32_t e, int callers)
{
  struct report_row *rows;
  size_t n = callers ? report_callers(r, e, &rows) : report_callees(r, e, &rows);
  for (size_t i = 0; i < n; ++i) {
    fprintf(r->out, "<tr class=\"%s\"><td></td><td>", callers ? "caller" : "callee");
    put_pct(r, report_edge_pct(r, rows[i].edge));
    fputs("</td><td>", r->out);
    put_value(r, rows[i].edge->vals[0]);
    fputs(" / ", r->out);
    put_value(r, r->flat->entries[rows[i].entry].cum[0]);
    fprintf(r->out, "</td><td>%" PRId64 "</td><td>%s", rows[i].edge->vals[1], callers ? "&#8598; " : "&#8600; ");
    put_link(r, rows[i].entry);
    fputs("</td></tr>\n", r->out);
  }
  free(rows);
}

static const char style[] =
  "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
  "td,th{padding:1px 8px;text-align:right;white-space:nowrap}td:last-child,th:last-child{text-align:left}"
  "tr.main{font-weight:bold;background:#eef}tr.caller,tr.callee{color:#444}"
  "tbody.entry{border-top:1px solid #999}a{text-decoration:none}";

void report_html(const struct report *r)
{
  FILE *out = r->out;
  uint32_t *rows;
  size_t n = report_table(r, &rows);
  const char *unit = counter_unit(r->key, r->is_time);
  if (strcmp(unit, "counts") == 0) unit = "";
  fprintf(out, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>igprof-analyse: ");
  html_write_string(out, r->key);
  fprintf(out, "</title><style>%s</style></head><body>\n<h1>", style);
  html_write_string(out, r->key);
  fputs("</h1>\n<p>Total: ", out);
  put_value(r, r->flat->totals);
  fprintf(out, "%s%s, %" PRId64 " calls.</p>\n<h2>Flat profile</h2>\n", unit[0] ? " " : "", unit,
          r->flat->totfreq);
  fprintf(out, "<table>\n<tr><th>Rank</th><th>%s</th><th>Total</th><th>Self</th><th>Calls</th><th>Function</th></tr>\n",
          r->diff ? "delta %" : "% total");
  for (size_t i = 0; i < n; ++i) {
    const struct flat_entry *en = &r->flat->entries[rows[i]];
    fprintf(out, "<tr><td>%u</td><td>", en->rank);
    put_pct(r, report_entry_pct(r, en, 0));
    fputs("</td><td>", out);
    put_value(r, en->cum[0]);
    fputs("</td><td>", out);
    put_value(r, en->self[0]);
    fprintf(out, "</td><td>%" PRId64 "</td><td>", en->cum[1]);
    put_link(r, rows[i]);
    fputs("</td></tr>\n", out);
  }
  fputs("</table>\n<h2>Call graph</h2>\n<table>\n"
        "<tr><th>Rank</th><th>%</th><th>Total or edge / other's total</th><th>Calls</th><th>Function</th></tr>\n", out);
  for (size_t i = 0; i < n; ++i) {
    const struct flat_entry *en = &r->flat->entries[rows[i]];
    fprintf(out, "<tbody class=\"entry\" id=\"r%u\">\n", en->rank);
    put_edges(r, rows[i], 1);
    fprintf(out, "<tr class=\"main\"><td>[%u]</td><td>", en->rank);
    put_pct(r, report_entry_pct(r, en, 0));
    fputs("</td><td>", out);
    put_value(r, en->cum[0]);
    fputs(" (self ", out);
    put_value(r, en->self[0]);
    fprintf(out, ")</td><td>%" PRId64 "</td><td>", en->cum[1]);
    html_write_string(out, symtab_display(r->st, en->sym));
    fputs(" <small>", out);
    html_write_string(out, symtab_file_display(r->st, en->sym));
    fputs("</small></td></tr>\n", out);
    put_edges(r, rows[i], 0);
    fputs("</tbody>\n", out);
  }
  fputs("</table>\n</body></html>\n", out);
  free(rows);
}
