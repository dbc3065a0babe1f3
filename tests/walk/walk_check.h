/* Test harness for the fast walker: every capture point walks the same stack
 * twice, once with igprof_walk_fast_* and once with libunwind's unw_step (the
 * reference), and compares them frame by frame.
 *
 * Capture points:
 *   check_here()          — like a memory hook: the walk starts at the caller
 *                           of check_here (igprof_walk_fast_from_hook);
 *   check_signal(uc)      — like the sampler: the walk starts at the
 *                           interrupted context (igprof_walk_fast_from_signal).
 * sampler_start() arms a fast timer whose handler runs both kinds of points,
 * so the interrupted PCs land on arbitrary instructions (prologues,
 * epilogues, PLT stubs, libc internals) and hook-style walks cross the
 * signal's sigreturn frame.
 */
#ifndef WALK_CHECK_H
#define WALK_CHECK_H

#include <ucontext.h>

#ifdef __cplusplus
extern "C" {
#endif

void check_init(void);        /* walker init + this thread's stack bounds */
void check_thread_init(void); /* for each new thread that should use the fast path */
/* The program loads and unloads nothing from now on: reference walks in
 * the sampler's handler list the modules without the loader's lock
 * (libunwind's lookups call dl_iterate_phdr: walk_check.c). */
void check_static_modules(void);
void check_here(void);
void check_signal(const ucontext_t *uc);

/* A timer firing every `usec` microseconds of wall time delivers SIGPROF;
 * its handler runs check_signal and check_here. */
void sampler_start(long usec);
void sampler_stop(void);
long sampler_samples(void);
/* Whether a corpus should run one more round after its fixed ones: until
 * `target` signal walks were compared, for at most 8 s since sampler_start;
 * and whatever the time, up to 40 s, until `min_signal` and a quarter more
 * were (the sampler's checks take a bounded share of the time, so a slow or
 * loaded machine gets there later, not never). */
int sampler_more_rounds(long min_signal, long target);

/* Print the summary; return 0 when there was no mismatch, at least
 * `min_frames` frames were compared in total and at least `min_signal`
 * signal-started walks were compared. */
int check_report(const char *name, long min_frames, long min_signal);

#ifdef __cplusplus
}
#endif

#endif
