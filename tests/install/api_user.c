/* A program that uses igprof's installed API (include/igprof/igprof.h): run
 * alone it must behave as without igprof; under `igprof -pp` each call must
 * take effect. Prints what every call returned.
 *
 *   api_user DUMP    burn_disabled: CPU time with sampling off;
 *                    burn_enabled: CPU time with sampling on;
 *                    then a checkpoint dump to DUMP */
#include <igprof/igprof.h>
#include <stdio.h>
#include <time.h>

static volatile unsigned long sink;

static double cpu_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void spin(double seconds)
{
  double end = cpu_seconds() + seconds;
  while (cpu_seconds() < end)
    for (int i = 0; i < 10000; ++i) sink += (unsigned long) i * 2654435761u;
}

__attribute__((noinline)) void burn_disabled(void) { spin(0.3); }
__attribute__((noinline)) void burn_enabled(void) { spin(0.3); }

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: api_user DUMP\n");
    return 2;
  }
  printf("active %d\n", igprof_active());
  printf("disable: was %d\n", igprof_disable());
  burn_disabled();
  igprof_enable();
  burn_enabled();
  printf("dump_now %d\n", igprof_dump_now(argv[1]));
  printf("disable: was %d\n", igprof_disable());
  return 0;
}
