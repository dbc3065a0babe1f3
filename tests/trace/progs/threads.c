/* Threads allocating and freeing at once, for trace.threads*: thread k
 * allocates only sizes k*10000 + i (i < ROUNDS), so each line can be
 * checked against the thread that made it. Prints each thread's id.
 * With the argument "deep", each thread allocates DEEP_ROUNDS times from
 * DEPTH nested calls: with --stack every event is a block longer than
 * PIPE_BUF. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 2000

#define DEPTH 80
#define DEEP_ROUNDS 150

static pid_t tids[THREADS];
static int deep;

static void allocate(int k, int i)
{
  char *p = malloc((size_t) (k + 1) * 10000 + (size_t) i);
  p[0] = 1;
  free(p);
}

static void nest(int k, int level)
{
  if (level == 0) {
    for (int i = 0; i < DEEP_ROUNDS; ++i) allocate(k, i);
    return;
  }
  nest(k, level - 1);
}

static void *work(void *arg)
{
  int k = (int) (long) arg;
  tids[k] = gettid();
  if (deep) nest(k, DEPTH);
  else
    for (int i = 0; i < ROUNDS; ++i) allocate(k, i);
  return NULL;
}

int main(int argc, char **argv)
{
  pthread_t t[THREADS];
  deep = argc > 1 && strcmp(argv[1], "deep") == 0;
  for (long k = 0; k < THREADS; ++k) pthread_create(&t[k], NULL, work, (void *) k);
  for (int k = 0; k < THREADS; ++k) pthread_join(t[k], NULL);
  for (int k = 0; k < THREADS; ++k) printf("thread %d %d\n", k, (int) tids[k]);
  return 0;
}
