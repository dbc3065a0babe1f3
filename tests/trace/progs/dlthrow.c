/* A C program that loads a C++ library with dlopen and lets it throw, for
 * trace.throw-dlopen. Argument: the library. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
  if (argc != 2) return 2;
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*fn)(int) = (int (*)(int)) dlsym(h, "throw_and_catch");
  printf("caught %d\n", fn(1) + fn(2));
  return 0;
}
