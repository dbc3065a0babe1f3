/* Loaded and unloaded with dlopen/dlclose by the corpus: its unwind data
 * must be compiled when it appears and its frames walked while it is there. */
#include "walk_check.h"

__attribute__((noinline)) static void plugin_leaf(int n) {
  if (n == 0)
    check_here();
  else
    plugin_leaf(n - 1);
  __asm__ volatile("" ::: "memory"); /* keep the recursion a real call */
}

__attribute__((noinline)) void corpus_plugin_entry(int depth) { plugin_leaf(depth); }
