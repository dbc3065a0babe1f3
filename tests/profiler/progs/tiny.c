/* A program with nothing in it, linked statically by the tests: igprof must
 * say that it cannot profile it, and still run it unchanged. */
#include <stdio.h>

int main(void)
{
  puts("tiny ran");
  return 7;
}
