/* Loaded and unloaded with dlopen/dlclose by the corpus: its unwind data
 * must be read when it appears and its frames walked while it is there. */
#include "walk_check.h"

/* Two builds of this file differ only in PLUGIN_PAD: the same code at the
 * same offsets with different frame sizes. Loaded one after the other at
 * the same address, their return addresses coincide and their recipes do
 * not, so a walker that kept a recipe across the module change would walk
 * the second one wrongly. Both sizes need a 32-bit immediate (x86_64), or
 * both are beyond what a pre-indexed stp can allocate (AArch64: sub sp
 * first, then the frame record at sp), so the code has the same length. */
#ifndef PLUGIN_PAD
#if defined(__aarch64__)
#define PLUGIN_PAD 600
#else
#define PLUGIN_PAD 200
#endif
#endif

__attribute__((noinline)) static void plugin_leaf(int n) {
  char pad[PLUGIN_PAD];
  pad[0] = (char)n;
  __asm__ volatile("" : : "r"(pad) : "memory"); /* the frame must be allocated */
  if (n == 0)
    check_here();
  else
    plugin_leaf(n - 1);
  __asm__ volatile("" ::: "memory"); /* keep the recursion a real call */
}

__attribute__((noinline)) void corpus_plugin_entry(int depth) { plugin_leaf(depth); }
