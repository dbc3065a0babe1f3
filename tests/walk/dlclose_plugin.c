/* Loaded and unloaded again and again by walk_dlclose_prog. */
#include <stdlib.h>
#include <string.h>

__attribute__((visibility("default"))) void dlclose_plugin_entry(int n) {
  char *p = malloc((size_t)n * 16 + 1);
  if (p) {
    memset(p, n, (size_t)n * 16 + 1);
    free(p);
  }
}
