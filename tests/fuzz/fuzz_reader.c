/* libFuzzer target: any byte string as a dump (plain or gzip) goes through
 * the reader, the flat profile and a report. Bad input must end in a clean
 * error (analyse_exit, turned into a longjmp here), never a crash. The first
 * byte picks reader options (bits 0-3), the report (4-6; 7: --pprof, which
 * reads every counter) and the rank order (7); the rest is the dump. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/analyse/flat.h"
#include "../../src/analyse/merge.h"
#include "../../src/analyse/reader.h"
#include "../../src/analyse/report.h"

static jmp_buf on_error;
static void error_exit(int status) { longjmp(on_error, status ? status : 1); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static FILE *devnull;
  static int fd = -1;
  char path[64];
  if (!devnull) {
    devnull = fopen("/dev/null", "w");
    fd = memfd_create("dump", 0);
  }
  if (size < 1) return 0;
  unsigned flags = data[0];
  data++, size--;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t) size) return 0;
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

  struct symtab st;
  struct call_tree tree;
  struct read_options opts = { .peak = flags & 1, .no_filter = flags & 2, .min_count = flags & 4 ? 2 : 0,
                               .all_counters = (flags >> 4 & 7) == 7 };
  /* Rules cache symbol ids, so they live as long as the symbol table. */
  struct merge_rules *rules = flags & 8 ? merge_rules_new(0, "s/^(f|b)(.*)$/\\2\\1/;s|lib|L|", "ma.*>f/NEW") : NULL;
  opts.merge = rules;
  symtab_init(&st, 1);
  tree_init(&tree, st.spontaneous, 0);
  struct reader *volatile rd = reader_new(&opts, &st);
  analyse_exit_hook = error_exit;
  if (setjmp(on_error) == 0) {
    reader_read(rd, path, &tree);
    reader_finish(rd);
    struct flat_profile flat;
    tree_accumulate(&tree, &st);
    flat_build(&flat, &tree, &st);
    flat_rank(&flat, &st, 0);
    struct report r = { .out = devnull, .st = &st, .tree = &tree, .flat = &flat, .key = reader_key(rd),
                        .tick_period = reader_tick_period(rd), .is_time = reader_key_is_time(rd), .show_calls = 1,
                        .show_paths = 1, .ascending = flags >> 7 };
    switch (flags >> 4 & 7) {
    case 0: report_text(&r); break;
    case 1: report_json(&r); break;
    case 2: report_tree(&r); break;
    case 3: report_top(&r, 5); break;
    case 4: report_flame(&r); break;
    case 5: report_html(&r); break;
    case 6: report_callgrind(&r, devnull); break;
    default: report_pprof(&r, rd, NULL, 0, "/dev/null"); break;
    }
    flat_free(&flat);
  }
  analyse_exit_hook = NULL;
  reader_free(rd);
  tree_free(&tree);
  symtab_free(&st);
  merge_rules_free(rules);
  return 0;
}
