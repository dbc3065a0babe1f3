/* igprof-analyse: command line, then read -> build -> rank -> report. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flat.h"
#include "merge.h"
#include "profile.h"
#include "reader.h"
#include "report.h"
#include "symbols.h"
#include "util.h"

static const char usage[] =
  "usage: igprof-analyse [options] [--] FILE...\n"
  "  FILE is an igprof dump, plain or gzip-compressed; '-' reads standard input.\n"
  "  Several files are merged into one profile.\n"
  "\n"
  "  -r, --report KEY          counter to report (default: first counter of the first file)\n"
  "      --value normal|peak   use the counter's value (default) or its peak\n"
  "  -g, --gdb                 resolve symbols from the ELF files named in the dump\n"
  "      --lines               with -g: add FILE:LINE and inline frames (DWARF)\n"
  "      --sysroot DIR         with -g: read the dump's ELF files (and their debug files)\n"
  "                            under DIR first: a dump made on another machine, e.g. arm64\n"
  "  -d, --demangle            demangle C++ names\n"
  "  -nf, --no-filter          keep profiler and allocator frames\n"
  "  -ml, --merge-libraries    one entry per library\n"
  "  -mr, --merge-regexp 's/RE/REPL/[;s/RE/REPL/...]'  rename (PCRE2, \\1..\\9 groups)\n"
  "  -ma, --merge-ancestors 'RE1>RE2>...>REn/NEW'       rename by ancestry\n"
  "  -Mc, --max-count-value N  -mc, --min-count-value N\n"
  "  -Mf, --max-calls-value N  -mf, --min-calls-value N\n"
  "  -Ma, --max-average-value N    --min-average-value N   (per dump line)\n"
  "  -b, --baseline FILE       subtract FILE's profile\n"
  "  -D, --diff-mode           with -b: percentages relative to the baseline\n"
  "  -o, --order ascending|descending   rank order (default descending)\n"
  "  -c, --calls  -p, --paths  -l, --libs   extra columns\n"
  "  -t, --text                text report (default)\n"
  "  -s, --sqlite [FILE.sql3|-]  navigator database, or SQL text with '-' or no FILE\n"
  "  -js, --json               JSON report (rows as arrays, IgProf's layout)\n"
  "      --json-objects        JSON report, every row an object with named members\n"
  "  -C, --callgrind FILE      KCachegrind/callgrind file\n"
  "      --pprof FILE.pb.gz    pprof profile (go tool pprof, Pyroscope): every counter\n"
  "      --flame               collapsed stacks for flame graphs ('a;b;c value')\n"
  "      --html                self-contained HTML report: flame graph, searchable and\n"
  "                            sortable flat profile, call graph\n"
  "      --html-limit N        entries in the HTML report (default 500; 0: all)\n"
  "  -tn, --top N              the N nodes with the largest self value, with stacks\n"
  "  -T, --tree                massif-style tree\n"
  "      --timeline            the heap's live bytes over time, peak marked (a dump of\n"
  "                            igprof -mp --timeline)\n"
  "      --massif FILE         the heap timeline as valgrind massif's massif.out (ms_print),\n"
  "                            the peak with its MEM_PEAK tree\n"
  "      --histogram           the allocations' sizes by power of two (a dump of\n"
  "                            igprof -mp --histogram; several are added up)\n"
  "  -v, --verbose             progress on stderr\n"
  "  -h, --help                this text\n"
  "      --version             igprof's version\n";

enum output { OUT_TEXT, OUT_SQLITE, OUT_JSON, OUT_CALLGRIND, OUT_FLAME, OUT_TOP, OUT_TREE, OUT_HTML, OUT_TIMELINE,
              OUT_MASSIF, OUT_HISTOGRAM, OUT_PPROF };

struct options {
  struct read_options read;
  const char **inputs; size_t ninputs, inputs_cap;
  const char *baseline;
  const char *sysroot;
  int diff, demangle, gdb, lines, merge_libraries;
  const char *merge_regexp, *merge_ancestors;
  int show_calls, show_paths, show_libs, ascending, json_objects;
  enum output output;
  const char *output_file;
  size_t top;
  size_t html_limit;
};

static _Noreturn void usage_error(const char *fmt, const char *arg)
{
  fputs("igprof-analyse: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nTry 'igprof-analyse --help'.\n", stderr);
  exit(1);
}

static int64_t parse_number(const char *opt, const char *s)
{
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno) usage_error("%s expects an integer", opt);
  return v;
}

static int is(const char *arg, const char *a, const char *b)
{
  return strcmp(arg, a) == 0 || (b && strcmp(arg, b) == 0);
}

static int ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *need_arg(int argc, char **argv, int *i)
{
  if (*i + 1 >= argc) usage_error("option %s needs an argument", argv[*i]);
  return argv[++*i];
}

/* Options that take an argument; returns 1 when argv[*i] was one. */
static int parse_valued(struct options *o, int argc, char **argv, int *i)
{
  const char *a = argv[*i];
  struct read_options *r = &o->read;
  if (is(a, "-r", "--report")) {
    if (r->key) usage_error("%s: only one counter can be reported", a);
    r->key = need_arg(argc, argv, i);
    if (strchr(r->key, ',')) usage_error("-r: only one counter can be reported, got '%s'", r->key);
  } else if (is(a, "--value", NULL)) {
    const char *v = need_arg(argc, argv, i);
    if (!strcmp(v, "peak")) r->peak = 1;
    else if (!strcmp(v, "normal")) r->peak = 0;
    else usage_error("--value expects 'normal' or 'peak', got '%s'", v);
  } else if (is(a, "-o", "--order")) {
    const char *v = need_arg(argc, argv, i);
    if (!strcmp(v, "ascending")) o->ascending = 1;
    else if (!strcmp(v, "descending")) o->ascending = 0;
    else usage_error("--order expects 'ascending' or 'descending', got '%s'", v);
  } else if (is(a, "-mr", "--merge-regexp")) o->merge_regexp = need_arg(argc, argv, i);
  else if (is(a, "-ma", "--merge-ancestors")) o->merge_ancestors = need_arg(argc, argv, i);
  else if (is(a, "-b", "--baseline")) o->baseline = need_arg(argc, argv, i);
  else if (is(a, "--sysroot", NULL)) o->sysroot = need_arg(argc, argv, i);
  else if (is(a, "-tn", "--top")) {
    int64_t n = parse_number(a, need_arg(argc, argv, i));
    if (n <= 0) usage_error("%s expects a positive count", a);
    o->top = (size_t) n;
    o->output = OUT_TOP;
  } else if (is(a, "-C", "--callgrind")) { o->output = OUT_CALLGRIND; o->output_file = need_arg(argc, argv, i); }
  else if (is(a, "--massif", NULL)) { o->output = OUT_MASSIF; o->output_file = need_arg(argc, argv, i); }
  else if (is(a, "--pprof", NULL)) { o->output = OUT_PPROF; o->output_file = need_arg(argc, argv, i); }
  else if (is(a, "-Mc", "--max-count-value")) r->max_count = parse_number(a, need_arg(argc, argv, i));
  else if (is(a, "-mc", "--min-count-value")) r->min_count = parse_number(a, need_arg(argc, argv, i));
  else if (is(a, "-Mf", "--max-calls-value")) r->max_calls = parse_number(a, need_arg(argc, argv, i));
  else if (is(a, "-mf", "--min-calls-value")) r->min_calls = parse_number(a, need_arg(argc, argv, i));
  else if (is(a, "-Ma", "--max-average-value")) r->max_avg = parse_number(a, need_arg(argc, argv, i));
  else if (is(a, "--min-average-value", NULL)) r->min_avg = parse_number(a, need_arg(argc, argv, i));
  else if (is(a, "--html-limit", NULL)) {
    int64_t n = parse_number(a, need_arg(argc, argv, i));
    if (n < 0) usage_error("%s expects a count, 0 for all", a);
    o->html_limit = (size_t) n;
  } else return 0;
  return 1;
}

static void add_input(struct options *o, const char *path)
{
  GROW(o->inputs, o->inputs_cap, o->ninputs + 1);
  o->inputs[o->ninputs++] = path;
}

/* Whether `path` names a temporary file of the profiler's dump writer,
 * ".igprof-tmp.<pid>.<n>" in any directory: one that is still there was cut
 * short (the profiled process was killed while writing it). */
static int is_unfinished_dump(const char *path)
{
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  static const char prefix[] = ".igprof-tmp.";
  if (strncmp(base, prefix, sizeof(prefix) - 1)) return 0;
  const char *p = base + sizeof(prefix) - 1;
  for (int part = 0; part < 2; ++part) {
    size_t n = strspn(p, "0123456789");
    if (!n || p[n] != (part ? '\0' : '.')) return 0;
    p += n + 1;
  }
  return 1;
}

#define UNFINISHED "an unfinished temporary dump (the profiled process was killed while writing it)"

/* Leave out the unfinished dumps among the inputs, one warning each; they
 * cannot be all the inputs, nor the baseline. */
static void skip_unfinished_dumps(struct options *o)
{
  if (o->baseline && is_unfinished_dump(o->baseline)) fatal("%s: " UNFINISHED "; not usable as the baseline", o->baseline);
  size_t skipped = 0, kept = 0;
  for (size_t i = 0; i < o->ninputs; ++i) skipped += (size_t) is_unfinished_dump(o->inputs[i]);
  if (skipped == 1 && o->ninputs == 1) fatal("%s: " UNFINISHED "; no complete dump to read", o->inputs[0]);
  if (skipped == o->ninputs)
    fatal("all %zu inputs are unfinished temporary dumps (the profiled process was killed while writing them),"
          " such as %s; no complete dump to read", skipped, o->inputs[0]);
  for (size_t i = 0; i < o->ninputs; ++i)
    if (is_unfinished_dump(o->inputs[i])) warn("%s: " UNFINISHED "; skipped", o->inputs[i]);
    else o->inputs[kept++] = o->inputs[i];
  o->ninputs = kept;
}

static void parse_args(struct options *o, int argc, char **argv)
{
  o->show_calls = -1;
  o->html_limit = 500;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) { while (++i < argc) add_input(o, argv[i]); break; }
    if (is(a, "-h", "--help")) { fputs(usage, stdout); exit(0); }
    if (is(a, "--version", NULL)) { puts("igprof-analyse (igprof) " IGPROF_VERSION); exit(0); }
    if (parse_valued(o, argc, argv, &i)) continue;
    if (is(a, "-v", "--verbose")) o->read.verbose = 1;
    else if (is(a, "-g", "--gdb")) o->gdb = 1;
    else if (is(a, "--lines", NULL)) o->lines = 1;
    else if (is(a, "-d", "--demangle")) o->demangle = 1;
    else if (is(a, "-nf", "--no-filter")) o->read.no_filter = 1;
    else if (is(a, "-ml", "--merge-libraries")) o->merge_libraries = 1;
    else if (is(a, "-l", "--libs")) o->show_libs = 1;
    else if (is(a, "-p", "--paths")) o->show_paths = 1;
    else if (is(a, "-c", "--calls")) o->show_calls = 1;
    else if (is(a, "-D", "--diff-mode")) o->diff = 1;
    else if (is(a, "-t", "--text")) o->output = OUT_TEXT;
    else if (is(a, "-js", "--json")) { o->output = OUT_JSON; o->json_objects = 0; }
    else if (is(a, "--json-objects", NULL)) { o->output = OUT_JSON; o->json_objects = 1; }
    else if (is(a, "--flame", NULL)) o->output = OUT_FLAME;
    else if (is(a, "--html", NULL)) o->output = OUT_HTML;
    else if (is(a, "-T", "--tree")) o->output = OUT_TREE;
    else if (is(a, "--timeline", NULL)) o->output = OUT_TIMELINE;
    else if (is(a, "--histogram", NULL)) o->output = OUT_HISTOGRAM;
    else if (is(a, "-s", "--sqlite")) {
      /* IgProf's -s takes no argument and prints SQL; ours also accepts an
       * output: '-' or a name ending in .sql3/.sqlite/.db. Anything else is
       * left as an input so an old command line cannot overwrite a dump. */
      o->output = OUT_SQLITE;
      o->output_file = "-";
      if (i + 1 < argc && (!strcmp(argv[i + 1], "-") || ends_with(argv[i + 1], ".sql3")
                           || ends_with(argv[i + 1], ".sqlite") || ends_with(argv[i + 1], ".db")))
        o->output_file = argv[++i];
    } else if (is(a, "-F", "--filter-file") || is(a, "-f", "--filter") || is(a, "-lf", "--list-filters")
               || is(a, "--dump-allocations", NULL) || is(a, "--show-pages", NULL)
               || is(a, "--show-page-ranges", NULL) || is(a, "--show-locality-metrics", NULL))
      usage_error("option %s is not supported", a);
    else if (a[0] == '-' && a[1]) usage_error("unknown option %s", a);
    else add_input(o, a);
  }
  if (!o->ninputs) usage_error("%s", "no input files");
  skip_unfinished_dumps(o);
  if (o->diff && !o->baseline) usage_error("%s", "-D/--diff-mode needs -b/--baseline FILE");
  if (o->output == OUT_TIMELINE || o->output == OUT_MASSIF) {
    const char *what = o->output == OUT_TIMELINE ? "--timeline" : "--massif";
    if (o->baseline) usage_error("%s: no baseline (-b): a timeline is one run's", what);
    if (o->read.key && strcmp(o->read.key, "MEM_PEAK")) usage_error("%s: the tree is MEM_PEAK's: no -r", what);
    o->read.key = "MEM_PEAK";
    o->read.snapshots = o->output == OUT_MASSIF;
  }
  if (o->output == OUT_HISTOGRAM) {
    if (o->baseline) usage_error("%s", "--histogram: no baseline (-b)");
    if (!o->read.key) o->read.key = "MEM_TOTAL";
  }
  if (o->output == OUT_PPROF) {
    /* pprof holds every counter as the dumps have them: no per-counter option */
    if (o->baseline) usage_error("%s", "--pprof: no baseline (-b); compare two profiles with go tool pprof -diff_base");
    if (o->read.peak) usage_error("%s", "--pprof: no --value peak (every counter's value is written)");
    if (o->read.min_count || o->read.max_count || o->read.min_calls || o->read.max_calls || o->read.min_avg || o->read.max_avg)
      usage_error("%s", "--pprof: no -mc/-Mc/-mf/-Mf/-Ma/--min-average-value (filter in pprof)");
    o->read.all_counters = 1;
  }
  if (o->lines && !o->gdb) usage_error("%s", "--lines needs -g");
  if (o->sysroot && !o->gdb) usage_error("%s", "--sysroot needs -g");
  struct stat st;
  if (o->sysroot && (stat(o->sysroot, &st) != 0 || !S_ISDIR(st.st_mode)))
    usage_error("--sysroot %s: not a directory", o->sysroot);
}

/* Whether the input `path` ("-": standard input) is the file `out`. */
static int same_file(const char *path, const struct stat *out)
{
  struct stat in;
  int rc = strcmp(path, "-") ? stat(path, &in) : fstat(0, &in);
  return rc == 0 && in.st_dev == out->st_dev && in.st_ino == out->st_ino;
}

/* Never write a report over an input: the output file (or standard output
 * when the report goes there) must not be any input file, compared by device
 * and inode so that no other name, symlink or hard link gets past. Checked
 * before anything is read or written. */
static void check_output_is_not_input(const struct options *o)
{
  struct stat out;
  int to_file = o->output_file && strcmp(o->output_file, "-") != 0;
  if (to_file ? stat(o->output_file, &out) != 0 : fstat(1, &out) != 0) return;   /* nothing there yet */
  if (!S_ISREG(out.st_mode)) return;
  for (size_t i = 0; i <= o->ninputs; ++i) {
    const char *in = i < o->ninputs ? o->inputs[i] : o->baseline;
    if (!in || !same_file(in, &out)) continue;
    const char *shown = strcmp(in, "-") ? in : "<stdin>";
    if (to_file) fatal("%s: the output file is the input '%s'; refusing to overwrite it", o->output_file, shown);
    fatal("standard output is the input '%s'; refusing to write the report into it", shown);
  }
}

static void write_report(struct options *o, struct report *r, const struct reader *rd)
{
  const struct heap_timeline *timeline = reader_timeline(rd);
  switch (o->output) {
  case OUT_TEXT: report_text(r); break;
  case OUT_JSON: report_json(r); break;
  case OUT_SQLITE:
    if (report_sqlite(r, o->output_file) != 0) exit(1);
    break;
  case OUT_CALLGRIND: {
    FILE *f = strcmp(o->output_file, "-") ? fopen(o->output_file, "w") : stdout;
    if (!f) fatal("%s: cannot write: %s", o->output_file, strerror(errno));
    report_callgrind(r, f);
    if (f != stdout && fclose(f) != 0) fatal("%s: write error: %s", o->output_file, strerror(errno));
    break;
  }
  case OUT_FLAME: report_flame(r); break;
  case OUT_TOP: report_top(r, o->top); break;
  case OUT_TREE: report_tree(r); break;
  case OUT_HTML: report_html(r); break;
  case OUT_TIMELINE: report_timeline(stdout, timeline); break;
  case OUT_HISTOGRAM: report_size_histogram(stdout, reader_size_histogram(rd)); break;
  case OUT_PPROF: {
    struct resolver *ids = o->read.resolver ? o->read.resolver : resolver_new(0, 0, NULL);
    int rc = report_pprof(r, rd, ids, o->lines, o->output_file);
    if (ids != o->read.resolver) resolver_free(ids);
    if (rc != 0) exit(1);
    break;
  }
  case OUT_MASSIF: {
    FILE *f = strcmp(o->output_file, "-") ? fopen(o->output_file, "w") : stdout;
    if (!f) fatal("%s: cannot write: %s", o->output_file, strerror(errno));
    report_massif(f, timeline, r);
    if (f != stdout && fclose(f) != 0) fatal("%s: write error: %s", o->output_file, strerror(errno));
    break;
  }
  }
}

int main(int argc, char **argv)
{
  static char outbuf[1 << 20];
  struct options o = { 0 };
  parse_args(&o, argc, argv);
  check_output_is_not_input(&o);
  setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
  __fsetlocking(stdout, FSETLOCKING_BYCALLER);   /* single-threaded: skip stdio locks */

  struct symtab st;
  symtab_init(&st, o.demangle);
  o.read.resolver = o.gdb ? resolver_new(o.lines, o.demangle, o.sysroot) : NULL;
  o.read.merge = merge_rules_new(o.merge_libraries, o.merge_regexp, o.merge_ancestors);
  struct reader *rd = reader_new(&o.read, &st);

  struct call_tree base, tree;
  if (o.baseline) {
    tree_init(&base, st.spontaneous, 0);
    reader_read(rd, o.baseline, &base);
  }
  tree_init(&tree, st.spontaneous, 0);
  for (size_t i = 0; i < o.ninputs; ++i) reader_read(rd, o.inputs[i], &tree);
  if (o.output == OUT_TIMELINE || o.output == OUT_MASSIF) {
    const struct heap_timeline *tl = reader_timeline(rd);
    if (!tl->inputs) fatal("no heap timeline in the input (igprof -mp --timeline EVERY writes one)");
    if (tl->inputs > 1) fatal("%d inputs hold a heap timeline: give one", tl->inputs);
  }
  if (o.output == OUT_HISTOGRAM && !reader_size_histogram(rd)->inputs)
    fatal("no allocation-size histogram in the input (igprof -mp --histogram writes one)");
  reader_finish(rd);
  tree.is_max = reader_key_is_max(rd);

  struct flat_profile base_flat = { 0 }, flat;
  if (o.baseline) {
    base.is_max = tree.is_max;
    tree_accumulate(&base, &st);
    if (o.diff) flat_build(&base_flat, &base, &st);
    tree_subtract(&tree, &base, &st);
  }
  tree_freeze(&tree);
  if (o.baseline) tree_free(&base);
  if (o.read.verbose) fprintf(stderr, "igprof-analyse: %zu tree nodes, %zu symbols\n", tree.count, st.names.count);
  tree_accumulate(&tree, &st);
  flat_build(&flat, &tree, &st);
  flat_rank(&flat, &st, o.ascending);

  struct report r = {
    .out = stdout, .st = &st, .tree = &tree, .flat = &flat, .base = o.diff ? &base_flat : NULL,
    .key = reader_key(rd), .tick_period = reader_tick_period(rd), .is_time = reader_key_is_time(rd),
    .show_calls = o.show_calls >= 0 ? o.show_calls : strncmp(reader_key(rd), "MEM_", 4) == 0,
    .show_paths = o.show_paths, .show_libs = o.show_libs, .diff = o.diff, .ascending = o.ascending,
    .json_objects = o.json_objects, .html_limit = o.html_limit, .sampling = reader_mem_sampling(rd),
  };
  write_report(&o, &r, rd);
  if (fflush(stdout) != 0 || ferror(stdout)) fatal("error writing the report: %s", strerror(errno));
  return 0;
}
