/* Whether memory is mapped, asked of the kernel without touching it: for the
 * walker's checks of addresses it is about to read and for the private
 * libunwind's address checks (src/walk/unwind_private.c). Not machine
 * knowledge, but used by every architecture's frame file.
 *
 * mincore fails with ENOMEM for an unmapped page; it is a plain system call,
 * safe in a signal handler, and answers the same under qemu-user (where
 * msync calls every page of a 32-bit guest mapped and process_vm_readv is
 * missing). The page size is the kernel's smallest (4 KiB), so no page of a
 * 16 or 64 KiB kernel is skipped. errno is put back for the interrupted
 * code. A mapped page may still be unreadable (PROT_NONE). */
#ifndef IGPROF_ARCH_PAGES_H
#define IGPROF_ARCH_PAGES_H

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 1 if every page of [addr, addr + len) is mapped, else 0 (also for an
 * empty or wrapping range). */
static inline int frame_memory_mapped(uintptr_t addr, uintptr_t len)
{
  const uintptr_t page = 4096;
  if (len == 0 || addr + len < addr)
    return 0;
  unsigned char vec[1];
  int saved = errno, ok = 1;
  for (uintptr_t p = addr & ~(page - 1); ok && p <= ((addr + len - 1) & ~(page - 1)); p += page)
    ok = syscall(SYS_mincore, (void *)p, (size_t)page, vec) == 0;
  errno = saved;
  return ok;
}

#endif
