/* igprof-navigator: browse a report database written by
 * `igprof-analyse --sqlite FILE.sql3` in a web browser.
 *
 * HTTP comes from libmicrohttpd, driven from one thread by our own event
 * loop over its epoll descriptor: every connection is served as its bytes
 * arrive, so a client that is slow or silent holds only its own connection,
 * never the others. Each request has a deadline (--timeout, from the
 * connection or the end of its previous request to the last byte of the
 * answer); a connection past it is shut down. Pages are built in memory from
 * bounded queries (at most MAX_ROWS rows, a time budget per request) on the
 * database opened read-only, every parameter bound. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static const char usage[] =
  "usage: igprof-navigator [-p PORT] [-a ADDRESS] [-t SECONDS] FILE.sql3\n"
  "  Serve the report database FILE.sql3 (from igprof-analyse --sqlite) over HTTP.\n"
  "  -p, --port PORT       port to listen on (default 8080; 0 picks a free one)\n"
  "  -a, --address ADDR    IPv4 address to listen on (default 127.0.0.1)\n"
  "  -t, --timeout SECONDS time a client has for one request and its answer (default 10)\n"
  "  -h, --help            this text\n"
  "      --version         igprof's version\n";

#define MAX_ROWS 1000          /* rows of one table on a page */
#define MAX_CONNECTIONS 64     /* more are refused until one ends */
#define QUERY_BUDGET_MS 2000   /* database time of one page: the loop serves everyone */

struct navigator {
  sqlite3 *db;
  const char *path;
  char counter[128];
  double tick_period;
  int is_time;
  int64_t total;
  unsigned timeout;            /* seconds per request */
  int64_t query_deadline;      /* monotonic ms; the progress handler stops queries past it */
  int interrupted;             /* a query of this page hit the budget */
  struct client *clients;      /* open connections, for their deadlines */
};

/* ---- output helpers (pages are built in memory, then handed to libmicrohttpd) ---- */

static void put_value(const struct navigator *nav, FILE *out, int64_t v)
{
  char buf[64];
  if (nav->is_time) format_thousands_2dp(buf, sizeof(buf), (double) v * nav->tick_period);
  else format_thousands(buf, sizeof(buf), v);
  fputs(buf, out);
}

static void page_start(const struct navigator *nav, FILE *out, const char *title)
{
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", out);
  html_write_string(out, title);
  fputs("</title><link rel=\"icon\" href=\"data:,\"><style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{padding:1px 8px;text-align:right;white-space:nowrap}td:last-child,th:last-child{text-align:left}"
        "tr.main{font-weight:bold;background:#eef}a{text-decoration:none}</style></head><body>\n", out);
  fputs("<p><a href=\"/\">by cumulative</a> | <a href=\"/self\">by self</a> | ", out);
  html_write_string(out, nav->path);
  fputs(": ", out);
  html_write_string(out, nav->counter);
  fputs(", total ", out);
  put_value(nav, out, nav->total);
  fputs(nav->is_time ? " seconds" : "", out);
  fputs("</p>\n<form action=\"/search\" method=\"get\"><input type=\"search\" name=\"q\" "
        "aria-label=\"search names\" placeholder=\"search names\"> <button>Search</button></form>\n", out);
}

static void page_end(FILE *out) { fputs("</body></html>\n", out); }

/* A page with a heading and one paragraph; returns `status`. */
static unsigned page_message(const struct navigator *nav, FILE *out, unsigned status, const char *heading, const char *text)
{
  char title[128];
  snprintf(title, sizeof(title), "igprof: %s", heading);
  page_start(nav, out, title);
  fputs("<h1>", out);
  html_write_string(out, heading);
  fputs("</h1>\n<p>", out);
  html_write_string(out, text);
  fputs("</p>\n", out);
  page_end(out);
  return status;
}

/* ---- pages: each writes its HTML and returns the HTTP status ---- */

static sqlite3_stmt *prepare(const struct navigator *nav, const char *sql)
{
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(nav->db, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
  return st;
}

/* Rows of (rank, pct, value, other value, calls, name) as table lines. */
static void put_rows(const struct navigator *nav, FILE *out, sqlite3_stmt *st, const char *cls)
{
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t rank = (int64_t) sqlite3_column_int64(st, 0);
    fprintf(out, "<tr class=\"%s\"><td>%" PRId64 "</td><td>%.2f</td><td>", cls, rank, sqlite3_column_double(st, 1));
    put_value(nav, out, sqlite3_column_int64(st, 2));
    fputs("</td><td>", out);
    put_value(nav, out, sqlite3_column_int64(st, 3));
    fprintf(out, "</td><td>%" PRId64 "</td><td><a href=\"/%" PRId64 "\">", (int64_t) sqlite3_column_int64(st, 4), rank);
    html_write_string(out, (const char *) sqlite3_column_text(st, 5));
    fputs("</a></td></tr>\n", out);
  }
}

/* `sql` with its parameters bound: :arg, :limit (MAX_ROWS) and :offset
 * (the rows of earlier pages); NULL when it does not prepare. */
static sqlite3_stmt *prepare_bound(const struct navigator *nav, const char *sql, int64_t arg, int64_t page)
{
  sqlite3_stmt *st = prepare(nav, sql);
  if (!st) return NULL;
  int i = sqlite3_bind_parameter_index(st, ":arg");
  if (i) sqlite3_bind_int64(st, i, arg);
  if ((i = sqlite3_bind_parameter_index(st, ":limit")) != 0) sqlite3_bind_int(st, i, MAX_ROWS);
  if ((i = sqlite3_bind_parameter_index(st, ":offset")) != 0) sqlite3_bind_int64(st, i, (page - 1) * MAX_ROWS);
  return st;
}

static void put_query(const struct navigator *nav, FILE *out, const char *sql, int64_t arg, int64_t page,
                      const char *cls)
{
  sqlite3_stmt *st = prepare_bound(nav, sql, arg, page);
  if (!st) return;
  put_rows(nav, out, st, cls);
  sqlite3_finalize(st);
}

/* The single number `count_sql` gives (0 if none). */
static int64_t query_count(const struct navigator *nav, const char *count_sql, int64_t arg)
{
  sqlite3_stmt *st = prepare_bound(nav, count_sql, arg, 1);
  int64_t n = st && sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return n;
}

static int64_t page_count(int64_t rows) { return rows ? (rows + MAX_ROWS - 1) / MAX_ROWS : 1; }

/* "A-B of N" for the rows of `page` in a list of `count`. */
static void put_range(FILE *out, int64_t page, int64_t count)
{
  int64_t first = (page - 1) * MAX_ROWS + 1, last = page * MAX_ROWS < count ? page * MAX_ROWS : count;
  if (first > count) fprintf(out, "none of %" PRId64, count);
  else fprintf(out, "%" PRId64 "&ndash;%" PRId64 " of %" PRId64, first, last, count);
}

/* " (page P of K) | previous | next": links to `base` (a path and the start
 * of its query, HTML-escaped: "/self?", "/search?q=x&amp;") with page=N. */
static void put_page_links(FILE *out, const char *base, int64_t page, int64_t pages)
{
  fprintf(out, " (page %" PRId64 " of %" PRId64 ")", page, pages);
  if (page > 1) fprintf(out, " | <a href=\"%spage=%" PRId64 "\">previous %d</a>", base, page - 1, MAX_ROWS);
  if (page < pages) fprintf(out, " | <a href=\"%spage=%" PRId64 "\">next %d</a>", base, page + 1, MAX_ROWS);
}

/* The last row of a list that goes on on the next page (`base` as above). */
static void put_more(FILE *out, const char *base, int64_t page, int64_t count, const char *what)
{
  if (count > page * MAX_ROWS)
    fprintf(out, "<tr class=\"more\"><td colspan=\"6\">%" PRId64 " more %s: <a href=\"%spage=%" PRId64
                 "\">next page</a></td></tr>\n", count - page * MAX_ROWS, what, base, page + 1);
}

static unsigned page_list(const struct navigator *nav, FILE *out, int by_self, int64_t page)
{
  /* igprof-analyse indexes abs(cumulative_count) and abs(self_count): a
   * page of MAX_ROWS comes straight from the index. */
  static const char *const sql[2] = {
    "SELECT m.id, m.pct, m.cumulative_count, m.self_count, m.total_calls, s.name FROM mainrows m"
    " JOIN symbols s ON s.id = m.symbol_id ORDER BY abs(m.cumulative_count) DESC, m.id LIMIT :limit OFFSET :offset",
    "SELECT m.id, m.pct, m.self_count, m.cumulative_count, m.self_calls, s.name FROM mainrows m"
    " JOIN symbols s ON s.id = m.symbol_id ORDER BY abs(m.self_count) DESC, m.id LIMIT :limit OFFSET :offset",
  };
  const char *path = by_self ? "/self?" : "/?";
  int64_t count = query_count(nav, "SELECT count(*) FROM mainrows", 0);
  if (page > page_count(count))
    return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", "no such page: the list is shorter");
  page_start(nav, out, by_self ? "igprof: by self" : "igprof: by cumulative");
  fprintf(out, "<h1>Entries by %s value</h1>\n<p class=\"pages\">Entries ", by_self ? "self" : "cumulative");
  put_range(out, page, count);
  put_page_links(out, path, page, page_count(count));
  fprintf(out, "</p>\n<table>\n<tr><th>Rank</th><th>%% total</th><th>%s</th><th>%s</th>"
          "<th>Calls</th><th>Function</th></tr>\n", by_self ? "Self" : "Total", by_self ? "Total" : "Self");
  put_query(nav, out, sql[by_self], 0, page, "row");
  put_more(out, path, page, count, "entries");
  fputs("</table>\n", out);
  page_end(out);
  return MHD_HTTP_OK;
}

/* "/search?q=<text>&amp;" in a malloc'ed string (NULL: out of memory), the
 * text's bytes but letters, digits and -._~ as %HH. */
static char *search_base(const char *text)
{
  static const char hex[] = "0123456789ABCDEF";
  char *base = malloc(strlen(text) * 3 + sizeof("/search?q=&amp;")), *d = base;
  if (!base) return NULL;
  d += sprintf(d, "/search?q=");
  for (const unsigned char *p = (const unsigned char *) text; *p; ++p) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
      *d++ = (char) *p;
    } else {
      *d++ = '%';
      *d++ = hex[*p >> 4];
      *d++ = hex[*p & 15];
    }
  }
  strcpy(d, "&amp;");
  return base;
}

/* The entries whose name contains `text` (ASCII letters in any case), by
 * cumulative value, in pages. Every name is read: the page's time budget
 * bounds it on a huge database. */
static unsigned page_search(const struct navigator *nav, FILE *out, const char *text, int64_t page)
{
  static const char *const sql[2] = {
    "SELECT count(*) FROM mainrows m JOIN symbols s ON s.id = m.symbol_id WHERE instr(lower(s.name), lower(:text)) > 0",
    "SELECT m.id, m.pct, m.cumulative_count, m.self_count, m.total_calls, s.name FROM mainrows m"
    " JOIN symbols s ON s.id = m.symbol_id WHERE instr(lower(s.name), lower(:text)) > 0"
    " ORDER BY abs(m.cumulative_count) DESC, m.id LIMIT :limit OFFSET :offset",
  };
  if (!text || !text[0])
    return page_message(nav, out, MHD_HTTP_OK, "search", "give a text to look for in the names: /search?q=TEXT");
  sqlite3_stmt *st[2];
  for (int i = 0; i < 2; ++i)
    if ((st[i] = prepare_bound(nav, sql[i], 0, page)) != NULL)
      sqlite3_bind_text(st[i], sqlite3_bind_parameter_index(st[i], ":text"), text, -1, SQLITE_STATIC);
  int64_t count = st[0] && sqlite3_step(st[0]) == SQLITE_ROW ? sqlite3_column_int64(st[0], 0) : 0;
  sqlite3_finalize(st[0]);
  if (page > page_count(count)) {
    sqlite3_finalize(st[1]);
    return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", "no such page: the list is shorter");
  }
  char *base = search_base(text);
  if (!base) {
    sqlite3_finalize(st[1]);
    return page_message(nav, out, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory", "the search text is too long");
  }
  page_start(nav, out, "igprof: search");
  fputs("<h1>Entries whose name contains &ldquo;", out);
  html_write_string(out, text);
  fputs("&rdquo;</h1>\n<p class=\"pages\">Entries ", out);
  put_range(out, page, count);
  put_page_links(out, base, page, page_count(count));
  fputs("</p>\n<table>\n<tr><th>Rank</th><th>% total</th><th>Total</th><th>Self</th><th>Calls</th><th>Function</th></tr>\n", out);
  if (st[1]) put_rows(nav, out, st[1], "row");
  sqlite3_finalize(st[1]);
  put_more(out, base, page, count, "entries");
  fputs("</table>\n", out);
  page_end(out);
  free(base);
  return MHD_HTTP_OK;
}

static unsigned page_entry(const struct navigator *nav, FILE *out, int64_t rank, int64_t page)
{
  sqlite3_stmt *st = prepare(nav, "SELECT m.id, m.pct, m.cumulative_count, m.self_count, m.total_calls, s.name,"
                                  " f.name FROM mainrows m JOIN symbols s ON s.id = m.symbol_id"
                                  " LEFT JOIN files f ON f.id = s.filename_id WHERE m.id = ?");
  if (!st) return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", "the database has no mainrows table");
  sqlite3_bind_int64(st, 1, rank);
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", "no entry with this rank");
  }
  int64_t callers = query_count(nav, "SELECT count(*) FROM parents WHERE child_id = :arg", rank);
  int64_t callees = query_count(nav, "SELECT count(*) FROM children WHERE parent_id = :arg", rank);
  int64_t pages = page_count(callers > callees ? callers : callees);
  if (page > pages) {
    sqlite3_finalize(st);
    return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", "no such page: the callers and callees are fewer");
  }
  char path[32];
  snprintf(path, sizeof(path), "/%" PRId64 "?", rank);
  page_start(nav, out, (const char *) sqlite3_column_text(st, 5));
  fputs("<h1>", out);
  html_write_string(out, (const char *) sqlite3_column_text(st, 5));
  fputs("</h1>\n<p>", out);
  html_write_string(out, (const char *) sqlite3_column_text(st, 6));
  fputs("</p>\n", out);
  if (pages > 1) {
    fputs("<p class=\"pages\">Callers ", out);
    put_range(out, page, callers);
    fputs(", callees ", out);
    put_range(out, page, callees);
    put_page_links(out, path, page, pages);
    fputs("</p>\n", out);
  }
  fputs("<table>\n<tr><th>Rank</th><th>% total</th><th>Total / edge</th><th>Self / other's total</th>"
        "<th>Calls</th><th>Function</th></tr>\n", out);
  /* A page's MAX_ROWS callers (the largest first page by page), shown in
   * ascending order above the entry: the smaller ones, on the next page, first. */
  put_more(out, path, page, callers, "callers");
  put_query(nav, out, "SELECT * FROM (SELECT p.self_id, p.pct, p.to_child_count, m.cumulative_count, p.to_child_calls,"
                      " s.name FROM parents p JOIN mainrows m ON m.id = p.self_id JOIN symbols s ON s.id = m.symbol_id"
                      " WHERE p.child_id = :arg ORDER BY p.to_child_count DESC, m.cumulative_count DESC, s.name DESC"
                      " LIMIT :limit OFFSET :offset) ORDER BY 3, 4, 6", rank, page, "caller");
  sqlite3_reset(st);
  put_rows(nav, out, st, "main");
  sqlite3_finalize(st);
  put_query(nav, out, "SELECT c.self_id, c.pct, c.from_parent_count, m.cumulative_count, c.from_parent_calls, s.name"
                      " FROM children c JOIN mainrows m ON m.id = c.self_id JOIN symbols s ON s.id = m.symbol_id"
                      " WHERE c.parent_id = :arg ORDER BY c.from_parent_count DESC, m.cumulative_count DESC, s.name"
                      " LIMIT :limit OFFSET :offset", rank, page, "callee");
  put_more(out, path, page, callees, "callees");
  fputs("</table>\n", out);
  page_end(out);
  return MHD_HTTP_OK;
}

/* ---- HTTP ---- */

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An open connection: its socket and the time by which its current request
 * must be answered. */
struct client {
  struct client *next, **prev;
  int fd;
  int64_t deadline;
  int cut;                     /* shut down already */
};

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
  struct navigator *nav = cls;
  struct client *c = *socket_context;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c = xcalloc(1, sizeof(*c));
    c->fd = info ? info->connect_fd : -1;
    c->deadline = now_ms() + (int64_t) nav->timeout * 1000;
    c->next = nav->clients;
    c->prev = &nav->clients;
    if (c->next) c->next->prev = &c->next;
    nav->clients = c;
    *socket_context = c;
  } else if (c) {              /* MHD_CONNECTION_NOTIFY_CLOSED, before the socket is closed */
    *c->prev = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
    *socket_context = NULL;
  }
}

/* A kept-alive connection starts its next request's clock now. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **request_context, enum MHD_RequestTerminationCode code)
{
  struct navigator *nav = cls;
  (void) request_context; (void) code;
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  struct client *c = info ? info->socket_context : NULL;
  if (c && !c->cut) c->deadline = now_ms() + (int64_t) nav->timeout * 1000;
}

/* Shut down every connection past its deadline (libmicrohttpd then sees the
 * end of the stream and closes it); returns the ms until the next deadline,
 * or -1 when there is none. Called between MHD_run calls, so every listed
 * socket is still open. */
static int64_t enforce_deadlines(struct navigator *nav)
{
  int64_t now = now_ms(), next = -1;
  for (struct client *c = nav->clients; c; c = c->next) {
    if (c->cut) continue;
    if (c->deadline <= now) {
      shutdown(c->fd, SHUT_RDWR);
      c->cut = 1;
    } else if (next < 0 || c->deadline - now < next) {
      next = c->deadline - now;
    }
  }
  return next;
}

static int query_budget(void *cls)
{
  struct navigator *nav = cls;
  if (now_ms() < nav->query_deadline) return 0;
  nav->interrupted = 1;
  return 1;
}

/* A request's arguments (NULL when absent). */
struct request_args { const char *page, *q; };

/* The page for one GET or HEAD of `url`, written to out; returns the status. */
static unsigned build_page(struct navigator *nav, FILE *out, const char *url, const struct request_args *args)
{
  const char *page = args->page;
  int64_t number = 1;
  char *end;
  if (page) {
    errno = 0;
    number = strtoll(page, &end, 10);
    if (page[0] < '1' || page[0] > '9' || *end || errno || number > INT64_MAX / MAX_ROWS)
      return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", "bad page number");
  }
  if (!strcmp(url, "/") || !strcmp(url, "/cumulative")) return page_list(nav, out, 0, number);
  if (!strcmp(url, "/self")) return page_list(nav, out, 1, number);
  if (!strcmp(url, "/search")) return page_search(nav, out, args->q, number);
  errno = 0;
  long long rank = strtoll(url + 1, &end, 10);
  if (url[0] == '/' && url[1] >= '0' && url[1] <= '9' && !*end && !errno) return page_entry(nav, out, rank, number);
  return page_message(nav, out, MHD_HTTP_NOT_FOUND, "not found", url);
}

/* The answer to `method url` in a malloc'ed buffer (*page, *len); returns
 * the status, 0 when out of memory. */
static unsigned render(struct navigator *nav, const char *method, const char *url, const struct request_args *args,
                       char **page, size_t *len)
{
  for (int attempt = 0; attempt < 2; ++attempt) {
    FILE *out = open_memstream(page, len);
    if (!out) return 0;
    unsigned status;
    nav->query_deadline = now_ms() + QUERY_BUDGET_MS;
    nav->interrupted = 0;
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
      status = page_message(nav, out, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "only GET and HEAD are served");
    else if (attempt == 0)
      status = build_page(nav, out, url, args);
    else
      status = page_message(nav, out, MHD_HTTP_SERVICE_UNAVAILABLE, "query too slow",
                            "the database query for this page took longer than its time budget");
    if (fclose(out) != 0) { free(*page); return 0; }
    if (!nav->interrupted || attempt == 1) return status;
    free(*page);
  }
  return 0;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **request_context)
{
  struct navigator *nav = cls;
  static int seen;
  (void) upload_data;
  int served = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
  /* GET and HEAD are answered on the call after the headers: an answer
   * queued on the first call would end the connection (no keep-alive).
   * Their request body, if any, is read and dropped. Other methods are
   * refused at once and their connection closed. */
  if (served && !*request_context) { *request_context = &seen; return MHD_YES; }
  if (served && *upload_size) { *upload_size = 0; return MHD_YES; }
  char *page = NULL;
  size_t len = 0;
  struct request_args args = { MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "page"),
                               MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "q") };
  unsigned status = render(nav, method, url, &args, &page, &len);
  if (!status) return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(len, page, MHD_RESPMEM_MUST_FREE);
  if (!r) { free(page); return MHD_NO; }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  /* An HTTP/1.0 client gets an HTTP/1.0 answer. */
  if (!strcmp(version, MHD_HTTP_VERSION_1_0)) MHD_set_response_options(r, MHD_RF_HTTP_1_0_SERVER, MHD_RO_END);
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static void log_message(void *cls, const char *fmt, va_list ap)
{
  (void) cls;
  fprintf(stderr, "%s: ", program_name);
  vfprintf(stderr, fmt, ap);
  size_t n = strlen(fmt);
  if (!n || fmt[n - 1] != '\n') fputc('\n', stderr);
}

static void open_database(struct navigator *nav, const char *path)
{
  nav->path = path;
  if (sqlite3_open_v2(path, &nav->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    fatal("%s: cannot open: %s", path, sqlite3_errmsg(nav->db));
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(nav->db, "SELECT counter, total_count, tick_period FROM summary", -1, &st, NULL) != SQLITE_OK
      || sqlite3_step(st) != SQLITE_ROW)
    fatal("%s: not an igprof-analyse report database (no summary table): %s", path, sqlite3_errmsg(nav->db));
  snprintf(nav->counter, sizeof(nav->counter), "%s", (const char *) sqlite3_column_text(st, 0));
  nav->total = sqlite3_column_int64(st, 1);
  nav->tick_period = sqlite3_column_double(st, 2);
  nav->is_time = !strcmp(nav->counter, "PERF_TICKS") || !strncmp(nav->counter, "NRG_", 4);
  sqlite3_finalize(st);
  static const char *const tables[] = { "mainrows", "symbols", "files", "parents", "children" };
  for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); ++i) {
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", tables[i]);
    if (sqlite3_prepare_v2(nav->db, sql, -1, &st, NULL) != SQLITE_OK)
      fatal("%s: not an igprof-analyse report database (no %s table)", path, tables[i]);
    sqlite3_finalize(st);
  }
  sqlite3_progress_handler(nav->db, 1000, query_budget, nav);
}

/* The daemon on address:port, driven by run_loop(). */
static struct MHD_Daemon *start_daemon(struct navigator *nav, const char *address, int port)
{
  static struct sockaddr_in sa;
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t) port);
  if (inet_pton(AF_INET, address, &sa.sin_addr) != 1) fatal("bad IPv4 address '%s'", address);
  struct MHD_Daemon *d = MHD_start_daemon(
    MHD_USE_EPOLL | MHD_USE_ERROR_LOG, (uint16_t) port, NULL, NULL, answer, nav,
    MHD_OPTION_EXTERNAL_LOGGER, log_message, NULL,   /* first: it applies to the options after it */
    MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &sa,
    MHD_OPTION_CONNECTION_TIMEOUT, nav->timeout,
    MHD_OPTION_CONNECTION_LIMIT, (unsigned) MAX_CONNECTIONS,
    MHD_OPTION_NOTIFY_CONNECTION, on_connection, nav,
    MHD_OPTION_NOTIFY_COMPLETED, on_completed, nav,
    MHD_OPTION_STRICT_FOR_CLIENT, 1,
    MHD_OPTION_END);
  if (!d) fatal("cannot listen on %s:%d: %s", address, port, strerror(errno ? errno : EADDRINUSE));
  return d;
}

/* Wait for the daemon's sockets or the next deadline, let it work, cut the
 * connections whose time is up; forever. */
static _Noreturn void run_loop(struct navigator *nav, struct MHD_Daemon *d)
{
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) fatal("libmicrohttpd has no epoll descriptor");
  struct pollfd pfd = { .fd = info->epoll_fd, .events = POLLIN };
  for (;;) {
    int64_t wait = enforce_deadlines(nav);
    MHD_UNSIGNED_LONG_LONG mhd_wait;
    if (MHD_get_timeout(d, &mhd_wait) == MHD_YES && (wait < 0 || (int64_t) mhd_wait < wait)) wait = (int64_t) mhd_wait;
    if (poll(&pfd, 1, wait < 0 ? -1 : wait > INT_MAX ? INT_MAX : (int) wait) < 0 && errno != EINTR)
      fatal("poll: %s", strerror(errno));
    if (MHD_run(d) != MHD_YES) fatal("the HTTP server failed");
  }
}

int main(int argc, char **argv)
{
  const char *address = "127.0.0.1", *file = NULL;
  int port = 8080;
  struct navigator nav = { .timeout = 10 };
  program_name = "igprof-navigator";
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 0; }
    if (!strcmp(a, "--version")) { puts("igprof-navigator (igprof) " IGPROF_VERSION); return 0; }
    int valued = !strcmp(a, "-p") || !strcmp(a, "--port") || !strcmp(a, "-a") || !strcmp(a, "--address")
                 || !strcmp(a, "-t") || !strcmp(a, "--timeout");
    if (valued && i + 1 >= argc) fatal("option %s needs an argument (see --help)", a);
    if (!strcmp(a, "-p") || !strcmp(a, "--port")) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (!*argv[i] || *end || v < 0 || v > 65535) fatal("--port expects 0..65535, got '%s'", argv[i]);
      port = (int) v;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--timeout")) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (!*argv[i] || *end || v < 1 || v > 86400) fatal("--timeout expects 1..86400 seconds, got '%s'", argv[i]);
      nav.timeout = (unsigned) v;
    } else if (!strcmp(a, "-a") || !strcmp(a, "--address")) {
      address = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      fatal("unknown option %s (see --help)", a);
    } else if (file) {
      fatal("one database only, got '%s' and '%s' (see --help)", file, a);
    } else {
      file = a;
    }
  }
  if (!file) fatal("no database given (see --help)");
  open_database(&nav, file);
  signal(SIGPIPE, SIG_IGN);
  struct MHD_Daemon *d = start_daemon(&nav, address, port);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  printf("igprof-navigator: serving %s at http://%s:%u/\n", file, address, info ? (unsigned) info->port : (unsigned) port);
  fflush(stdout);
  run_loop(&nav, d);
}

