/* fork for trace.fork: the parent allocates 1111 bytes, the child 2222, the
 * parent 3333 after the child ended; both pids are printed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
  free(malloc(1111));
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    free(malloc(2222));
    _exit(0);
  }
  int status;
  waitpid(child, &status, 0);
  free(malloc(3333));
  printf("parent %d child %d status %d\n", (int) getpid(), (int) child, status);
  return 0;
}
