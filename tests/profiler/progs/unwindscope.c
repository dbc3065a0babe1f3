/* Loads the C++ plugin given as argv[1] and lets it throw argv[2] times. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
  if (argc != 3) return 2;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*run)(int) = (int (*)(int)) dlsym(h, "cxxplugin_run");
  printf("caught %d\n", run(atoi(argv[2])));
  return 0;
}
