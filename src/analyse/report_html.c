/* A self-contained HTML report: a flame graph drawn from the call tree (one
 * SVG rectangle per call path, as wide as its cumulative value), the flat
 * profile as a searchable, sortable table, and one block per entry with its
 * callers (marked with an up arrow) and callees (a down arrow), every name a
 * link to its own block.
 *
 * A big profile's page stays small: it holds the first `html_limit` entries
 * (by rank; the others are counted in a note and their names are not links),
 * at most HTML_EDGES callers and callees per entry, and flame rectangles at
 * least one pixel wide, HTML_FLAME_RECTS at most. No external resources;
 * the script only filters and sorts what is in the page. Names are
 * HTML-escaped and bytes that are not UTF-8 become U+FFFD. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define HTML_EDGES 10            /* callers and callees listed per entry */
#define HTML_FLAME_WIDTH 1200    /* SVG units (pixels at 100%) */
#define HTML_FLAME_ROW 16
#define HTML_FLAME_RECTS 8000
#define HTML_FLAME_DEPTH 256

struct html {
  const struct report *r;
  FILE *out;
  const uint8_t *in_page;  /* entry index -> shown in this page */
};

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

/* A table cell with the value as text and, for sorting, as a number (data-v). */
static void put_value_cell(const struct report *r, int64_t v)
{
  fprintf(r->out, "<td data-v=\"%" PRId64 "\">", v);
  put_value(r, v);
  fputs("</td>", r->out);
}

/* The entry's name, a link to its block when that block is in the page. */
static void put_link(const struct html *h, uint32_t e)
{
  const struct flat_entry *en = &h->r->flat->entries[e];
  if (h->in_page[e]) fprintf(h->out, "<a href=\"#r%u\">", en->rank);
  html_write_string(h->out, symtab_display(h->r->st, en->sym));
  fprintf(h->out, "%s [%u]", h->in_page[e] ? "</a>" : "", en->rank);
}

static void put_edges(const struct html *h, uint32_t e, int callers)
{
  const struct report *r = h->r;
  struct report_row *rows;
  size_t n = callers ? report_callers(r, e, &rows) : report_callees(r, e, &rows);
  /* Callers are in ascending order (the largest next to the entry): keep the last ones. */
  size_t first = callers && n > HTML_EDGES ? n - HTML_EDGES : 0, last = n > HTML_EDGES && !callers ? HTML_EDGES : n;
  const char *what = callers ? "callers" : "callees";
  if (callers && first)
    fprintf(h->out, "<tr class=\"more\"><td></td><td colspan=\"4\">%zu smaller %s not shown</td></tr>\n", first, what);
  for (size_t i = first; i < last; ++i) {
    fprintf(h->out, "<tr class=\"%s\"><td></td><td>", callers ? "caller" : "callee");
    put_pct(r, report_edge_pct(r, rows[i].edge));
    fputs("</td><td>", h->out);
    put_value(r, rows[i].edge->vals[0]);
    fputs(" / ", h->out);
    put_value(r, r->flat->entries[rows[i].entry].cum[0]);
    fprintf(h->out, "</td><td>%" PRId64 "</td><td><span class=\"mark\" title=\"%s\">%s</span> ",
            rows[i].edge->vals[1], callers ? "caller" : "callee", callers ? "&#8598;" : "&#8600;");
    put_link(h, rows[i].entry);
    fputs("</td></tr>\n", h->out);
  }
  if (!callers && last < n)
    fprintf(h->out, "<tr class=\"more\"><td></td><td colspan=\"4\">%zu smaller %s not shown</td></tr>\n", n - last, what);
  free(rows);
}

/* ---- flame graph ---- */

struct flame_rect { uint32_t node; uint32_t depth; double x, w; };

static const struct report *flame_sort_report;

static int by_name(const void *pa, const void *pb)
{
  const struct report *r = flame_sort_report;
  uint32_t a = *(const uint32_t *) pa, b = *(const uint32_t *) pb;
  int c = strcmp(symtab_display(r->st, r->tree->nodes[a].sym), symtab_display(r->st, r->tree->nodes[b].sym));
  return c ? c : (a < b ? -1 : a > b);
}

/* The rectangles, depth first: a node's children side by side under it, by
 * name (as flame graphs merge stacks), each as wide as its cumulative value;
 * narrower than a pixel, deeper than HTML_FLAME_DEPTH or past
 * HTML_FLAME_RECTS: left out. Returns the count; *cut says whether any was
 * left out for the count limit. */
static size_t flame_layout(const struct report *r, struct flame_rect **out, int *cut)
{
  const struct call_tree *t = r->tree;
  double scale = (double) HTML_FLAME_WIDTH / (double) t->nodes[0].ccnt;
  size_t n = 0, cap = 0, ntodo = 0, todo_cap = 0, kids_cap = 0;
  struct flame_rect *todo = NULL;
  uint32_t *kids = NULL;
  *out = NULL;
  *cut = 0;
  GROW(todo, todo_cap, 1);
  todo[ntodo++] = (struct flame_rect) { 0, 0, 0., HTML_FLAME_WIDTH };
  flame_sort_report = r;
  while (ntodo) {
    struct flame_rect rect = todo[--ntodo];
    if (rect.depth > 0) {
      if (n == HTML_FLAME_RECTS) { *cut = 1; break; }
      GROW(*out, cap, n + 1);
      (*out)[n++] = rect;
    }
    if (rect.depth >= HTML_FLAME_DEPTH) continue;
    size_t k = 0;
    for (uint32_t c = t->nodes[rect.node].first_child; c != NO_NODE; c = t->nodes[c].next_sibling)
      if ((double) t->nodes[c].ccnt * scale >= 1.) {
        GROW(kids, kids_cap, k + 1);
        kids[k++] = c;
      }
    if (k > 1) qsort(kids, k, sizeof(*kids), by_name);
    double x = rect.x;
    GROW(todo, todo_cap, ntodo + k);
    for (size_t i = 0; i < k; ++i) {   /* pushed last to first: drawn first to last */
      double w = (double) t->nodes[kids[i]].ccnt * scale;
      todo[ntodo + k - 1 - i] = (struct flame_rect) { kids[i], rect.depth + 1, x, w };
      x += w;
    }
    ntodo += k;
  }
  free(todo);
  free(kids);
  return n;
}

/* A warm colour from the name, the same for a name wherever it is. */
static void put_colour(FILE *out, const char *name)
{
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *) name; *p; ++p) h = (h ^ *p) * 16777619u;
  fprintf(out, "rgb(%u,%u,%u)", 205 + h % 50, 80 + (h >> 8) % 130, 40 + (h >> 16) % 50);
}

static void put_flame(const struct html *h)
{
  const struct report *r = h->r;
  FILE *out = h->out;
  fputs("<h2>Flame graph</h2>\n", out);
  if (r->diff || r->tree->nodes[0].ccnt <= 0 || r->tree->is_max) {
    fputs("<p id=\"flame-none\">No flame graph: it needs a counter whose values add up along the stacks"
          " (not a difference, not a maximum).</p>\n", out);
    return;
  }
  int cut;
  struct flame_rect *rects;
  size_t n = flame_layout(r, &rects, &cut);
  uint32_t depth = 0;
  for (size_t i = 0; i < n; ++i) if (rects[i].depth > depth) depth = rects[i].depth;
  fprintf(out, "<p>Each box is a call path, as wide as its total; callers below, callees above. "
               "Boxes narrower than a pixel are left out. Click a box for its entry.</p>\n");
  if (cut) fprintf(out, "<p id=\"flame-cut\">The graph stops at %d boxes: the rest of the tree is left out.</p>\n",
                   HTML_FLAME_RECTS);
  fprintf(out, "<svg id=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %u\" width=\"%d\" height=\"%u\">\n",
          HTML_FLAME_WIDTH, depth * HTML_FLAME_ROW, HTML_FLAME_WIDTH, depth * HTML_FLAME_ROW);
  for (size_t i = 0; i < n; ++i) {
    const struct tree_node *node = &r->tree->nodes[rects[i].node];
    const char *name = symtab_display(r->st, node->sym);
    uint32_t e = flat_find(r->flat, r->flat->node_sym[rects[i].node]);
    int link = e != UINT32_MAX && h->in_page[e];
    double y = (double) ((depth - rects[i].depth) * HTML_FLAME_ROW);
    if (link) fprintf(out, "<a href=\"#r%u\">", r->flat->entries[e].rank);
    fputs("<g class=\"f\"><title>", out);
    html_write_string(out, name);
    fputs(" (", out);
    put_value(r, node->ccnt);
    fprintf(out, ", %.2f%%)</title><rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"", 
            100. * (double) node->ccnt / (double) r->tree->nodes[0].ccnt, rects[i].x, y, rects[i].w, HTML_FLAME_ROW - 1);
    put_colour(out, name);
    fputs("\"/>", out);
    /* A label where about 7 units per character fit. */
    size_t fit = (size_t) (rects[i].w / 7.);
    if (fit >= 3) {
      fprintf(out, "<text x=\"%.1f\" y=\"%.0f\">", rects[i].x + 3., y + HTML_FLAME_ROW - 4);
      size_t len = strlen(name);
      if (len <= fit) {
        html_write_string(out, name);
      } else {
        char *cut_name = xmalloc(fit + 1);
        size_t k = fit - 2;
        while (k > 0 && ((unsigned char) name[k] & 0xc0) == 0x80) --k;   /* not inside a UTF-8 sequence */
        memcpy(cut_name, name, k);
        cut_name[k] = 0;
        html_write_string(out, cut_name);
        fputs("..", out);
        free(cut_name);
      }
      fputs("</text>", out);
    }
    fputs(link ? "</g></a>\n" : "</g>\n", out);
  }
  fputs("</svg>\n", out);
  free(rects);
}

/* ---- page ---- */

static const char style[] =
  "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
  "td,th{padding:1px 8px;text-align:right;white-space:nowrap}td:last-child,th:last-child{text-align:left}"
  "tr.main{font-weight:bold;background:#eef}tr.caller,tr.callee,tr.more{color:#444}"
  "tbody.entry{border-top:1px solid #999}a{text-decoration:none}"
  "#flat th{cursor:pointer;user-select:none}#flat th[aria-sort=ascending]::after{content:' \\25B2'}"
  "#flat th[aria-sort=descending]::after{content:' \\25BC'}"
  ".mark{font-weight:bold}tr.caller .mark{color:#070}tr.callee .mark{color:#a40}"
  "#flame{max-width:100%;height:auto;font:11px monospace}#flame rect{stroke:#fff;stroke-width:.3}"
  "#flame g.match rect{fill:#c3f}#flame text{pointer-events:none}";

/* Search (?q= or the box), sorting (?sort=COLUMN&order=ascending|descending
 * or a click on a heading: numbers first descending, names ascending, by
 * code points; ties by rank): both act on the rows in the page only. */
static const char script[] =
  "(function(){\n"
  "var table=document.getElementById('flat'),body=table.tBodies[0],rows=Array.from(body.rows);\n"
  "var box=document.getElementById('search'),shown=document.getElementById('shown');\n"
  "function key(row,col,num){var c=row.cells[col];return num?Number(c.dataset.v):c.textContent;}\n"
  "function sort(th,order){\n"
  " var col=th.cellIndex,num=th.dataset.type==='num',sign=order==='ascending'?1:-1;\n"
  " rows.sort(function(a,b){var x=key(a,col,num),y=key(b,col,num);\n"
  "  var c=x<y?-1:x>y?1:0;\n"
  "  return c?sign*c:Number(a.cells[0].dataset.v)-Number(b.cells[0].dataset.v);});\n"
  " rows.forEach(function(r){body.appendChild(r);});\n"
  " Array.from(table.tHead.rows[0].cells).forEach(function(h){h.removeAttribute('aria-sort');});\n"
  " th.setAttribute('aria-sort',order);}\n"
  "function search(q){\n"
  " var n=0,lq=q.toLowerCase();\n"
  " rows.forEach(function(r){var hit=!lq||r.cells[5].textContent.toLowerCase().indexOf(lq)>=0;\n"
  "  r.hidden=!hit;if(hit)n++;});\n"
  " document.querySelectorAll('#flame g.f').forEach(function(g){\n"
  "  var hit=lq&&g.querySelector('title').textContent.toLowerCase().indexOf(lq)>=0;g.classList.toggle('match',!!hit);});\n"
  " shown.textContent=lq?n+' of '+rows.length+' entries match \\u201c'+q+'\\u201d':rows.length+' entries';}\n"
  "Array.from(table.tHead.rows[0].cells).forEach(function(th){\n"
  " th.addEventListener('click',function(){\n"
  "  var now=th.getAttribute('aria-sort'),num=th.dataset.type==='num';\n"
  "  sort(th,now?(now==='descending'?'ascending':'descending'):(num?'descending':'ascending'));});});\n"
  "box.addEventListener('input',function(){search(box.value);});\n"
  "var params=new URLSearchParams(location.search);\n"
  "var th=table.querySelector('th[data-sort=\"'+(params.get('sort')||'')+'\"]');\n"
  "var order=params.get('order');\n"
  "if(th)sort(th,order==='ascending'||order==='descending'?order:th.dataset.type==='num'?'descending':'ascending');\n"
  "if(params.get('q')!==null)box.value=params.get('q');\n"
  "search(box.value);\n"
  "})();\n";

void report_html(const struct report *r)
{
  FILE *out = r->out;
  uint32_t *rows;
  size_t n = report_table(r, &rows);
  size_t shown = r->html_limit && r->html_limit < n ? r->html_limit : n;
  uint8_t *in_page = xcalloc(r->flat->count ? r->flat->count : 1, 1);
  for (size_t i = 0; i < shown; ++i) in_page[rows[i]] = 1;
  struct html h = { r, out, in_page };
  const char *unit = counter_unit(r->key, r->is_time);
  if (strcmp(unit, "counts") == 0) unit = "";
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
        "<title>igprof-analyse: ", out);
  html_write_string(out, r->key);
  fprintf(out, "</title><style>%s</style></head><body>\n<h1>", style);
  html_write_string(out, r->key);
  fputs("</h1>\n<p id=\"total\">Total: ", out);
  put_value(r, r->flat->totals);
  fprintf(out, "%s%s, %" PRId64 " calls.</p>\n", unit[0] ? " " : "", unit, r->flat->totfreq);
  char note[160];
  if (report_sampling_note(r, note, sizeof(note))) {
    fputs("<p id=\"sampling\">", out);
    html_write_string(out, note);
    fputs(".</p>\n", out);
  }
  put_flame(&h);
  fputs("<h2>Flat profile</h2>\n<p><input id=\"search\" type=\"search\" placeholder=\"search names\" "
        "aria-label=\"search names\"> <span id=\"shown\"></span></p>\n", out);
  fprintf(out, "<table id=\"flat\"><thead><tr><th data-sort=\"rank\" data-type=\"num\">Rank</th>"
               "<th data-sort=\"pct\" data-type=\"num\">%s</th><th data-sort=\"total\" data-type=\"num\">Total</th>"
               "<th data-sort=\"self\" data-type=\"num\">Self</th><th data-sort=\"calls\" data-type=\"num\">Calls</th>"
               "<th data-sort=\"name\">Function</th></tr></thead><tbody>\n",
          r->diff ? "delta %" : "% total");
  for (size_t i = 0; i < shown; ++i) {
    const struct flat_entry *en = &r->flat->entries[rows[i]];
    float pct = report_entry_pct(r, en, 0);
    fprintf(out, "<tr><td data-v=\"%u\">%u</td><td data-v=\"%.4f\">", en->rank, en->rank,
            pct == REPORT_NEW_PCT ? (double) FLT_MAX : (double) pct);
    put_pct(r, pct);
    fputs("</td>", out);
    put_value_cell(r, en->cum[0]);
    put_value_cell(r, en->self[0]);
    fprintf(out, "<td data-v=\"%" PRId64 "\">%" PRId64 "</td><td>", en->cum[1], en->cum[1]);
    put_link(&h, rows[i]);
    fputs("</td></tr>\n", out);
  }
  fputs("</tbody></table>\n", out);
  if (shown < n)
    fprintf(out, "<p id=\"more\">%zu more entries, each below %.2f%% of the total, are not in this page "
                 "(igprof-analyse --html-limit N, 0 for all; or igprof-navigator).</p>\n",
            n - shown, (double) report_entry_pct(r, &r->flat->entries[rows[shown - 1]], 0));
  fputs("<h2>Call graph</h2>\n<p><span class=\"mark\">&#8598;</span> callers (above the entry), "
        "<span class=\"mark\">&#8600;</span> callees (below it).</p>\n<table>\n"
        "<tr><th>Rank</th><th>%</th><th>Total or edge / other's total</th><th>Calls</th><th>Function</th></tr>\n", out);
  for (size_t i = 0; i < shown; ++i) {
    const struct flat_entry *en = &r->flat->entries[rows[i]];
    fprintf(out, "<tbody class=\"entry\" id=\"r%u\">\n", en->rank);
    put_edges(&h, rows[i], 1);
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
    put_edges(&h, rows[i], 0);
    fputs("</tbody>\n", out);
  }
  fprintf(out, "</table>\n<script>\n%s</script>\n</body></html>\n", script);
  free(in_page);
  free(rows);
}
