/* ARM32: a signal at the first instruction of a leaf whose EHABI index
 * entry the linker merged with the function before it. Both functions
 * unwind alike (vsp = r7; pop {r7}) and lie side by side, so the linker
 * keeps one entry for both; the first ends in a literal pool, the leaf
 * saves no lr (push {r7}). The entry describes the leaf's first
 * instruction as its body: taken so, the walk reads its caller's r7 slot
 * as the saved r7 and goes wrong past the caller (perf.ratio under
 * qemu-arm, where signals arrive at translated blocks' starts: burn_three
 * <- ratio <- a garbage frame, about 1 run in 40). The walk must step the
 * leaf by lr, as nothing is pushed yet, and give its caller and main.
 * The context is the one a signal there would give: the registers a probe
 * called in the leaf's place finds at its own first instruction
 * (entry_probe.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "entry_probe.h"

void me_first(void);
void me_leaf(void);
__asm__(".text\n.syntax unified\n.thumb\n.balign 4\n"
        ".globl me_first\n.type me_first, %function\n.thumb_func\nme_first:\n"
        ".fnstart\n.save {r7}\n  push {r7}\n.setfp r7, sp, #0\n  add r7, sp, #0\n"
        "  ldr r0, 1f\n  mov sp, r7\n  pop {r7}\n  bx lr\n.balign 4\n1: .word 0x6f722f3b\n"
        ".fnend\n.size me_first, . - me_first\n"
        ".globl me_leaf\n.type me_leaf, %function\n.thumb_func\nme_leaf:\n"
        ".fnstart\n.save {r7}\n  push {r7}\n.setfp r7, sp, #0\n  add r7, sp, #0\n"
        "  mov sp, r7\n  pop {r7}\n  bx lr\n"
        ".fnend\n.size me_leaf, . - me_leaf\n");

#define MAX 64
static uintptr_t pcs[MAX];
static int n;

/* The walk from the context a signal at me_leaf's first instruction would
 * give (entry_probe.h, called in the leaf's place). */
__attribute__((noinline)) static void probe_walk(void) { n = walk_from_entry((uintptr_t)me_leaf, pcs, MAX); }

void (*volatile leaf)(void);

/* Keeps r7 as a frame pointer, as the callers of perf.ratio's burners do. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) int me_caller(int x)
{
  volatile int local[4] = {x, x + 1, x + 2, x + 3};
  leaf();
  return local[x & 3];
}

static const char *name_of(uintptr_t pc)
{
  Dl_info info;
  if (!dladdr((void *)(pc | 1), &info) || !info.dli_sname)
    return "?";
  return info.dli_sname;
}

/* The start of the index entry that covers pc in the main program. */
static uintptr_t entry_start;
static int find_entry(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  uintptr_t pc = (uintptr_t)arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_ARM_EXIDX)
      continue;
    const uint32_t *idx = (const uint32_t *)(info->dlpi_addr + ph->p_vaddr);
    size_t count = ph->p_memsz / 8;
    for (size_t k = 0; k < count; k++) {
      int32_t off = (int32_t)(idx[2 * k] << 1) >> 1;
      uintptr_t start = (uintptr_t)&idx[2 * k] + (uintptr_t)(intptr_t)off;
      if (start <= pc && start > entry_start)
        entry_start = start;
    }
  }
  return entry_start != 0;
}

int main(void)
{
  int failures = 0;
  igprof_walk_fast_init();
  uintptr_t first = (uintptr_t)me_first & ~(uintptr_t)1, at = (uintptr_t)me_leaf & ~(uintptr_t)1;
  dl_iterate_phdr(find_entry, (void *)at);
  if (entry_start != first) {
    printf("FAIL: me_leaf (%#lx) is covered by the entry starting at %#lx, not by me_first's (%#lx): the "
           "linker did not merge the two entries, so this test shows nothing\n",
           (unsigned long)at, (unsigned long)entry_start, (unsigned long)first);
    return 1;
  }
  printf("me_leaf at %#lx lies in me_first's index entry (%#lx)\n", (unsigned long)at, (unsigned long)first);
  entry_regs[10] = (uintptr_t)probe_walk;
  leaf = entry_probe;
  me_caller(1);
  const char *want[] = {"me_leaf", "me_caller", "main"};
  for (int i = 0; i < 3; i++) {
    const char *got = i < n ? name_of(pcs[i]) : "(none)";
    if (strcmp(got, want[i]) != 0) {
      printf("FAIL: frame %d is %s (%#lx), expected %s\n", i, got, i < n ? (unsigned long)pcs[i] : 0UL, want[i]);
      failures++;
    }
  }
  if (n > 0 && pcs[0] != at) {
    printf("FAIL: frame 0 is %#lx, expected me_leaf's first instruction %#lx\n", (unsigned long)pcs[0],
           (unsigned long)at);
    failures++;
  }
  for (int i = 0; i < n; i++)
    printf("  [%d] %#lx %s\n", i, (unsigned long)pcs[i], name_of(pcs[i]));
  if (!failures)
    printf("ok: the walk at the leaf's first instruction gives me_leaf <- me_caller <- main\n");
  return failures != 0;
}
