/* Minimal assertions for the hook tests: report file:line and the values,
 * count failures, exit non-zero at the end. */
#ifndef IGPROF_TESTS_HOOK_CHECK_H
#define IGPROF_TESTS_HOOK_CHECK_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

static int check_failures;

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);            \
      check_failures++;                                                                   \
    }                                                                                     \
  } while (0)

#define CHECK_EQ_LONG(a, b)                                                               \
  do {                                                                                    \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                       \
    if (check_a_ != check_b_) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, \
              #a, #b, check_a_, check_b_);                                                \
      check_failures++;                                                                   \
    }                                                                                     \
  } while (0)

#define CHECK_STR(a, b)                                                                   \
  do {                                                                                    \
    const char *check_a_ = (a), *check_b_ = (b);                                          \
    if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__,      \
              __LINE__, #a, #b, check_a_ ? check_a_ : "(null)",                           \
              check_b_ ? check_b_ : "(null)");                                            \
      check_failures++;                                                                   \
    }                                                                                     \
  } while (0)

/* Is /proc/self/maps the kernel's own file (procfs)? Under a user-mode
 * emulator (qemu-user, which runs the arm64 build's tests) it is a rendering
 * the emulator writes into a memfd: it answers no PROCMAP_QUERY, and its
 * mapping bounds are the host's, split wherever the emulator write-protects
 * host pages that hold translated code. */
static inline int check_maps_from_kernel(void)
{
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  struct statfs fs;
  int procfs = fd >= 0 && fstatfs(fd, &fs) == 0 && fs.f_type == 0x9fa0; /* PROC_SUPER_MAGIC */
  if (fd >= 0)
    close(fd);
  return procfs;
}

static inline int check_report(const char *name)
{
  if (check_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
