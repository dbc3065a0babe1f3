/* Threads allocating and freeing at once, for trace.mem.threads: thread k
 * allocates only sizes k*10000 + i (i < ROUNDS), so each line can be
 * checked against the thread that made it. Prints each thread's id. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 2000

static pid_t tids[THREADS];

static void *work(void *arg)
{
  int k = (int) (long) arg;
  tids[k] = gettid();
  for (int i = 0; i < ROUNDS; ++i) {
    char *p = malloc((size_t) (k + 1) * 10000 + (size_t) i);
    p[0] = 1;
    free(p);
  }
  return NULL;
}

int main(void)
{
  pthread_t t[THREADS];
  for (long k = 0; k < THREADS; ++k) pthread_create(&t[k], NULL, work, (void *) k);
  for (int k = 0; k < THREADS; ++k) pthread_join(t[k], NULL);
  for (int k = 0; k < THREADS; ++k) printf("thread %d %d\n", k, (int) tids[k]);
  return 0;
}
