/* Minimal assertions for the hook tests: report file:line and the values,
 * count failures, exit non-zero at the end. */
#ifndef IGPROF_TESTS_HOOK_CHECK_H
#define IGPROF_TESTS_HOOK_CHECK_H

#include <stdio.h>
#include <string.h>

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
