/* The program tests/analyse/pprof_test.py profiles: known allocations
 * (no argument), two CPU loops, one four times longer (`cpu`), or both
 * (`both`). */
#include <stdlib.h>
#include <string.h>

static void *volatile keep[16];
volatile unsigned long sink;

__attribute__((noinline)) void big_blocks(void)
{
  for (int i = 0; i < 3; ++i) keep[i] = malloc(1000);   /* 3000 bytes, all live at exit */
}

__attribute__((noinline)) void small_blocks(void)
{
  for (int i = 0; i < 10; ++i) {                        /* 100 bytes, none live */
    keep[12] = malloc(10);
    free(keep[12]);
  }
}

__attribute__((noinline)) void mixed(void)
{
  small_blocks();
  keep[10] = malloc(500);                               /* 500 bytes, live */
}

__attribute__((noinline)) void spin(unsigned long n)
{
  for (unsigned long i = 0; i < n; ++i) sink += i;
}

__attribute__((noinline)) void spin_long(void) { spin(200000000); }
__attribute__((noinline)) void spin_short(void) { spin(50000000); }

int main(int argc, char **argv)
{
  int cpu = argc > 1 && (!strcmp(argv[1], "cpu") || !strcmp(argv[1], "both"));
  int mem = argc == 1 || !strcmp(argv[1], "both");
  if (mem) {
    big_blocks();
    mixed();
    small_blocks();
  }
  if (cpu) {
    spin_long();
    spin_short();
  }
  return 0;
}
