/* walk.from_frame: a walk started from a hook replacement's frame record
 * (igprof_walk_fast_from_frame, what the memory hooks use) gives exactly the
 * frames of a walk that steps out of the replacement (igprof_walk_fast_from_hook),
 * at several depths, with and without frame pointers in the callers; a frame
 * whose saved return address is not the caller's is refused (-1) so the
 * runtime falls back. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "walk_fast.h"

#define MAX 256
static uintptr_t by_hook[MAX], by_frame[MAX];
static int n_hook, n_frame, refused;

/* Stands where a replacement stands: a frame pointer of its own. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void replacement(void)
{
  void *ret = __builtin_return_address(0);
  const void *frame = __builtin_frame_address(0);
  int t1 = 0, t2 = 0;
  n_hook = igprof_walk_fast_from_hook(by_hook, MAX, ret, &t1);
  n_frame = igprof_walk_fast_from_frame(by_frame, MAX, ret, frame, &t2);
  refused = igprof_walk_fast_from_frame(by_frame + MAX / 2, 4, (void *)((uintptr_t)ret + 1), frame, &t2);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, optimize("omit-frame-pointer"))) static int descend(int n)
{
  volatile int pad = n;
  if (n == 0) {
    replacement();
    return pad;
  }
  return descend(n - 1) + pad;
}

int main(void)
{
  int failures = 0;
  igprof_walk_fast_init();
  for (int depth = 0; depth <= 60; depth += 20) {
    descend(depth);
    int same = n_hook == n_frame && memcmp(by_hook, by_frame, sizeof by_hook[0] * (size_t)n_hook) == 0;
    if (!same || n_hook < depth + 4 || refused != -1) {
      fprintf(stderr, "depth %d: hook walk %d frames, frame walk %d frames, %s; wrong caller gave %d\n",
              depth, n_hook, n_frame, same ? "same" : "DIFFERENT", refused);
      failures++;
    } else {
      printf("depth %d: %d frames, identical\n", depth, n_frame);
    }
  }
  return failures != 0;
}
