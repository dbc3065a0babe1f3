/* igprof: run a program under libigprof.so.
 *
 *   igprof [options] [--] program [args]
 *
 * Turns the options into the $IGPROF string (options.h grammar), adds
 * libigprof.so (found relative to this executable: ../lib/igprof/) to
 * LD_PRELOAD and becomes the program (exec): same pid, same signals, same
 * exit status. Every option error, and an -o directory that cannot be
 * written, is reported before anything runs, with exit status 125
 * (LAUNCH_EXIT_ERROR).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"
#include "options.h"

static int check_overhead(const char *v)
{
  return strcmp(v, "none") == 0 || strcmp(v, "include") == 0 || strcmp(v, "delta") == 0;
}
static int check_summary(const char *v)
{
  return strcmp(v, "auto") == 0 || strcmp(v, "always") == 0 || strcmp(v, "never") == 0;
}
static int check_size(const char *v)
{
  unsigned long long bytes;
  return igprof_options_size(v, &bytes) == 0 && bytes > 0;
}
static int check_any_size(const char *v)
{
  unsigned long long bytes;
  return igprof_options_size(v, &bytes) == 0;
}
static int check_timeline(const char *v)
{
  unsigned long long bytes, ms;
  return igprof_options_timeline(v, &bytes, &ms) == 0;
}
static int check_sample(const char *v)
{
  unsigned long long bytes;
  return igprof_options_size(v, &bytes) == 0 && bytes > 0 && bytes <= 1ull << 30;
}
static int check_seed(const char *v) { return igprof_options_int(v, 0, 2147483647) >= 0; }
static int check_snapshots(const char *v) { return igprof_options_int(v, 1, 1000000) > 0; }
static int check_ms(const char *v) { return igprof_options_ms(v) > 0; }
static int check_unwind(const char *v) { return strcmp(v, "fast") == 0 || strcmp(v, "libunwind") == 0; }
static int check_signal(const char *v) { return igprof_options_signal(v) > 0; }
static int check_depth(const char *v) { return igprof_options_int(v, 1, 65536) > 0; }
static int check_hz(const char *v) { return igprof_options_int(v, 1, 100000) > 0; }
static int check_nonempty(const char *v) { return v[0] != 0; }

/* One row per option (launch.h). */
static const struct launch_option options[] = {
  {"-mp", "--memory-profiler", NULL, "mem", NULL, NULL, 1,
   "memory profile: MEM_TOTAL, MEM_LIVE (with leaks), MEM_MAX, MEM_PEAK"},
  {"-mm", "--memory-mappings", NULL, "pages", NULL, NULL, 1,
   "mappings profile: mmap, mremap, munmap, brk, sbrk per call path (MMAP_TOTAL, MMAP_LIVE)"},
  {"-mo", "--memory-overhead", "MODE", "mem:overhead=%s", check_overhead, "none, include or delta", 0,
   "count requested bytes (none, default), usable size (include) or only the overhead (delta)"},
  {NULL, "--summary", "WHEN", "mem:summary=%s", check_summary, "auto, always or never", 0,
   "-mp: the heap's peak on stderr at exit (auto: when stderr is a terminal)"},
  {NULL, "--dump-at-peak", "SIZE", "mem:dump_at=%s", check_size, "a size in bytes above 0, suffix k, M or G", 0,
   "-mp: one more dump, <dump name>.peak, when the live heap first exceeds SIZE"},
  {NULL, "--timeline", "EVERY", "mem:timeline=%s", check_timeline,
   "<n>ms (1..3600000) or a size in bytes above 0, suffix k, M or G", 0,
   "-mp: the live heap's total over time in the dump, a sample every <n>ms or every SIZE bytes of change "
   "(give both for both)"},
  {NULL, "--min-size", "SIZE", "mem:min_size=%s", check_any_size, "a size in bytes, suffix k, M or G", 0,
   "-mp: allocations of fewer bytes are counted, without their stack, under @igprof_size_filtered"},
  {NULL, "--max-size", "SIZE", "mem:max_size=%s", check_any_size, "a size in bytes, suffix k, M or G", 0,
   "-mp: allocations of more bytes are counted, without their stack, under @igprof_size_filtered"},
  {NULL, "--lifetimes", "SHORT", "mem:lifetimes=%s", check_ms, "<n>ms (1..3600000)", 0,
   "-mp: MEM_TEMP (freed before the thread's next allocation), MEM_SHORT (freed within SHORT), MEM_LIFETIME (ages)"},
  {NULL, "--histogram", NULL, "mem:histogram", NULL, NULL, 0,
   "-mp: the allocations' sizes in powers of two, in the dump (igprof-analyse --histogram)"},
  {NULL, "--snapshots", "N", "mem:snapshots=%s", check_snapshots, "a number 1..1000000", 0,
   "with --timeline: every Nth sample also holds each call path's live bytes (a detailed snapshot)"},
  {NULL, "--sample", "BYTES", "mem:sample=%s", check_sample, "a size in bytes 1..1G, suffix k, M or G", 0,
   "-mp: sample allocations, one per BYTES allocated on average (512k is a good start); the figures are "
   "unbiased estimates, frees of sampled blocks exact"},
  {NULL, "--sample-seed", "N", "mem:seed=%s", check_seed, "a number 0..2147483647", 0,
   "with --sample: a fixed seed, so the same run samples the same allocations"},
  {"-pp", "--performance-profiler", NULL, "perf", NULL, NULL, 1,
   "performance profile: PERF_TICKS (the default when no profiler is chosen)"},
  {"-pr", "--real-time", NULL, "perf perf:real", NULL, NULL, 1, "performance profile of wall-clock time"},
  {"-pu", "--user-time", NULL, "perf perf:user", NULL, NULL, 1, "performance profile of user CPU time only"},
  {"-pf", "--sample-rate", "HZ", "perf:hz=%s", check_hz, "a rate in Hz (1..100000)", 0,
   "sampling rate (default 200)"},
  {NULL, "--rate", "HZ", "perf:hz=%s", check_hz, "a rate in Hz (1..100000)", 0, "same as -pf"},
  {"-pk", "--keep-on-fork", NULL, "perf:keep", NULL, NULL, 0, "a forked child keeps the parent's samples"},
  {"-pd", "--disable-on-start", NULL, "perf:nostart", NULL, NULL, 0,
   "start with sampling off until the program enables it"},
  {"-o", "--output", "FILE", "igprof:out=%s", check_nonempty, "a file name or |command", 0,
   "dump file (%p = pid); |command gets the dump on its stdin"},
  {"-z", "--compress", NULL, "igprof:gzip", NULL, NULL, 0, "gzip the dump (in-process zlib)"},
  {"-d", "--debug", NULL, "igprof:debug", NULL, NULL, 0, "report what the runtime does on stderr"},
  {"-t", "--target", "NAME", "igprof:target=%s", check_nonempty, "a non-empty name", 0,
   "profile only processes whose name contains NAME"},
  {"-D", "--dump-flag", "FILE", "igprof:dump=%s", check_nonempty, "a file name", 0,
   "write a checkpoint dump whenever FILE appears (then delete it)"},
  {"-S", "--dump-signal", "SIGNAL", "igprof:signal=%s", check_signal,
   "a signal name or number other than KILL, STOP, SEGV, BUS, ABRT, FPE, ILL", 0,
   "write a checkpoint dump when the process gets SIGNAL"},
  {NULL, "--unwind", "METHOD", "igprof:unwind=%s", check_unwind, "fast or libunwind", 0,
   "stack walker"},
  {NULL, "--depth", "N", "igprof:depth=%s", check_depth, "a number 1..65536", 0,
   "frames kept per stack (default 256; deeper stacks are marked truncated)"},
};

#define NOPTIONS (sizeof options / sizeof options[0])

static void usage(FILE *f)
{
  fprintf(f, "Usage: igprof [options] [--] program [args...]\n\n"
             "Profile a program (and the processes it starts) with libigprof.so.\n\nOptions:\n");
  launch_print_options(f, options, NOPTIONS, 32);
  fprintf(f, "Dumps: igprof.<program>.<pid> (.gz with -z) in the current directory, one per\n"
             "process, written at exit, _exit, exec, fatal signals, and on request.\n"
             "igprof execs the program: it keeps igprof's pid, and its exit status or death\n"
             "by a signal is igprof's. 127: not found, 126: cannot run, 125: igprof's own\n"
             "errors (nothing ran).\n"
             "Read them with igprof-analyse. See igprof(1), and running.md and\n"
             "cpu-profiling.md in the documentation directory (share/doc/igprof).\n");
}

/* --min-size and --max-size as the runtime will read them (options.h), and
 * whether --sample and --lifetimes are both given (they do not combine). */
struct size_range { unsigned long long min, max; int sample, lifetimes; };

static int read_size_range(void *ctx, const struct igprof_token *t, char *err, size_t errlen)
{
  struct size_range *r = ctx;
  (void) err;
  (void) errlen;
  if (strcmp(t->module, "mem") != 0 || !t->has_value) return 0;
  if (strcmp(t->key, "min_size") == 0) igprof_options_size(t->value, &r->min);
  if (strcmp(t->key, "max_size") == 0) igprof_options_size(t->value, &r->max);
  if (strcmp(t->key, "sample") == 0) r->sample = 1;
  if (strcmp(t->key, "lifetimes") == 0) r->lifetimes = 1;
  return 0;
}

static void check_size_range(const char *text)
{
  struct size_range r = {0, ~0ull, 0, 0};
  struct igprof_token token;
  char err[256];
  if (!text || igprof_options_parse(text, &token, read_size_range, &r, err, sizeof err) != 0) return;
  if (r.min > r.max) launch_die(LAUNCH_EXIT_ERROR, "--min-size %llu is above --max-size %llu", r.min, r.max);
  if (r.sample && r.lifetimes)
    launch_die(LAUNCH_EXIT_ERROR, "--sample and --lifetimes do not combine (lifetimes need every block)");
}

int main(int argc, char **argv)
{
  char *text = NULL;
  int modules = 0;
  const char *output = NULL;
  /* -o, -D: relative to where igprof runs, for every process of the tree. */
  launch_absolute_paths(argc, argv, options, NOPTIONS, "igprof:out=%s");
  launch_absolute_paths(argc, argv, options, NOPTIONS, "igprof:dump=%s");
  int i = launch_parse(argc, argv, options, NOPTIONS, usage, &text, &modules, "igprof:out=", &output);
  if (i >= argc) {
    fprintf(stderr, "igprof: no program to run\n");
    usage(stderr);
    return LAUNCH_EXIT_ERROR;
  }
  if (!modules) {
    const struct launch_option *pp = launch_find_option(options, NOPTIONS, "-pp");
    size_t len = strlen(text ? text : "");
    launch_append_token(&text, &len, pp->token, NULL);
  }
  check_size_range(text);
  char *lib = launch_library_path();
  char *program = launch_resolve_program(argv[i]);
  launch_check_output_dir("-o", output);
  launch_check_program(program);

  /* -o FILE names this run's result: an old file of that name is stale.
   * (Dumps never replace files, so it must go before the run.) */
  struct stat st;
  if (output && output[0] != '|' && !strstr(output, "%p") && lstat(output, &st) == 0 && S_ISREG(st.st_mode))
    unlink(output); /* only a regular file: never a device, a FIFO or what a symlink points to */

  if (setenv("IGPROF", text, 1) != 0) launch_die(LAUNCH_EXIT_ERROR, "cannot set IGPROF");
  launch_preload(lib);

  return launch_run(program, argc - i, argv + i);
}
