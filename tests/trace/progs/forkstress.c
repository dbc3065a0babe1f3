/* Threads allocating and mapping while the main thread forks, for
 * trace.fork-threads: every child must get through its own traced malloc
 * (no lock of the tracer or the loader may be inherited held). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 3
#define FORKS 100

static atomic_int stop;

static void *work(void *arg)
{
  unsigned seed = (unsigned) (long) arg;
  while (!atomic_load(&stop)) {
    size_t n = 100 + rand_r(&seed) % 200000; /* some above the mmap threshold */
    if (n == 7777) ++n;                          /* the children's own size */
    char *p = malloc(n);
    p[0] = 1;
    free(p);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(m, 4096);
  }
  return NULL;
}

int main(void)
{
  pthread_t t[THREADS];
  for (long k = 0; k < THREADS; ++k) pthread_create(&t[k], NULL, work, (void *) k);
  int ok = 0;
  for (int i = 0; i < FORKS; ++i) {
    pid_t c = fork();
    if (c == 0) {
      char *p = malloc(7777);
      p[0] = 1;
      free(p);
      _exit(5);
    }
    int status;
    waitpid(c, &status, 0);
    ok += WIFEXITED(status) && WEXITSTATUS(status) == 5;
  }
  atomic_store(&stop, 1);
  for (int k = 0; k < THREADS; ++k) pthread_join(t[k], NULL);
  printf("children %d\n", ok);
  return 0;
}
