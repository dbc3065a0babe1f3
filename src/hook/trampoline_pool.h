/* Executable memory for trampolines (internal to the hook engine).
 *
 * Chunks of CHUNK bytes are carved into many trampolines. A chunk is placed
 * within near-jump reach of the function it first serves, in a gap found in
 * /proc/self/maps and claimed with MAP_FIXED_NOREPLACE (so it can never
 * replace a mapping another thread created meanwhile, nor one the file does
 * not show, as under qemu-user; when the gaps' ends are all taken, every
 * address within reach that the file shows free is tried). Each chunk is a memfd
 * mapped twice: a read-write view the engine writes through and a
 * read-execute view the code runs from, so no page is ever writable and
 * executable and writing a new trampoline never disturbs a thread running an
 * older one in the same chunk. Where memfd is unavailable an anonymous chunk
 * is written read-write and then switched to read-execute.
 *
 * Callers hold the engine lock.
 */
#ifndef IGPROF_HOOK_TRAMPOLINE_POOL_H
#define IGPROF_HOOK_TRAMPOLINE_POOL_H

#include <stddef.h>
#include <stdint.h>

struct tramp_block {
  uint8_t *write;      /* where to write the code */
  uintptr_t exec;      /* where the same bytes execute */
  size_t size;         /* bytes reserved */
  int chunk;           /* internal */
};

/* Reserve `size` bytes for a trampoline serving `target`: within near reach
 * of it if `need_near`, else anywhere (still as close as the pool can).
 * Returns 0, or -1 if no memory can be had (reason in `why`, a static string). */
int tramp_reserve(uintptr_t target, int need_near, size_t size, struct tramp_block *out,
                  const char **why);

/* Keep the first `used` bytes of a reservation (0 gives it all back) and make
 * what was written executable. */
void tramp_commit(struct tramp_block *block, size_t used);

/* Tests only: while set, the address space within near reach of any target
 * counts as full: near reservations fail, and the others get chunks placed
 * beyond near reach. */
void tramp_pool_refuse_near(int refuse);

/* Tests only: while set, new chunks are made as if memfd_create failed (one
 * private mapping switched between writable and executable). */
void tramp_pool_single_view(int single);

/* Tests only: the gap search does not see mappings lying wholly within one of
 * the n ranges [ranges[i][0], ranges[i][1]), as under qemu-user the guest
 * does not see the emulator's own. n = 0 ends it; the array must live as
 * long as it is set. */
void tramp_pool_hide(const uintptr_t (*ranges)[2], int n);

/* Non-zero if addr lies in the executable view of a trampoline chunk. */
int tramp_pool_contains(uintptr_t addr);

#endif
