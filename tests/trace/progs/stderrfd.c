/* The program moves its own fd 2 away and writes to it, for trace.stderr:
 * the trace must keep going to the stderr of start-up, and the program's
 * own output must be unchanged. Argument: a file for the new fd 2. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  if (argc != 2) return 2;
  fprintf(stderr, "before\n");
  free(malloc(4242));
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  close(fd);
  fprintf(stderr, "after\n");
  free(malloc(4343));
  close(2);
  free(malloc(4444));
  printf("done\n");
  return 0;
}
