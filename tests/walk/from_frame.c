/* walk.from_frame: a walk started from a hook replacement's frame record
 * (igprof_walk_fast_from_frame, what the memory hooks use) gives exactly the
 * frames of a walk that steps out of the replacement (igprof_walk_fast_from_hook),
 * at several depths, with and without frame pointers in the callers; a frame
 * whose saved return address is not the caller's is refused (-1) so the
 * runtime falls back. Also with one replacement frame reached from two call
 * sites in turn: the frame walk then finds the record of the last walk
 * under its start with one slot changed, and joins it further out. Every
 * walk writes into a buffer filled with a poison pattern first, so a frame
 * the walker does not write shows. Where frames keep no record the walker
 * can start from (ARM32: FRAME_RECORD_AT_FP 0), every frame walk must be
 * refused, and the hook walk the runtime falls back to must be whole. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "walk_fast.h"
#include "../../src/arch/frame.h"

#define MAX 256
static uintptr_t by_hook[MAX], by_frame[MAX];
static int n_hook, n_frame, refused;

/* Stands where a replacement stands: a frame pointer of its own. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void replacement(void)
{
  void *ret = __builtin_return_address(0);
  const void *frame = __builtin_frame_address(0);
  int t1 = 0, t2 = 0;
  memset(by_hook, 0xa5, sizeof by_hook);
  memset(by_frame, 0xa5, sizeof by_frame);
  n_frame = igprof_walk_fast_from_frame(by_frame, MAX, ret, frame, &t2);
  __asm__ volatile("" ::: "memory");
  n_hook = igprof_walk_fast_from_hook(by_hook, MAX, ret, &t1);
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

/* The same start (the caller of replacement, at the same stack address)
 * from two call sites in turn. */
__attribute__((noinline, optimize("omit-frame-pointer"))) static int site_leaf(int i)
{
  volatile int pad = i;
  replacement();
  return pad;
}

__attribute__((noinline)) static int two_sites(int i)
{
  if (i & 1)
    return site_leaf(i) + 1;
  return site_leaf(i + 1) + 2;
}

static int same_walks(void)
{
  if (!FRAME_RECORD_AT_FP)
    return n_frame == -1 && n_hook > 0;
  return n_hook == n_frame && memcmp(by_hook, by_frame, sizeof by_hook[0] * (size_t)n_hook) == 0;
}

int main(void)
{
  int failures = 0;
  igprof_walk_fast_init();
  int alike = 0;
  for (int i = 0; i < 40; i++) {
    two_sites(i);
    alike += same_walks() && n_hook >= 5;
  }
  if (alike != 40) {
    fprintf(stderr, "two call sites: %d of 40 frame walks equal the hook walk\n", alike);
    failures++;
  } else {
    printf("two call sites: 40 frame walks equal the hook walk\n");
  }
  for (int depth = 0; depth <= 60; depth += 20) {
    descend(depth);
    int same = same_walks();
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
