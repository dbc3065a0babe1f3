/* Many allocations after the trace's reader may have gone, for trace.pipe:
 * the program must not die of SIGPIPE because of the trace. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
  for (int i = 0; i < 200000; ++i) {
    char *p = malloc(100 + (size_t) (i % 50));
    p[0] = 1;
    free(p);
  }
  printf("survived\n");
  return 4;
}
