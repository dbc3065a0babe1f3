/* proc_maps_protection(): the one-mapping kernel query (PROCMAP_QUERY) and
 * the /proc/self/maps text must give the same protection and path for every
 * kind of mapping the engine may ask about, and each must be the one the
 * test set up. On a kernel from 6.11 on, the query must really be in use;
 * under qemu-user, whose /proc/self/maps is the emulator's own text, it must
 * have turned itself off.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "check.h"
#include "proc_maps.h"

struct probe {
  const char *what;
  uintptr_t addr;
  int prot;          /* expected, or -2: only compared between the two readers */
  const char *path;  /* expected path, or NULL: only compared */
};

static void compare(const struct probe *p)
{
  char path_query[64], path_text[64];
  proc_maps_use_query(1);
  int prot_query = proc_maps_protection(p->addr, path_query, sizeof path_query);
  proc_maps_use_query(0);
  int prot_text = proc_maps_protection(p->addr, path_text, sizeof path_text);
  proc_maps_use_query(1);
  if (prot_query != prot_text || strcmp(path_query, path_text) != 0) {
    fprintf(stderr, "%s: query says %d '%s', text says %d '%s'\n", p->what, prot_query,
            path_query, prot_text, path_text);
    check_failures++;
  }
  if (p->prot != -2 && prot_text != p->prot) {
    fprintf(stderr, "%s: protection %d, expected %d\n", p->what, prot_text, p->prot);
    check_failures++;
  }
  if (p->path && strcmp(path_text, p->path) != 0) {
    fprintf(stderr, "%s: path '%s', expected '%s'\n", p->what, path_text, p->path);
    check_failures++;
  }
}

/* Kernel release at least major.minor? */
static int kernel_at_least(int major, int minor)
{
  struct utsname u;
  int ma = 0, mi = 0;
  if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
    return 0;
  return ma > major || (ma == major && mi >= minor);
}

int main(void)
{
  long page = sysconf(_SC_PAGESIZE);
  /* The test's own mappings go into one reservation, between two guard
   * pages: qemu-user (which runs the arm64 build's tests) names "[heap]"
   * whatever mapping begins at the program's initial break and keeps no
   * room free there, so a mapping of the test's own must not start at it.
   * The emulator's vDSO may: then it is the one named "[heap]". */
  uintptr_t initial_break = (uintptr_t)sbrk(0);
  const char *vdso_name =
      !check_maps_from_kernel() && initial_break == getauxval(AT_SYSINFO_EHDR) ? "[heap]"
                                                                                : "[vdso]";
  uint8_t *area = mmap(NULL, (size_t)page * 7, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(area != MAP_FAILED);
  uint8_t *pages = area + page; /* read-write, read-only, no access, hole; the file at +4 */
  CHECK(mprotect(pages, (size_t)page, PROT_READ | PROT_WRITE) == 0);
  CHECK(mprotect(pages + page, (size_t)page, PROT_READ) == 0);
  /* a path longer than the 64-byte buffers: cut the same way by both */
  char long_name[200];
  snprintf(long_name, sizeof long_name, "/tmp/igprof-proc-maps-test-%d-%s", (int)getpid(),
           "a-name-long-enough-to-be-cut-in-a-sixty-four-byte-buffer");
  FILE *f = fopen(long_name, "w");
  CHECK(f != NULL);
  fputs("x", f);
  fclose(f);
  FILE *g = fopen(long_name, "r");
  void *file_map = mmap(pages + 4 * page, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_FIXED,
                        fileno(g), 0);
  CHECK(file_map != MAP_FAILED);
  /* unmapped last, so that nothing above lands in the hole */
  CHECK(munmap(pages + 3 * page, (size_t)page) == 0);
  char cut[64];
  snprintf(cut, sizeof cut, "%s", long_name);
  int on_stack = 0;
  struct probe probes[] = {
      {"libc code (malloc)", (uintptr_t)&malloc, PROT_READ | PROT_EXEC, NULL},
      {"this program's code", (uintptr_t)&main, PROT_READ | PROT_EXEC, NULL},
      {"stack", (uintptr_t)&on_stack, PROT_READ | PROT_WRITE, "[stack]"},
      {"anonymous read-write", (uintptr_t)pages, PROT_READ | PROT_WRITE, ""},
      {"anonymous read-only", (uintptr_t)(pages + page), PROT_READ, ""},
      {"anonymous no access", (uintptr_t)(pages + 2 * page), 0, ""},
      {"unmapped", (uintptr_t)(pages + 3 * page), -1, ""},
      {"file with a long path", (uintptr_t)file_map, PROT_READ, cut},
      {"vdso", (uintptr_t)getauxval(AT_SYSINFO_EHDR), -2, vdso_name},
      {"page zero", 0, -1, ""},
  };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
    if (probes[i].addr || i == sizeof probes / sizeof probes[0] - 1)
      compare(&probes[i]);
  if (!check_maps_from_kernel()) {
    /* an emulator's rendering of the file (qemu-user): the ioctl is refused
     * and the engine turns the query off for good */
    proc_maps_protection((uintptr_t)&malloc, NULL, 0);
    CHECK(proc_maps_use_query(1) == 0);
  } else if (kernel_at_least(6, 11)) {
    proc_maps_protection((uintptr_t)&malloc, NULL, 0);
    CHECK(proc_maps_use_query(1) == 1); /* the kernel answered: still on */
  }
  munmap(file_map, (size_t)page);
  fclose(g);
  unlink(long_name);
  return check_report("hook.proc_maps");
}
