/* Streaming reader of IgProf-format dumps (ours and IgProf's; HEX and decimal;
 * plain or gzip; "-" is stdin). Each line is parsed in place and merged into a
 * call tree; memory grows with the number of distinct stacks and symbols, not
 * with the size of the input. Bad input is reported as "file:line: problem"
 * on stderr and the process exits 1. */
#ifndef IGPROF_ANALYSE_READER_H
#define IGPROF_ANALYSE_READER_H

#include <stdint.h>

#include "merge.h"
#include "profile.h"
#include "symbols.h"

struct read_options {
  const char *key;            /* counter to report; NULL = first one seen */
  int peak;                   /* --value peak */
  int no_filter;              /* -nf */
  struct resolver *resolver;  /* -g, or NULL */
  struct merge_rules *merge;  /* -ml/-mr/-ma, or NULL */
  int64_t min_count, max_count, min_calls, max_calls, min_avg, max_avg; /* 0 = off */
  int verbose;
  int snapshots;              /* keep the timeline's detailed snapshots (--massif) */
  int all_counters;           /* also add every counter's value and ticks to the tree's
                                 columns, column = reader_counter_name's index (--pprof) */
};

/* The heap timeline a dump may carry (igprof -mp --timeline; its lines are
 * not stacks: docs/dump-format.md, "The heap timeline"). */
#define HEAP_TIMELINE_FRAME "@igprof_heap_timeline"
#define HEAP_TIMELINE_COUNTER "HEAP_TIMELINE"
#define HEAP_SNAPSHOT_FRAME "@igprof_heap_snapshot"
#define HEAP_SNAPSHOT_COUNTER "HEAP_SNAPSHOT"
struct heap_sample { int64_t us, bytes, blocks; };
/* A detailed snapshot: each stack's live bytes (cnt) and blocks (freq) at
 * timeline sample `sample`. */
struct heap_snapshot { size_t sample; struct call_tree tree; };
struct heap_timeline {
  struct heap_sample *samples; size_t count, cap;
  struct heap_snapshot *snapshots; size_t nsnapshots, snapshots_cap;   /* with read_options.snapshots */
  int inputs;                 /* inputs that had one (only one is kept) */
  char *path, *program;       /* of that input */
};

/* The allocation-size histogram a dump may carry (igprof -mp --histogram):
 * per size class k, the sizes [2^(k-1), 2^k) (k = 0: empty allocations),
 * added up over the inputs. */
#define SIZE_HISTOGRAM_FRAME "@igprof_size_histogram"
#define SIZE_HISTOGRAM_COUNTER "HEAP_HISTOGRAM"
#define SIZE_CLASSES 65
struct size_histogram {
  int64_t count[SIZE_CLASSES], bytes[SIZE_CLASSES];
  int inputs;                 /* inputs that had one */
};

/* A sampled memory profile (igprof -mp --sample T) says so with a depth-1
 * frame @igprof_mem_sampling whose counter MEM_SAMPLING is (allocations
 * sampled, T, 0): its memory figures are estimates. Over the inputs: */
#define MEM_SAMPLING_FRAME "@igprof_mem_sampling"
#define MEM_SAMPLING_COUNTER "MEM_SAMPLING"
struct mem_sampling {
  int inputs;                 /* inputs that were sampled */
  int64_t samples;            /* allocations sampled, added up */
  int64_t interval;           /* T of the first; -1 if the inputs' differ */
};

struct reader;

struct reader *reader_new(const struct read_options *opts, struct symtab *st);
void reader_free(struct reader *rd);
/* Read one dump into `tree` (whose is_max is set once the key is known). */
void reader_read(struct reader *rd, const char *path, struct call_tree *tree);
/* The histogram read (inputs 0: none). */
const struct size_histogram *reader_size_histogram(const struct reader *rd);
/* The sampling of the inputs read (inputs 0: none sampled). */
const struct mem_sampling *reader_mem_sampling(const struct reader *rd);
/* The timeline read (count 0: none). */
const struct heap_timeline *reader_timeline(const struct reader *rd);
/* Call after the last file: exits with a message if no key counter was found. */
void reader_finish(struct reader *rd);

const char *reader_key(const struct reader *rd);
/* The stack counters read (not the timeline's), in order of first
 * definition: with all_counters, tree column i is counter i. */
size_t reader_counters(const struct reader *rd);
const char *reader_counter_name(const struct reader *rd, size_t i);
double reader_tick_period(const struct reader *rd);
int reader_key_is_max(const struct reader *rd);
int reader_key_is_time(const struct reader *rd);

#endif
