/* igprof-navigator: browse a report database written by
 * `igprof-analyse --sqlite FILE.sql3` in a web browser.
 *
 * A small single-threaded HTTP/1.0 server on 127.0.0.1 (by default) with
 * three kinds of page: the entries by cumulative or self value, and one page
 * per entry with its callers and callees. The database is opened read-only
 * and every query binds its parameters. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "util.h"

static const char usage[] =
  "usage: igprof-navigator [-p PORT] [-a ADDRESS] FILE.sql3\n"
  "  Serve the report database FILE.sql3 (from igprof-analyse --sqlite) over HTTP.\n"
  "  -p, --port PORT       port to listen on (default 8080; 0 picks a free one)\n"
  "  -a, --address ADDR    IPv4 address to listen on (default 127.0.0.1)\n"
  "  -h, --help            this text\n";

#define MAX_ROWS 1000

struct navigator {
  sqlite3 *db;
  const char *path;
  char counter[128];
  double tick_period;
  int is_time;
  int64_t total;
};

/* ---- output helpers (the page is written straight to the socket's FILE) ---- */

static void put_value(const struct navigator *nav, FILE *out, int64_t v)
{
  char buf[64];
  if (nav->is_time) format_thousands_2dp(buf, sizeof(buf), (double) v * nav->tick_period);
  else format_thousands(buf, sizeof(buf), v);
  fputs(buf, out);
}

static void page_start(const struct navigator *nav, FILE *out, int status, const char *title)
{
  fprintf(out, "HTTP/1.0 %d %s\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n",
          status, status == 200 ? "OK" : status == 404 ? "Not Found" : "Bad Request");
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", out);
  html_write_string(out, title);
  fputs("</title><style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{padding:1px 8px;text-align:right;white-space:nowrap}td:last-child,th:last-child{text-align:left}"
        "tr.main{font-weight:bold;background:#eef}a{text-decoration:none}</style></head><body>\n", out);
  fputs("<p><a href=\"/\">by cumulative</a> | <a href=\"/self\">by self</a> | ", out);
  html_write_string(out, nav->path);
  fputs(": ", out);
  html_write_string(out, nav->counter);
  fputs(", total ", out);
  put_value(nav, out, nav->total);
  fputs(nav->is_time ? " seconds" : "", out);
  fputs("</p>\n", out);
}

static void page_end(FILE *out) { fputs("</body></html>\n", out); }

/* ---- pages ---- */

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

static void page_list(const struct navigator *nav, FILE *out, int by_self)
{
  static const char *const sql[2] = {
    "SELECT m.id, m.pct, m.cumulative_count, m.self_count, m.total_calls, s.name FROM mainrows m"
    " JOIN symbols s ON s.id = m.symbol_id ORDER BY abs(m.cumulative_count) DESC, m.id LIMIT ?",
    "SELECT m.id, m.pct, m.self_count, m.cumulative_count, m.self_calls, s.name FROM mainrows m"
    " JOIN symbols s ON s.id = m.symbol_id ORDER BY abs(m.self_count) DESC, m.id LIMIT ?",
  };
  sqlite3_stmt *st = prepare(nav, sql[by_self]);
  page_start(nav, out, 200, by_self ? "igprof: by self" : "igprof: by cumulative");
  fprintf(out, "<h1>Entries by %s value</h1>\n<table>\n<tr><th>Rank</th><th>%% total</th><th>%s</th><th>%s</th>"
          "<th>Calls</th><th>Function</th></tr>\n", by_self ? "self" : "cumulative",
          by_self ? "Self" : "Total", by_self ? "Total" : "Self");
  if (st) {
    sqlite3_bind_int(st, 1, MAX_ROWS);
    put_rows(nav, out, st, "row");
    sqlite3_finalize(st);
  }
  fputs("</table>\n", out);
  page_end(out);
}

static void page_not_found(const struct navigator *nav, FILE *out, const char *what)
{
  page_start(nav, out, 404, "igprof: not found");
  fputs("<h1>Not found</h1>\n<p>", out);
  html_write_string(out, what);
  fputs("</p>\n", out);
  page_end(out);
}

static void page_entry(const struct navigator *nav, FILE *out, int64_t rank)
{
  sqlite3_stmt *st = prepare(nav, "SELECT m.id, m.pct, m.cumulative_count, m.self_count, m.total_calls, s.name,"
                                  " f.name FROM mainrows m JOIN symbols s ON s.id = m.symbol_id"
                                  " LEFT JOIN files f ON f.id = s.filename_id WHERE m.id = ?");
  if (!st) { page_not_found(nav, out, "the database has no mainrows table"); return; }
  sqlite3_bind_int64(st, 1, rank);
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    page_not_found(nav, out, "no entry with this rank");
    return;
  }
  page_start(nav, out, 200, (const char *) sqlite3_column_text(st, 5));
  fputs("<h1>", out);
  html_write_string(out, (const char *) sqlite3_column_text(st, 5));
  fputs("</h1>\n<p>", out);
  html_write_string(out, (const char *) sqlite3_column_text(st, 6));
  fputs("</p>\n<table>\n<tr><th>Rank</th><th>% total</th><th>Total / edge</th><th>Self / other's total</th>"
        "<th>Calls</th><th>Function</th></tr>\n", out);
  sqlite3_stmt *callers = prepare(nav, "SELECT p.self_id, p.pct, p.to_child_count, m.cumulative_count,"
                                       " p.to_child_calls, s.name FROM parents p JOIN mainrows m ON m.id = p.self_id"
                                       " JOIN symbols s ON s.id = m.symbol_id WHERE p.child_id = ?"
                                       " ORDER BY p.to_child_count, m.cumulative_count, s.name");
  if (callers) { sqlite3_bind_int64(callers, 1, rank); put_rows(nav, out, callers, "caller"); sqlite3_finalize(callers); }
  sqlite3_reset(st);
  put_rows(nav, out, st, "main");
  sqlite3_finalize(st);
  sqlite3_stmt *callees = prepare(nav, "SELECT c.self_id, c.pct, c.from_parent_count, m.cumulative_count,"
                                       " c.from_parent_calls, s.name FROM children c JOIN mainrows m ON m.id = c.self_id"
                                       " JOIN symbols s ON s.id = m.symbol_id WHERE c.parent_id = ?"
                                       " ORDER BY c.from_parent_count DESC, m.cumulative_count DESC, s.name");
  if (callees) { sqlite3_bind_int64(callees, 1, rank); put_rows(nav, out, callees, "callee"); sqlite3_finalize(callees); }
  fputs("</table>\n", out);
  page_end(out);
}

/* ---- HTTP ---- */

/* Read the request line "GET /path HTTP/1.x" into path; 0 on success. */
static int read_request(int fd, char *path, size_t cap)
{
  char buf[8192];
  size_t n = 0;
  while (n < sizeof(buf) - 1) {
    ssize_t k = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
    if (k <= 0) return -1;
    n += (size_t) k;
    buf[n] = 0;
    if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n")) break;
  }
  char *sp1 = strchr(buf, ' ');
  if (!sp1 || strncmp(buf, "GET ", 4) != 0) return -1;
  char *start = sp1 + 1, *end = start + strcspn(start, " \r\n?");
  if ((size_t) (end - start) >= cap) return -1;
  memcpy(path, start, (size_t) (end - start));
  path[end - start] = 0;
  return 0;
}

static void serve(const struct navigator *nav, int fd)
{
  char path[1024];
  FILE *out = fdopen(fd, "w");
  if (!out) { close(fd); return; }
  if (read_request(fd, path, sizeof(path)) != 0) {
    page_start(nav, out, 400, "igprof: bad request");
    fputs("<h1>Bad request</h1>\n", out);
    page_end(out);
  } else if (!strcmp(path, "/") || !strcmp(path, "/cumulative")) {
    page_list(nav, out, 0);
  } else if (!strcmp(path, "/self")) {
    page_list(nav, out, 1);
  } else {
    char *end;
    errno = 0;
    long long rank = strtoll(path + 1, &end, 10);
    if (path[1] >= '0' && path[1] <= '9' && !*end && !errno) page_entry(nav, out, rank);
    else page_not_found(nav, out, path);
  }
  fclose(out);
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
}

static int listen_on(const char *address, int port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
  if (inet_pton(AF_INET, address, &sa.sin_addr) != 1) fatal("bad IPv4 address '%s'", address);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0) fatal("socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0) fatal("cannot listen on %s:%d: %s", address, port, strerror(errno));
  if (listen(fd, 16) != 0) fatal("listen: %s", strerror(errno));
  return fd;
}

int main(int argc, char **argv)
{
  const char *address = "127.0.0.1", *file = NULL;
  int port = 8080;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(usage, stdout); return 0; }
    if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--port")) && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 0 || v > 65535) fatal("--port expects 0..65535, got '%s'", argv[i]);
      port = (int) v;
    } else if ((!strcmp(argv[i], "-a") || !strcmp(argv[i], "--address")) && i + 1 < argc) {
      address = argv[++i];
    } else if (argv[i][0] == '-' || file) {
      fputs(usage, stderr);
      return 1;
    } else {
      file = argv[i];
    }
  }
  if (!file) { fputs(usage, stderr); return 1; }
  struct navigator nav = { 0 };
  open_database(&nav, file);
  int lfd = listen_on(address, port);
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  getsockname(lfd, (struct sockaddr *) &sa, &len);
  signal(SIGPIPE, SIG_IGN);
  printf("igprof-navigator: serving %s at http://%s:%d/\n", file, address, ntohs(sa.sin_port));
  fflush(stdout);
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) { if (errno == EINTR) continue; fatal("accept: %s", strerror(errno)); }
    struct timeval tv = { .tv_sec = 5 };   /* a silent client cannot hold the server */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    serve(&nav, fd);
  }
}
