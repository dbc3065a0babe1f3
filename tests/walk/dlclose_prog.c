/* For walk.igprof_pp_after_dlclose: load and unload a plugin many times
 * (each dlclose goes through the runtime's dlclose hook, which holds the
 * fast walker off module memory until its rebuild), then burn CPU in a
 * chain of three functions that no walk has met yet. Under -pp every
 * sample of burn_leaf must then be a whole stack: if a dlclose had left
 * the walker refusing to derive recipes, each signal walk would end at its
 * first frame.
 *
 * usage: walk_dlclose_prog PLUGIN ROUNDS */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;

NOINLINE static void burn_leaf(double seconds)
{
  struct timespec t0, t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  do {
    for (int i = 0; i < 100000; i++)
      sink = sink * 6364136223846793005ul + 1442695040888963407ul;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
}

NOINLINE static void burn_mid(double seconds)
{
  burn_leaf(seconds);
  __asm__ volatile("" ::: "memory"); /* no tail call */
}

NOINLINE static void burn_outer(double seconds)
{
  burn_mid(seconds);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: %s PLUGIN ROUNDS\n", argv[0]);
    return 2;
  }
  int rounds = atoi(argv[2]);
  for (int r = 0; r < rounds; r++) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
      return 2;
    }
    void (*entry)(int) = (void (*)(int))dlsym(h, "dlclose_plugin_entry");
    if (entry)
      entry(3);
    dlclose(h);
  }
  burn_outer(0.4);
  printf("%d rounds\n", rounds);
  return 0;
}
