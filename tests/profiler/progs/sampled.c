/* Allocations of known sizes on known paths, for the sampled memory
 * profile's test (e2e.py, scenario "sampled"): the exact figures of every
 * function follow from the constants below.
 *
 *   sampled keep   the blocks of keep_*, resize_path and big_path stay live
 *   sampled free   everything is freed before exit: MEM_LIVE is empty
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_N 100000 /* keep_small: 64 bytes each, kept */
#define MID_N 20000    /* keep_mid: 1000 bytes each, kept */
#define TEMP_N 100000  /* temp_path: 128 bytes each, freed at once */
#define RESIZE_N 40000 /* resize_path: malloc 100, realloc to 200, kept */
#define BIG_N 200      /* big_path: 100000 bytes each, kept */

static void *blocks[SMALL_N + MID_N + RESIZE_N + BIG_N];
static size_t nblocks;

static void *must(void *p)
{
  if (!p) {
    fprintf(stderr, "sampled: out of memory\n");
    exit(1);
  }
  return p;
}

__attribute__((noinline)) static void keep_small(void)
{
  for (int i = 0; i < SMALL_N; ++i) blocks[nblocks++] = must(malloc(64));
}

__attribute__((noinline)) static void keep_mid(void)
{
  for (int i = 0; i < MID_N; ++i) blocks[nblocks++] = must(malloc(1000));
}

__attribute__((noinline)) static void temp_path(void)
{
  for (int i = 0; i < TEMP_N; ++i) {
    char *p = must(malloc(128));
    p[0] = (char) i;
    free(p);
  }
}

__attribute__((noinline)) static void resize_path(void)
{
  for (int i = 0; i < RESIZE_N; ++i) {
    void *p = must(malloc(100));
    blocks[nblocks++] = must(realloc(p, 200));
  }
}

__attribute__((noinline)) static void big_path(void)
{
  for (int i = 0; i < BIG_N; ++i) blocks[nblocks++] = must(malloc(100000));
}

int main(int argc, char **argv)
{
  if (argc != 2 || (strcmp(argv[1], "keep") != 0 && strcmp(argv[1], "free") != 0)) {
    fprintf(stderr, "usage: sampled keep|free\n");
    return 2;
  }
  keep_small();
  temp_path();
  keep_mid();
  resize_path();
  big_path();
  if (strcmp(argv[1], "free") == 0)
    while (nblocks) free(blocks[--nblocks]);
  printf("%zu blocks kept\n", nblocks);
  return 0;
}
