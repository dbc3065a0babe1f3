/* The navigator database (IgProf's schema, docs/analyse.md), written either
 * through the sqlite3 library with bound parameters, or as SQL text ("-")
 * with every string quoted by sqlite3_mprintf's %Q. Ids are stable: files and
 * symbols are numbered from 1 in order of first appearance in rank order. */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static const char schema[] =
  "PRAGMA journal_mode=OFF;\n"
  "DROP TABLE IF EXISTS files;\n"
  "DROP TABLE IF EXISTS symbols;\n"
  "DROP TABLE IF EXISTS mainrows;\n"
  "DROP TABLE IF EXISTS children;\n"
  "DROP TABLE IF EXISTS parents;\n"
  "DROP TABLE IF EXISTS summary;\n"
  "CREATE TABLE summary (counter TEXT, total_count INTEGER, total_freq INTEGER, tick_period REAL);\n"
  "CREATE TABLE files (id INTEGER, name TEXT);\n"
  "CREATE TABLE symbols (id INTEGER, name TEXT, filename_id INTEGER CONSTRAINT file_id_exists REFERENCES files(id));\n"
  "CREATE TABLE mainrows (id INTEGER PRIMARY KEY, symbol_id INTEGER CONSTRAINT symbol_id_exists REFERENCES symbols(id),"
  " self_count INTEGER, cumulative_count INTEGER, kids INTEGER, self_calls INTEGER, total_calls INTEGER,"
  " self_paths INTEGER, total_paths INTEGER, pct REAL);\n"
  "CREATE TABLE children (self_id INTEGER CONSTRAINT self_exists REFERENCES mainrows(id),"
  " parent_id INTEGER CONSTRAINT parent_exists REFERENCES mainrows(id), from_parent_count INTEGER,"
  " from_parent_calls INTEGER, from_parent_paths INTEGER, pct REAL);\n"
  "CREATE TABLE parents (self_id INTEGER CONSTRAINT self_exists REFERENCES mainrows(id),"
  " child_id INTEGER CONSTRAINT child_exists REFERENCES mainrows(id), to_child_count INTEGER,"
  " to_child_calls INTEGER, to_child_paths INTEGER, pct REAL);\n"
  "PRAGMA synchronous=OFF;\n";

/* IgProf's four indexes, and four for igprof-navigator's pages: entries by
 * |cumulative| and |self| value, an entry's callers and callees. */
static const char indexes[] =
  "CREATE UNIQUE INDEX fileIndex ON files (id);\n"
  "CREATE UNIQUE INDEX symbolsIndex ON symbols (id);\n"
  "CREATE INDEX selfCountIndex ON mainrows(self_count);\n"
  "CREATE INDEX totalCountIndex ON mainrows(cumulative_count);\n"
  "CREATE INDEX selfMagnitudeIndex ON mainrows(abs(self_count));\n"
  "CREATE INDEX totalMagnitudeIndex ON mainrows(abs(cumulative_count));\n"
  "CREATE INDEX parentsChildIndex ON parents(child_id);\n"
  "CREATE INDEX childrenParentIndex ON children(parent_id);\n";

enum table { T_SUMMARY, T_FILES, T_SYMBOLS, T_MAINROWS, T_CHILDREN, T_PARENTS, T_COUNT };
static const char *const table_names[T_COUNT] = { "summary", "files", "symbols", "mainrows", "children", "parents" };
static const int table_columns[T_COUNT] = { 4, 2, 3, 10, 6, 6 };

enum value_kind { V_INT, V_REAL, V_TEXT };
struct value { enum value_kind kind; int64_t i; double d; const char *s; };
#define INT(x) ((struct value) { V_INT, (x), 0, NULL })
#define REAL(x) ((struct value) { V_REAL, 0, (x), NULL })
#define TEXT(x) ((struct value) { V_TEXT, 0, 0, (x) })

struct sink {
  FILE *text;               /* SQL text mode */
  sqlite3 *db;              /* database mode */
  sqlite3_stmt *insert[T_COUNT];
  const char *path;
  int failed;
};

static void db_fail(struct sink *s, const char *what)
{
  if (!s->failed) fprintf(stderr, "igprof-analyse: %s: %s: %s\n", s->path, what, s->db ? sqlite3_errmsg(s->db) : "out of memory");
  s->failed = 1;
}

static void sink_exec(struct sink *s, const char *sql)
{
  if (s->text) { fputs(sql, s->text); return; }
  if (!s->failed && sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) db_fail(s, "cannot write the database");
}

static void sink_row(struct sink *s, enum table t, const struct value *v)
{
  int n = table_columns[t];
  if (s->text) {
    fprintf(s->text, "INSERT INTO %s VALUES (", table_names[t]);
    for (int i = 0; i < n; ++i) {
      if (i) fputs(", ", s->text);
      if (v[i].kind == V_INT) fprintf(s->text, "%" PRId64, v[i].i);
      else if (v[i].kind == V_REAL) fprintf(s->text, "%.15g", v[i].d);
      else { char *q = sqlite3_mprintf("%Q", v[i].s); fputs(q, s->text); sqlite3_free(q); }
    }
    fputs(");\n", s->text);
    return;
  }
  if (s->failed) return;
  sqlite3_stmt *st = s->insert[t];
  for (int i = 0; i < n; ++i) {
    if (v[i].kind == V_INT) sqlite3_bind_int64(st, i + 1, v[i].i);
    else if (v[i].kind == V_REAL) sqlite3_bind_double(st, i + 1, v[i].d);
    else sqlite3_bind_text(st, i + 1, v[i].s, -1, SQLITE_STATIC);
  }
  if (sqlite3_step(st) != SQLITE_DONE) db_fail(s, "insert failed");
  sqlite3_reset(st);
}

static int sink_open(struct sink *s, const char *path)
{
  memset(s, 0, sizeof(*s));
  s->path = path;
  if (!strcmp(path, "-")) { s->text = stdout; s->path = "<stdout>"; return 0; }
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    db_fail(s, "cannot open the database");
    return -1;
  }
  sink_exec(s, schema);
  for (int t = 0; t < T_COUNT && !s->failed; ++t) {
    char sql[128];
    int len = snprintf(sql, sizeof(sql), "INSERT INTO %s VALUES (?", table_names[t]);
    for (int i = 1; i < table_columns[t]; ++i) len += snprintf(sql + len, sizeof(sql) - (size_t) len, ", ?");
    snprintf(sql + len, sizeof(sql) - (size_t) len, ")");
    if (sqlite3_prepare_v2(s->db, sql, -1, &s->insert[t], NULL) != SQLITE_OK) db_fail(s, "cannot prepare an insert");
  }
  return s->failed ? -1 : 0;
}

static int sink_close(struct sink *s)
{
  if (s->text) return 0;
  for (int t = 0; t < T_COUNT; ++t) sqlite3_finalize(s->insert[t]);
  if (sqlite3_close(s->db) != SQLITE_OK) db_fail(s, "cannot close the database");
  return s->failed ? -1 : 0;
}

/* Two decimals, as the text report shows them; -101 marks "new" (-D). */
static double sql_pct(float pct) { return pct == REPORT_NEW_PCT ? -101. : round((double) pct * 100.) / 100.; }

/* parents: (caller rank, entry rank, ...); children: (callee rank, entry rank, ...) */
static void write_edges(struct sink *s, const struct report *r, uint32_t e, int callers)
{
  const struct flat_profile *fp = r->flat;
  struct report_row *rows;
  size_t n = callers ? report_callers(r, e, &rows) : report_callees(r, e, &rows);
  for (size_t i = 0; i < n; ++i) {
    const struct flat_edge *edge = rows[i].edge;
    struct value v[6] = { INT(fp->entries[rows[i].entry].rank), INT(fp->entries[e].rank), INT(edge->vals[0]),
                          INT(edge->vals[1]), INT(edge->vals[2]), REAL(sql_pct(report_edge_pct(r, edge))) };
    sink_row(s, callers ? T_PARENTS : T_CHILDREN, v);
  }
  free(rows);
}

static void write_mainrow(struct sink *s, const struct report *r, uint32_t e, int64_t symbol_id)
{
  const struct flat_entry *en = &r->flat->entries[e];
  struct report_row *callees;
  size_t nc = report_callees(r, e, &callees);
  struct value v[10] = { INT(en->rank), INT(symbol_id), INT(en->self[0]), INT(en->cum[0]),
                         INT(report_kids(r, e, callees, nc)), INT(en->self[1]), INT(en->cum[1]),
                         INT(en->self[2]), INT(en->cum[2]), REAL(sql_pct(report_entry_pct(r, en, 0))) };
  free(callees);
  sink_row(s, T_MAINROWS, v);
}

int report_sqlite(const struct report *r, const char *path)
{
  struct sink s;
  if (sink_open(&s, path) != 0) return -1;
  if (s.text) sink_exec(&s, schema);
  sink_exec(&s, "BEGIN TRANSACTION;\n");
  struct value summary[4] = { TEXT(r->key), INT(r->flat->totals), INT(r->flat->totfreq), REAL(r->tick_period) };
  sink_row(&s, T_SUMMARY, summary);

  uint32_t *rows;
  size_t n = report_table(r, &rows);
  struct idmap files;
  idmap_init(&files);
  for (size_t i = 0; i < n && !s.failed; ++i) {
    uint32_t sym = r->flat->entries[rows[i]].sym, file = r->st->file_of[sym], file_id;
    if (!idmap_get(&files, file, &file_id)) {
      file_id = (uint32_t) files.count + 1;
      idmap_put(&files, file, file_id);
      struct value fv[2] = { INT(file_id), TEXT(symtab_file_display(r->st, sym)) };
      sink_row(&s, T_FILES, fv);
    }
    /* Each row is a distinct symbol: its id is its position. */
    struct value sv[3] = { INT((int64_t) i + 1), TEXT(symtab_display(r->st, sym)), INT(file_id) };
    sink_row(&s, T_SYMBOLS, sv);
    write_mainrow(&s, r, rows[i], (int64_t) i + 1);
    write_edges(&s, r, rows[i], 1);
    write_edges(&s, r, rows[i], 0);
  }
  sink_exec(&s, "END TRANSACTION;\n");
  sink_exec(&s, indexes);
  free(rows);
  idmap_free(&files);
  return sink_close(&s);
}
