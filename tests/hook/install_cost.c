/* igprof-hook-install-cost: how long the runtime's start-up hook set takes
 * to install in a fresh process (not a test: a measuring tool for
 * docs/hook-engine.md, "Start-up cost"). Installs the 18 names libigprof.so
 * hooks under -mp (the malloc family and the safety hooks), each with a
 * pass-through stub into its own chain, and prints the total, the first
 * install (which also maps the trampoline chunk) and the mean of the rest.
 * Run it in a loop: every process installs once.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "hook.h"

static const char *const names[] = {
    "free",   "malloc", "calloc",  "realloc",  "reallocarray",   "memalign",
    "posix_memalign", "aligned_alloc", "valloc", "pvalloc", "_exit", "_Exit",
    "execve", "execveat", "pthread_create", "dlopen", "dlclose", "sigaction"};
#define NAMES (sizeof names / sizeof names[0])
#define STUB 16

static double now_us(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(void)
{
  /* stubs and results on neighbouring pages: a stub's pointer jump reaches
   * its result's chain with a rel32 */
  long page = sysconf(_SC_PAGESIZE);
  size_t result_bytes = (NAMES * sizeof(struct hook_result) + (size_t)page - 1) & ~((size_t)page - 1);
  uint8_t *stubs = mmap(NULL, (size_t)page + result_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stubs == MAP_FAILED)
    return 2;
  struct hook_result *res = (struct hook_result *)(stubs + page);
  for (size_t i = 0; i < NAMES; i++) {
    uint8_t *stub = stubs + i * STUB;
    if (!arch_write_pointer_jump(stub, (uintptr_t)stub, (uintptr_t)&res[i].chain))
      return 2;
    arch_write_traps(stub + 6, STUB - 6);
  }
  if (mprotect(stubs, (size_t)page, PROT_READ | PROT_EXEC) != 0)
    return 2;
  double t0 = now_us(), t1 = t0;
  int failed = 0;
  for (size_t i = 0; i < NAMES; i++) {
    struct hook_spec spec = {names[i], NULL, NULL, stubs + i * STUB};
    enum hook_status st = hook_install(&spec, &res[i]);
    if (st != HOOK_OK && st != HOOK_ERR_ALREADY_HOOKED) {
      fprintf(stderr, "%s: %s: %s\n", names[i], hook_status_str(st), res[i].detail);
      failed = 1;
    }
    if (i == 0)
      t1 = now_us();
  }
  double t2 = now_us();
  printf("%zu installs: total %.0f us, first %.0f us, the rest %.1f us each\n", NAMES, t2 - t0,
         t1 - t0, (t2 - t1) / (double)(NAMES - 1));
  return failed;
}
