/* Mappings and heap growth with known arguments, for trace.mmap. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
  long page = sysconf(_SC_PAGESIZE);
  void *m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *r = mremap(m, 3 * page, 5 * page, MREMAP_MAYMOVE);
  int u = munmap(r, 5 * page);
  void *bad = mmap(NULL, page, PROT_READ, MAP_PRIVATE, -1, 0); /* EBADF */
  void *grow = sbrk(8 * page);
  if (grow == (void *) -1) {
    /* The break could not grow (under qemu-user its own mappings may
     * follow it): no brk with a failed result's address. */
    printf("page %ld\nsbrk failed\n", page);
    return 3;
  }
  void *top = sbrk(0);
  void *shrink = sbrk(-8 * page);
  int b = brk(top);
  int b2 = brk(grow);
  printf("page %ld\nmmap %p\nmremap %p\nmunmap %d\nbad %p\nsbrk %p\ntop %p\nshrink %p\nbrk %d %d\n",
         page, m, r, u, bad, grow, top, shrink, b, b2);
  return 0;
}
