/* hook.pool: trampoline memory. With memfd, each chunk has an executable view
 * (near the target, named memfd:igprof-trampolines) and a separate writable
 * one; without memfd (forced here), one private mapping is written and then
 * made read-execute. Either way, after any install no mapping of the process
 * is writable and executable at once, the patched code pages have their
 * original protection back, and the hooks call through. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "hook.h"
#include "hook_internal.h"
#include "proc_maps.h"
#include "trampoline_pool.h"

/* bodies well over the 14-byte absolute patch */
static volatile long sink;
#define FUNC(name, k)                                  \
  static __attribute__((noinline)) long name(long x)   \
  {                                                    \
    for (long i = 0; i < x; i++)                       \
      sink += i * k;                                   \
    return x * 10 + k;                                 \
  }
FUNC(single_a, 1)
FUNC(single_b, 2)
FUNC(dual_c, 3)

static struct hook_result ha, hb, hc;
static long ra(long x) { return ((long (*)(long))ha.chain)(x) + 1000; }
static long rb(long x) { return ((long (*)(long))hb.chain)(x) + 2000; }
static long rc(long x) { return ((long (*)(long))hc.chain)(x) + 3000; }

static int count_wx(const struct maps_entry *e, void *arg)
{
  if ((e->prot & PROT_WRITE) && (e->prot & PROT_EXEC)) {
    fprintf(stderr, "writable and executable: %lx-%lx %s\n", (unsigned long)e->start,
            (unsigned long)e->end, e->path);
    ++*(int *)arg;
  }
  return 0;
}

static int writable_and_executable(void)
{
  int n = 0;
  CHECK(proc_maps_for_each(count_wx, &n) == 0);
  return n;
}

static void install(void *fn, void *repl, struct hook_result *r)
{
  enum hook_status st = hook_install_at(fn, hook_function_size((uintptr_t)fn), repl, r);
  if (st != HOOK_OK)
    fprintf(stderr, "install: %s: %s\n", hook_status_str(st), r->detail);
  CHECK_EQ_LONG(st, HOOK_OK);
}

int main(void)
{
  char path[128];
  long (*volatile a)(long) = single_a, (*volatile b)(long) = single_b, (*volatile c)(long) = dual_c;
  CHECK_EQ_LONG(writable_and_executable(), 0);
  int code_prot = proc_maps_protection((uintptr_t)single_a, NULL, 0);

  /* no memfd: the first install maps a chunk, the second reuses it */
  tramp_pool_single_view(1);
  install((void *)single_a, (void *)ra, &ha);
  install((void *)single_b, (void *)rb, &hb);
  tramp_pool_single_view(0);
  CHECK(proc_maps_protection((uintptr_t)ha.trampoline, path, sizeof path) == (PROT_READ | PROT_EXEC));
  CHECK_STR(path, "");
  CHECK((uintptr_t)hb.trampoline - (uintptr_t)ha.trampoline < 64 * 1024);
  CHECK_EQ_LONG(writable_and_executable(), 0);
  CHECK_EQ_LONG(a(4), 1041);
  CHECK_EQ_LONG(b(4), 2042);

  /* memfd: a chunk placed away from the single-view one */
  tramp_pool_refuse_near(1);
  install((void *)dual_c, (void *)rc, &hc);
  tramp_pool_refuse_near(0);
  CHECK(proc_maps_protection((uintptr_t)hc.trampoline, path, sizeof path) == (PROT_READ | PROT_EXEC));
  CHECK(strstr(path, "memfd:igprof-trampolines") != NULL);
  CHECK_EQ_LONG(writable_and_executable(), 0);
  CHECK_EQ_LONG(c(4), 3043);

  /* the patched pages got their protection back */
  CHECK_EQ_LONG(proc_maps_protection((uintptr_t)single_a, NULL, 0), code_prot);
  CHECK_EQ_LONG(proc_maps_protection((uintptr_t)dual_c, NULL, 0), code_prot);
  return check_report("hook.pool");
}
