/* hook.prologues: hook functions compiled with -O2, -fstack-protector-all,
 * -fcf-protection=full, -pg and -pg -mfentry (prologues.c). They live in the
 * test executable and are not exported, so they are found through its
 * .symtab. For each: the live trampoline is checked against the saved
 * original bytes by the independent verifier, then the function is called
 * and both the replacement's count and the original's result are checked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "hook.h"
#include "reloc_verify.h"

#define VARIANTS(X) X(_o2) X(_ssp) X(_cet) X(_pg) X(_fentry) X(_pg_direct) X(_fentry_direct)

#define DECLARE(v)                                  \
  int pro_checksum##v(const char *s);               \
  long pro_fib##v(int n);                           \
  extern long pro_fib_entries##v;                   \
  int pro_clamp_sum##v(const int *p, int n);        \
  extern int (*pro_hidden_ptr##v)(int, int);
VARIANTS(DECLARE)

static atomic_long calls;

#define REPLACEMENTS(v)                                                                    \
  static struct hook_result h_checksum##v, h_fib##v, h_clamp##v, h_hidden##v;               \
  static int r_checksum##v(const char *s)                                                  \
  {                                                                                        \
    calls++;                                                                               \
    return ((int (*)(const char *))h_checksum##v.chain)(s);                                \
  }                                                                                        \
  static long r_fib##v(int n)                                                              \
  {                                                                                        \
    calls++;                                                                               \
    return ((long (*)(int))h_fib##v.chain)(n);                                             \
  }                                                                                        \
  static int r_clamp##v(const int *p, int n)                                               \
  {                                                                                        \
    calls++;                                                                               \
    return ((int (*)(const int *, int))h_clamp##v.chain)(p, n);                            \
  }                                                                                        \
  static int r_hidden##v(int a, int b)                                                     \
  {                                                                                        \
    calls++;                                                                               \
    return ((int (*)(int, int))h_hidden##v.chain)(a, b);                                   \
  }
VARIANTS(REPLACEMENTS)

static struct verify_forms forms;
static int kept_pads;

/* Hook `name`, then verify its trampoline against the bytes saved before. */
static void hook_and_verify(const char *name, void *replacement, struct hook_result *r)
{
  size_t size = 0;
  void *fn = hook_lookup(name, NULL, NULL, &size);
  CHECK(fn != NULL);
  if (!fn) {
    fprintf(stderr, "%s not found\n", name);
    return;
  }
  CHECK(size >= 5);
  uint8_t saved[64];
  memcpy(saved, fn, sizeof saved);
  struct hook_spec spec = {name, NULL, NULL, replacement};
  enum hook_status st = hook_install(&spec, r);
  if (st != HOOK_OK) {
    fprintf(stderr, "%s: %s: %s\n", name, hook_status_str(st), r->detail);
    check_failures++;
    return;
  }
  CHECK(r->original == fn);
  /* an endbr64 landing pad stays in place; the chain starts with its copy */
  static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  if (memcmp(saved, endbr64, 4) == 0) {
    kept_pads++;
    CHECK_EQ_LONG(r->entry_kept, 4);
    CHECK(memcmp(fn, endbr64, 4) == 0);
  } else {
    CHECK_EQ_LONG(r->entry_kept, 0);
  }
  char why[200];
  if (verify_relocation(saved, (uintptr_t)fn, r->entry_kept + r->patched_bytes, r->chain,
                        (uintptr_t)r->chain, 0,
                        &forms, why, sizeof why)) {
    fprintf(stderr, "%s: trampoline: %s\n", name, why);
    check_failures++;
  }
}

static void expect_calls(long before, long n, const char *what)
{
  if (calls - before != n) {
    fprintf(stderr, "%s: %ld replacement calls, expected %ld\n", what, calls - before, n);
    check_failures++;
  }
}

#define RUN(v)                                                                               \
  do {                                                                                       \
    const char *text = "the quick brown fox";                                                \
    int v5[5] = {1, 200, 3, 4, 5};                                                           \
    int sum = pro_checksum##v(text);                                                         \
    long fib = pro_fib##v(15);                                                               \
    int clamp = pro_clamp_sum##v(v5, 5);                                                     \
    int hidden = pro_hidden_ptr##v(6, 7);                                                    \
    hook_and_verify("pro_checksum" #v, (void *)r_checksum##v, &h_checksum##v);               \
    hook_and_verify("pro_fib" #v, (void *)r_fib##v, &h_fib##v);                              \
    hook_and_verify("pro_clamp_sum" #v, (void *)r_clamp##v, &h_clamp##v);                    \
    hook_and_verify("pro_hidden_mul" #v, (void *)r_hidden##v, &h_hidden##v);                 \
    long before = calls, entries = pro_fib_entries##v;                                       \
    CHECK_EQ_LONG(pro_checksum##v(text), sum);                                               \
    expect_calls(before, 1, "pro_checksum" #v);                                              \
    before = calls;                                                                          \
    CHECK_EQ_LONG(pro_fib##v(15), 610);                                                      \
    CHECK_EQ_LONG(fib, 610);                                                                 \
    /* every entry of the body came through the hook: fib(15) is 1973 calls  \
     * (prologues.c is built without sibling-call/tail-recursion rewriting) */ \
    expect_calls(before, 1973, "pro_fib" #v);                                                \
    CHECK_EQ_LONG(pro_fib_entries##v - entries, 1973);                                       \
    before = calls;                                                                          \
    CHECK_EQ_LONG(pro_clamp_sum##v(v5, 5), 113);                                             \
    CHECK_EQ_LONG(clamp, 113);                                                               \
    CHECK_EQ_LONG(pro_clamp_sum##v(v5, 0), -1);                                              \
    expect_calls(before, 2, "pro_clamp_sum" #v);                                             \
    before = calls;                                                                          \
    CHECK_EQ_LONG(pro_hidden_ptr##v(6, 7), 43);                                              \
    CHECK_EQ_LONG(hidden, 43);                                                               \
    expect_calls(before, 1, "pro_hidden_mul" #v);                                            \
  } while (0);

/* This executable is not PIE: taking strlen's address makes its PLT entry
 * the canonical address, which is what dlsym(RTLD_DEFAULT) returns. A lookup
 * must see through it to libc's implementation. */
static void test_canonical_plt(void)
{
  size_t (*volatile stub)(const char *) = strlen;
  CHECK(dlsym(RTLD_DEFAULT, "strlen") == (void *)stub);
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *impl = hook_lookup("strlen", NULL, NULL, NULL);
  CHECK(impl != NULL && impl != (void *)stub);
  CHECK(libc && impl == dlsym(libc, "strlen"));
}

int main(void)
{
  test_canonical_plt();
  VARIANTS(RUN)
  /* the -pg/-mfentry variants put a call in the window; -fstack-protector a
   * fs: load; every window held at least one position-independent copy */
  printf("forms: copied %lu, rip %lu, call %lu, jcc %lu, jmp %lu\n", forms.copied,
         forms.rip_operand, forms.call, forms.jcc, forms.jmp);
  CHECK(forms.call >= 4);        /* -pg -mfentry -fno-pie: call __fentry__ at the entry */
  CHECK(forms.rip_operand >= 4); /* -pg -mfentry in PIE: call [rip+__fentry__@GOT] */
  CHECK_EQ_LONG(kept_pads, 4);   /* the four -fcf-protection=full functions */
  return check_report("hook.prologues");
}
