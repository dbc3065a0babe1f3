/* Recipes derived per PC (docs/stack-walking.md, "When recipes are
 * derived"): no module table is ever compiled on the walk's path, so the
 * first walk that meets a PC derives its recipe from the module's .eh_frame,
 * whether it runs in a signal handler or in a hook, and later walks find it
 * in the PC cache. While a dlclose is under way (modules_changing, until the
 * modules_closed after it), nothing is derived: a hook walk steps such
 * frames with libunwind, a signal walk ends at its first frame whose recipe
 * is not cached.
 *
 * usage: walk_derive signal_first|hook_first|dlclose_guard
 *
 * Every walk but the guarded signal walks is compared with libunwind frame
 * for frame (check_signal, check_here). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "walk_check.h"
#include "walk_fast.h"

#define WALKS 200
#define MIN_FRAMES 8 /* handler, trampoline, raise, comparator, qsort..., main's */

static int guarded_signal_walks; /* on_signal: walk without the reference */
static long guarded_frames, guarded_walks;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
  (void)sig;
  (void)si;
  if (!guarded_signal_walks) {
    check_signal(uc);
    return;
  }
  uintptr_t pcs[256];
  int truncated;
  guarded_frames += igprof_walk_fast_from_signal(pcs, 256, uc, &truncated);
  guarded_walks++;
}

/* qsort puts the C library's frames between the handler's and main's. */
static int compare_raising(const void *a, const void *b)
{
  raise(SIGUSR1);
  return *(const int *)a - *(const int *)b;
}

static int compare_hooking(const void *a, const void *b)
{
  check_here();
  return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static void walks(int depth, int (*cmp)(const void *, const void *))
{
  if (depth > 0) {
    walks(depth - 1, cmp);
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return;
  }
  for (int i = 0; i < WALKS; i++) {
    int v[2] = {2, 1};
    qsort(v, 2, sizeof v[0], cmp);
  }
}

struct phase {
  unsigned long recipe, unwinder, derived, refused, cut;
};

static struct phase run_phase(const char *name, int (*cmp)(const void *, const void *))
{
  struct walk_fast_stats a, b;
  igprof_walk_fast_stats(&a);
  walks(5, cmp);
  igprof_walk_fast_stats(&b);
  struct phase p = {b.frames_fast - a.frames_fast,
                    b.frames_unwinder - a.frames_unwinder, b.derivations - a.derivations,
                    b.derivations_refused - a.derivations_refused, b.walks_cut - a.walks_cut};
  printf("%s: recipe steps %lu, libunwind steps %lu, recipes derived %lu, refused %lu, "
         "walks cut %lu\n",
         name, p.recipe, p.unwinder, p.derived, p.refused, p.cut);
  return p;
}

static int expect(int cond, const char *what)
{
  if (!cond)
    printf("FAIL: %s\n", what);
  return cond;
}

/* A phase whose walks all ran on recipes: no libunwind step, no cut walk,
 * at least MIN_FRAMES frames a walk stepped by recipe. */
static int expect_by_recipe(struct phase p, const char *name)
{
  char what[128];
  snprintf(what, sizeof what, "%s: no libunwind step, no cut walk", name);
  int ok = expect(p.unwinder == 0 && p.cut == 0, what);
  snprintf(what, sizeof what, "%s: every frame by recipe", name);
  return expect(p.recipe >= WALKS * MIN_FRAMES, what) && ok;
}

/* Derivation in the phase that meets the PCs first, the cache after. */
static int first_and_second(const char *mode, int (*first)(const void *, const void *),
                            int (*second)(const void *, const void *))
{
  int ok = 1;
  struct phase p1 = run_phase("first phase", first);
  ok &= expect(p1.derived > 0 && p1.refused == 0, "first phase: recipes derived, none refused");
  ok &= expect_by_recipe(p1, "first phase");
  struct phase p2 = run_phase("second phase", second);
  ok &= expect_by_recipe(p2, "second phase");
  ok &= expect(check_report(mode, WALKS * 2 * MIN_FRAMES, first == compare_raising ? WALKS : 0) ==
                   0,
               "walks agree with libunwind");
  return ok;
}

static int dlclose_guard(void)
{
  int ok = 1;
  igprof_walk_fast_modules_changing(); /* as the dlclose hook does before dlclose */
  struct phase hook = run_phase("hook walks, dlclose under way", compare_hooking);
  ok &= expect(hook.derived == 0 && hook.refused > 0, "guarded hook walks derive nothing");
  ok &= expect(hook.unwinder >= WALKS * 4, "guarded hook walks step by libunwind");
  guarded_signal_walks = 1;
  struct phase sig = run_phase("signal walks, dlclose under way", compare_raising);
  guarded_signal_walks = 0;
  ok &= expect(sig.derived == 0 && sig.refused >= WALKS, "guarded signal walks derive nothing");
  ok &= expect(sig.unwinder == 0, "guarded signal walks never call libunwind");
  /* Nothing was cached meanwhile, so each walk ends at its first frame. */
  ok &= expect(sig.cut == WALKS && guarded_walks == WALKS && guarded_frames == WALKS,
               "each guarded signal walk is cut after the interrupted PC");
  /* A dlopen from a destructor the dlclose runs: its rebuild must not end
   * the close, whose module may still be mapped. */
  igprof_walk_fast_modules_changed();
  struct phase nested = run_phase("hook walks after a nested dlopen", compare_hooking);
  ok &= expect(nested.derived == 0 && nested.refused > 0, "a dlopen inside a dlclose ends nothing");
  igprof_walk_fast_modules_closed(); /* after the dlclose */
  struct phase after = run_phase("signal walks after the rebuild", compare_raising);
  ok &= expect(after.derived > 0 && after.refused == 0, "after: recipes derived");
  ok &= expect_by_recipe(after, "after");
  struct phase hook2 = run_phase("hook walks after the rebuild", compare_hooking);
  ok &= expect(hook2.unwinder == 0 && hook2.refused == 0, "after: hook walks by recipe");
  ok &= expect(check_report("dlclose_guard", WALKS * 3 * MIN_FRAMES, WALKS) == 0,
               "walks agree with libunwind");
  return ok;
}

int main(int argc, char **argv)
{
  const char *mode = argc == 2 ? argv[1] : "";
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, NULL);
  check_init();
  int ok;
  if (strcmp(mode, "signal_first") == 0)
    ok = first_and_second(mode, compare_raising, compare_hooking);
  else if (strcmp(mode, "hook_first") == 0)
    ok = first_and_second(mode, compare_hooking, compare_raising);
  else if (strcmp(mode, "dlclose_guard") == 0)
    ok = dlclose_guard();
  else {
    fprintf(stderr, "usage: %s signal_first|hook_first|dlclose_guard\n", argv[0]);
    return 2;
  }
  return ok ? 0 : 1;
}
