/* Report writers. Each reads the ranked flat profile (and for tree-shaped
 * outputs the call tree) and writes one format. */
#ifndef IGPROF_ANALYSE_REPORT_H
#define IGPROF_ANALYSE_REPORT_H

#include <float.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "flat.h"
#include "profile.h"
#include "reader.h"

struct report {
  FILE *out;
  struct symtab *st;
  const struct call_tree *tree;
  struct flat_profile *flat;
  const struct flat_profile *base;   /* -D: the baseline's own flat profile */
  const char *key;
  double tick_period;
  int is_time;       /* PERF_TICKS/NRG_*: values are ticks, shown as seconds */
  int show_calls, show_paths, show_libs;
  int diff;          /* -D */
  int ascending;     /* -o ascending */
  int json_objects;  /* --json-objects: JSON rows as named objects */
  size_t html_limit; /* --html-limit: entries in the HTML page (0: all) */
  const struct mem_sampling *sampling; /* the inputs' (reader_mem_sampling); NULL: none */
};

/* Stack-shaped outputs (--flame lines, --top stacks) show at most this many
 * frames of one stack, so that their size is bounded by the number of call-tree
 * nodes times this, whatever the depth; what is cut is marked. */
#define REPORT_STACK_FRAMES 1024u
#define REPORT_DEEPER_MARKER "[deeper frames]"
/* --tree draws at most this many indentation columns; deeper lines say how
 * many levels were left out ("[+K]"). */
#define TREE_INDENT_LEVELS 64u

/* One row of a report: an entry's caller or callee. */
struct report_row {
  uint32_t entry;          /* the other entry */
  const struct flat_edge *edge;
};

/* Callers (ascending) or callees (descending) of entry e with a non-zero
 * edge value, in IgProf's order; returns the count, rows in *rows. */
size_t report_callers(const struct report *r, uint32_t e, struct report_row **rows);
size_t report_callees(const struct report *r, uint32_t e, struct report_row **rows);
/* Entries with a non-zero cumulative value, in rank order. */
size_t report_table(const struct report *r, uint32_t **rows);

/* Percentage of an entry (self or cumulative) or an edge: of the total, or
 * with -D of the baseline's value; REPORT_NEW_PCT when the baseline lacks it. */
#define REPORT_NEW_PCT FLT_MAX
float report_entry_pct(const struct report *r, const struct flat_entry *en, int self);
float report_edge_pct(const struct report *r, const struct flat_edge *edge);
/* "Children" of the call graph: cum - self, or the largest callee for *_MAX. */
int64_t report_kids(const struct report *r, uint32_t e, const struct report_row *callees, size_t n);

/* A sampled memory profile's note (its figures are estimates: the mean
 * interval and the allocations sampled) in buf; 0 when the report is not
 * one (every output that shows figures says it). */
int report_sampling_note(const struct report *r, char *buf, size_t cap);
void report_text(const struct report *r);
void report_json(const struct report *r);
/* path "-": SQL text on stdout; otherwise an sqlite3 database file. */
int report_sqlite(const struct report *r, const char *path);
void report_callgrind(const struct report *r, FILE *out);
void report_flame(const struct report *r);
void report_tree(const struct report *r);
void report_html(const struct report *r);
void report_top(const struct report *r, size_t n);
/* --pprof: profile.proto, gzip-compressed, to `path` ("-": stdout), from
 * the tree's columns (read_options.all_counters); build ids through
 * `resolver` (or none when NULL); lines: -g --lines. Returns 0, or -1
 * after a message. */
int report_pprof(const struct report *r, const struct reader *rd, struct resolver *resolver, int lines, const char *path);

/* The heap over time (a dump's timeline, reader.h). */
size_t heap_timeline_peak(const struct heap_timeline *tl);
void report_timeline(FILE *out, const struct heap_timeline *tl);
/* massif's massif.out format (ms_print, massif-visualizer): every sample a
 * snapshot, the peak a detailed one whose tree is r's (MEM_PEAK). */
void report_massif(FILE *out, const struct heap_timeline *tl, const struct report *r);
/* --histogram: the allocation-size histogram. */
void report_size_histogram(FILE *out, const struct size_histogram *h);

#endif
