/* hook.pool_hidden: a near chunk when the gaps /proc/self/maps shows within
 * reach are in fact taken by mappings the file leaves out, as under qemu-user
 * (the emulator's own mappings, its 128 MiB code cache among them, are not in
 * the guest's file and may surround the guest's C library).
 *
 * The test fills every free address within near reach of a target with
 * PROT_NONE reservations that the pool's gap search is told not to see:
 * a near reservation must then fail with its reason, cleanly. With one
 * chunk-sized hole punched deep inside a reservation (far from any end a gap
 * search starts from), the reservation must get exactly that hole. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "check.h"
#include "proc_maps.h"
#include "trampoline_pool.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define CHUNK ((uintptr_t)64 * 1024)
#define MAX_PIECES 8192

static uintptr_t pieces[MAX_PIECES][2];
static int npieces;

/* Reserve what is free of [lo, hi) (chunk-aligned), halving around what is
 * taken, down to single chunks. */
static void reserve(uintptr_t lo, uintptr_t hi)
{
  if (hi <= lo || npieces == MAX_PIECES)
    return;
  void *p = mmap((void *)lo, hi - lo, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != MAP_FAILED && (uintptr_t)p == lo) {
    if (npieces > 0 && pieces[npieces - 1][1] == lo)
      pieces[npieces - 1][1] = hi;
    else {
      pieces[npieces][0] = lo;
      pieces[npieces][1] = hi;
      npieces++;
    }
    return;
  }
  if (p != MAP_FAILED)
    munmap(p, hi - lo); /* a kernel that took it as a hint */
  if (hi - lo == CHUNK)
    return;
  uintptr_t mid = lo + ((hi - lo) / 2 & ~(CHUNK - 1));
  reserve(lo, mid);
  reserve(mid, hi);
}

struct window {
  uintptr_t lo, hi, prev_end;
  uintptr_t gaps[4096][2];
  int ngaps;
};
static struct window win;

static int collect(const struct maps_entry *e, void *arg)
{
  struct window *w = arg;
  if (e->start > w->prev_end && w->ngaps < 4096) {
    uintptr_t lo = w->prev_end > w->lo ? w->prev_end : w->lo;
    uintptr_t hi = e->start < w->hi ? e->start : w->hi;
    lo = (lo + CHUNK - 1) & ~(CHUNK - 1);
    hi &= ~(CHUNK - 1);
    if (hi > lo) {
      w->gaps[w->ngaps][0] = lo;
      w->gaps[w->ngaps][1] = hi;
      w->ngaps++;
    }
  }
  if (e->end > w->prev_end)
    w->prev_end = e->end;
  return 0;
}

int main(void)
{
  uintptr_t target = (uintptr_t)&main;
  struct tramp_block b;
  const char *why = NULL;

  if (arch_near_reachable(0x10000, 0x10000 + ((uintptr_t)3 << 30), CHUNK)) {
    /* i386: a rel32 reaches everywhere, so any chunk serves */
    CHECK_EQ_LONG(tramp_reserve(target, 1, 64, &b, &why), 0);
    tramp_commit(&b, 0);
    return check_report("hook.pool_hidden");
  }

  /* Everything within reach, and a little beyond it (a gap end just past
   * the search radius is still within reach of the jump). */
  uintptr_t margin = arch_near_search_radius() + ((uintptr_t)4 << 20);
  uintptr_t base = target & ~(CHUNK - 1);
  win.lo = base > margin + 0x10000 ? base - margin : 0x10000;
  win.hi = UINTPTR_MAX - base > margin ? base + margin : UINTPTR_MAX & ~(CHUNK - 1);
  CHECK(proc_maps_for_each(collect, &win) == 0);
  if (win.prev_end < win.hi && win.ngaps < 4096) {
    win.gaps[win.ngaps][0] = (win.prev_end > win.lo ? win.prev_end + CHUNK - 1 : win.lo) & ~(CHUNK - 1);
    win.gaps[win.ngaps][1] = win.hi;
    win.ngaps++;
  }
  for (int i = 0; i < win.ngaps; i++)
    reserve(win.gaps[i][0], win.gaps[i][1]);
  CHECK(npieces > 0);
  tramp_pool_hide((const uintptr_t(*)[2])pieces, npieces);

  /* No free address within reach: a clean failure with its reason. */
  errno = 0;
  CHECK_EQ_LONG(tramp_reserve(target, 1, 64, &b, &why), -1);
  CHECK_STR(why, "no free address space within near-jump reach");

  /* One hole inside a reservation of 16 chunks or more, where the search
   * from a gap's ends does not look: it tries an end, then 1, 3, 7, 15 ...
   * chunks in from the lower end and 2, 4, 8 ... from the upper one. */
  uintptr_t hole = 0;
  for (int i = 0; i < npieces && !hole; i++) {
    uintptr_t lo = pieces[i][0], n = (pieces[i][1] - lo) / CHUNK;
    uintptr_t k = ((n - 5) & (n - 6)) == 0 ? 6 : 5; /* n - k not a power of two */
    if (n >= 16 && arch_near_reachable(lo + k * CHUNK, target, CHUNK))
      hole = lo + k * CHUNK;
  }
  CHECK(hole != 0);
  CHECK_EQ_LONG(munmap((void *)hole, CHUNK), 0);
  why = NULL;
  int rc = tramp_reserve(target, 1, 64, &b, &why);
  if (rc != 0)
    fprintf(stderr, "near reservation with a hole at %#lx: %s\n", (unsigned long)hole, why);
  CHECK_EQ_LONG(rc, 0);
  CHECK_EQ_LONG(b.exec, hole);
  CHECK(tramp_pool_contains(hole));
  tramp_commit(&b, 0);

  tramp_pool_hide(NULL, 0);
  for (int i = 0; i < npieces; i++)
    munmap((void *)pieces[i][0], pieces[i][1] - pieces[i][0]);
  return check_report("hook.pool_hidden");
}
