/* Lazy compilation of frame recipes (docs/stack-walking.md, "When tables are
 * built"): signal walks before any hook walk find no module compiled and
 * step every frame with libunwind, yet agree with libunwind frame for frame;
 * the first hook walk compiles the modules it meets, after which signal
 * walks step by recipes. With set_eager (what the CPU sampler asks for),
 * every module is compiled at once and signal walks use recipes from the
 * first.
 *
 * usage: walk_lazy lazy|eager */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "walk_check.h"
#include "walk_fast.h"

#define WALKS 200

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)si;
  check_signal(uc);
}

/* qsort puts the C library's frames between the handler's and main's. */
static int compare_raising(const void *a, const void *b) {
  raise(SIGUSR1);
  return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static void signal_walks(int depth) {
  if (depth > 0) {
    signal_walks(depth - 1);
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return;
  }
  for (int i = 0; i < WALKS; i++) {
    int v[2] = {2, 1};
    qsort(v, 2, sizeof v[0], compare_raising);
  }
}

struct phase {
  unsigned long recipe, unwinder; /* frames stepped by recipes (or memo), by libunwind */
};

static struct phase run_phase(void) {
  struct walk_fast_stats a, b;
  igprof_walk_fast_stats(&a);
  signal_walks(5);
  igprof_walk_fast_stats(&b);
  /* Memo frames count as recipe steps: only recipe steps are memoised. */
  return (struct phase){b.frames_fast + b.frames_memo - a.frames_fast - a.frames_memo,
                        b.frames_unwinder - a.frames_unwinder};
}

int main(int argc, char **argv) {
  int eager = argc == 2 && strcmp(argv[1], "eager") == 0;
  if (argc != 2 || (!eager && strcmp(argv[1], "lazy") != 0)) {
    fprintf(stderr, "usage: %s lazy|eager\n", argv[0]);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, NULL);
  check_init();
  if (eager)
    igprof_walk_fast_set_eager(1); /* as the CPU sampler does */
  int ok = 1;

  struct phase first = run_phase(); /* lazy: nothing compiled yet */
  printf("%s, before any hook walk: recipe steps %lu, libunwind steps %lu\n", argv[1],
         first.recipe, first.unwinder);
  if (!eager && (first.recipe != 0 || first.unwinder < WALKS * 8)) {
    printf("FAIL: expected only libunwind steps, at least %d\n", WALKS * 8);
    ok = 0;
  }
  if (eager && (first.recipe < WALKS * 8 || first.unwinder != 0)) {
    printf("FAIL: expected only recipe steps, at least %d\n", WALKS * 8);
    ok = 0;
  }

  check_here(); /* a hook walk: compiles the tables of the modules it meets */
  struct phase second = run_phase();
  printf("%s, after one hook walk: recipe steps %lu, libunwind steps %lu\n", argv[1],
         second.recipe, second.unwinder);
  /* The hook walk met main's and the C library's frames, the only modules
   * on these stacks: from now on no frame needs libunwind. */
  if (second.recipe < WALKS * 8 || second.unwinder != 0) {
    printf("FAIL: expected only recipe steps, at least %d\n", WALKS * 8);
    ok = 0;
  }
  int status = check_report(argv[1], WALKS * 2 * 8, WALKS * 2);
  return ok && status == 0 ? 0 : 1;
}
