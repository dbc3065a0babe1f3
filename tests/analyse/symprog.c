/* A program whose own functions the -g test resolves. It prints, for each
 * function, its offset from the load base as dladdr gives it -- the same
 * offset our runtime writes into FN entries. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

__attribute__((noinline)) static int alpha(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int beta(int x) { return alpha(x) - 2; }
__attribute__((noinline)) int _Z5gammai(int x) { return beta(x) + 7; }

/* probe() records a call site that lies in code inlined from inl() into outer2(). */
static void *volatile probe_ret;
__attribute__((noinline)) static void probe(void) { probe_ret = __builtin_return_address(0); __asm__ volatile(""); }
static inline __attribute__((always_inline)) void inl(void) { probe(); }
__attribute__((noinline)) static void outer2(void) { inl(); __asm__ volatile(""); }

/* stitched() calls probe() from three lines, the middle one in code its
 * body includes from another file: one function, two source files. */
static void *volatile site_a, *volatile site_b, *volatile site_c;
__attribute__((noinline)) static void stitched(void)
{
  probe(); site_a = probe_ret;
#include "symprog_part.inc"
  probe(); site_c = probe_ret;
}

static void show(const char *name, void *fn, size_t size_hint)
{
  Dl_info info;
  if (!dladdr(fn, &info)) return;
  printf("%s %lu %zu\n", name, (unsigned long) ((uintptr_t) fn - (uintptr_t) info.dli_fbase), size_hint);
}

int main(int argc, char **argv)
{
  (void) argv;
  show("alpha", (void *) alpha, 0);
  show("beta", (void *) beta, 0);
  show("gamma", (void *) _Z5gammai, 0);
  show("main", (void *) main, 0);
  outer2();
  show("inlined_site", (char *) probe_ret - 1, 0);
  stitched();
  show("site_a", (char *) site_a - 1, 0);
  show("site_b", (char *) site_b - 1, 0);
  show("site_c", (char *) site_c - 1, 0);
  return _Z5gammai(argc) == 0;
}
