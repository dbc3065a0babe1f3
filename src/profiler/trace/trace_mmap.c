/* igtrace -tmm: memory mappings and heap growth, as they happen.
 *
 *   *** MMAP addr=<a> len=<n> prot=0x<p> flags=0x<f> fd=<fd> offset=<o> => <r>, by ...
 *   *** MREMAP addr=<a> len=<n> new_len=<m> flags=0x<f> [new_addr=<b>] => <r>, by ...
 *   *** MUNMAP addr=<a> len=<n> => <rc>, by ...
 *   *** BRK addr=<a> => <rc>, by ...
 *   *** SBRK increment=<n> => <old break>, by ...
 *
 * A failed call shows "=> failed (errno N)". sbrk(0) only reads the break
 * and is not shown. On 64-bit glibc mmap64 is the same function as mmap:
 * both show as MMAP.
 *
 * Which calls are the program's: everything made while the profiler's guard
 * is clear, and, while a hook runs the program's own malloc (guard THROUGH),
 * the calls libc makes on its behalf (a large block or heap growth) - told
 * apart by the caller being libc itself. The profiler's own mappings (its arenas,
 * symbol files) come from libigprof.so, libunwind or the loader and are not
 * shown. A call made inside another tracer hook (sbrk calling brk) is not
 * shown twice.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);
static int (*real_munmap)(void *, size_t);
static int (*real_brk)(void *);
static void *(*real_sbrk)(intptr_t);

static uintptr_t libc_lo, libc_hi;

#define ACTIVE() IGPROF_LIKELY(atomic_load_explicit(&igprof_state.active, memory_order_relaxed))

/* Should this call be traced? Sets *entered if this hook took the guard. */
static int trace_begin(void *caller, int *entered)
{
  *entered = 0;
  if (!ACTIVE() || trace_tls.inside) return 0;
  *entered = igprof_enter();
  /* Guard held: traced only when a hook is running the program's call
   * (THROUGH) and libc makes this one inside it; the profiler's own work
   * (BUSY: a new thread's setup asking libc for its stack bounds) is not. */
  if (!*entered && !(igprof_tls.guard == IGPROF_GUARD_THROUGH &&
                     (uintptr_t) caller >= libc_lo && (uintptr_t) caller < libc_hi))
    return 0;
  trace_tls.inside = 1;
  return 1;
}

static void trace_end(int entered)
{
  trace_tls.inside = 0;
  if (entered) igprof_leave();
}

/* Write one mapping event; `what` is its text up to the " => ...".
 * `in_malloc`: made by libc inside a malloc-family call (see trace_begin). */
static void report(void *caller, const char *type, const char *what, int in_malloc)
{
  struct trace_event *e = trace_event_begin();
  if (!e) return;
  if (trace_wants_stack(trace_config.stack)) trace_stack_take(e, caller, 0, in_malloc);
  if (trace_config.nfilters && trace_rejected(e, type, NULL)) {
    trace_event_discard(e);
    return;
  }
  trace_event_printf(e, "%s", what);
  trace_event_identity(e, ", ");
  trace_event_printf(e, "\n");
  if (trace_config.stack) trace_stack_print(e, !in_malloc);
  trace_event_emit(e);
}

/* " => <pointer>" or " => failed (errno N)" */
static size_t result_ptr(char *buf, size_t cap, void *r, void *failed, int err)
{
  if (r == failed) return igprof_format(buf, cap, " => failed (errno %d)", err);
  return igprof_format(buf, cap, " => %p", r);
}

static size_t result_int(char *buf, size_t cap, int rc, int err)
{
  if (rc < 0) return igprof_format(buf, cap, " => failed (errno %d)", err);
  return igprof_format(buf, cap, " => %d", rc);
}

#define WHAT_SIZE 256

static void mmap_report(void *caller, int entered, void *addr, size_t len, int prot, int flags, int fd,
                        long long off, void *r, int saved)
{
  char what[WHAT_SIZE];
  size_t n = igprof_format(what, sizeof what, "*** MMAP addr=%p len=%zu prot=0x%x flags=0x%x fd=%d offset=%lld",
                           addr, len, (unsigned) prot, (unsigned) flags, fd, off);
  result_ptr(what + n, sizeof what - n, r, MAP_FAILED, saved);
  report(caller, "mmap", what, !entered);
}

static void *trace_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  void *caller = __builtin_return_address(0);
  int entered;
  if (IGPROF_UNLIKELY(!real_mmap)) return igprof_mmap_syscall(addr, len, prot, flags, fd, off);
  if (!trace_begin(caller, &entered)) return real_mmap(addr, len, prot, flags, fd, off);
  void *r = real_mmap(addr, len, prot, flags, fd, off);
  int saved = errno;
  mmap_report(caller, entered, addr, len, prot, flags, fd, (long long) off, r, saved);
  trace_end(entered);
  errno = saved;
  return r;
}

#if UINTPTR_MAX == 0xffffffffu
/* 32-bit glibc's mmap64 is a function of its own, with a 64-bit offset. */
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);

static void *trace_mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
  void *caller = __builtin_return_address(0);
  int entered;
  if (IGPROF_UNLIKELY(!real_mmap64)) return igprof_mmap_syscall(addr, len, prot, flags, fd, off);
  if (!trace_begin(caller, &entered)) return real_mmap64(addr, len, prot, flags, fd, off);
  void *r = real_mmap64(addr, len, prot, flags, fd, off);
  int saved = errno;
  mmap_report(caller, entered, addr, len, prot, flags, fd, (long long) off, r, saved);
  trace_end(entered);
  errno = saved;
  return r;
}
#endif

static void *trace_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
  void *caller = __builtin_return_address(0);
  int entered;
  /* The fifth argument exists only with MREMAP_FIXED. */
  if (!(flags & MREMAP_FIXED)) new_addr = NULL;
  if (!trace_begin(caller, &entered)) return real_mremap(old, old_len, new_len, flags, new_addr);
  void *r = real_mremap(old, old_len, new_len, flags, new_addr);
  int saved = errno;
  char what[WHAT_SIZE];
  size_t n = igprof_format(what, sizeof what, "*** MREMAP addr=%p len=%zu new_len=%zu flags=0x%x", old,
                           old_len, new_len, (unsigned) flags);
  if (flags & MREMAP_FIXED) n += igprof_format(what + n, sizeof what - n, " new_addr=%p", new_addr);
  result_ptr(what + n, sizeof what - n, r, MAP_FAILED, saved);
  report(caller, "mremap", what, !entered);
  trace_end(entered);
  errno = saved;
  return r;
}

static int trace_munmap(void *addr, size_t len)
{
  void *caller = __builtin_return_address(0);
  int entered;
  if (IGPROF_UNLIKELY(!real_munmap)) return (int) syscall(SYS_munmap, addr, len);
  if (!trace_begin(caller, &entered)) return real_munmap(addr, len);
  /* Told before the call: once unmapped, another thread may map the range
   * again, and its MMAP line must not come first. */
  char what[WHAT_SIZE];
  size_t n = igprof_format(what, sizeof what, "*** MUNMAP addr=%p len=%zu", addr, len);
  int rc = real_munmap(addr, len);
  int saved = errno;
  result_int(what + n, sizeof what - n, rc, saved);
  report(caller, "munmap", what, !entered);
  trace_end(entered);
  errno = saved;
  return rc;
}

static int trace_brk(void *addr)
{
  void *caller = __builtin_return_address(0);
  int entered;
  if (!trace_begin(caller, &entered)) return real_brk(addr);
  int rc = real_brk(addr);
  int saved = errno;
  char what[WHAT_SIZE];
  size_t n = igprof_format(what, sizeof what, "*** BRK addr=%p", addr);
  result_int(what + n, sizeof what - n, rc, saved);
  report(caller, "brk", what, !entered);
  trace_end(entered);
  errno = saved;
  return rc;
}

static void *trace_sbrk(intptr_t increment)
{
  void *caller = __builtin_return_address(0);
  int entered;
  if (!increment || !trace_begin(caller, &entered)) return real_sbrk(increment);
  void *r = real_sbrk(increment);
  int saved = errno;
  char what[WHAT_SIZE];
  size_t n = igprof_format(what, sizeof what, "*** SBRK increment=%lld", (long long) increment);
  result_ptr(what + n, sizeof what - n, r, (void *) -1, saved);
  report(caller, "sbrk", what, !entered);
  trace_end(entered);
  errno = saved;
  return r;
}

int trace_mmap_start(void)
{
  size_t size;
  igprof_module_span_at((uintptr_t) hook_lookup("mmap", NULL, NULL, &size), &libc_lo, &libc_hi);

  real_mmap = igprof_hook("trace", "mmap", (void *) trace_mmap, 1);
  if (!real_mmap) return -1;
#if UINTPTR_MAX == 0xffffffffu
  real_mmap64 = igprof_hook("trace", "mmap64", (void *) trace_mmap64, 1);
#else
  /* The same function as mmap on 64-bit glibc: then this returns mmap's chain. */
  if (!igprof_hook("trace", "mmap64", (void *) trace_mmap, 0))
    igprof_debug("trace: mmap64 not hooked separately");
#endif
  real_mremap = igprof_hook("trace", "mremap", (void *) trace_mremap, 1);
  if (!real_mremap) real_mremap = mremap;
  real_munmap = igprof_hook("trace", "munmap", (void *) trace_munmap, 1);
  if (!real_munmap) real_munmap = munmap;
  real_brk = igprof_hook("trace", "brk", (void *) trace_brk, 1);
  if (!real_brk) real_brk = brk;
  real_sbrk = igprof_hook("trace", "sbrk", (void *) trace_sbrk, 1);
  if (!real_sbrk) real_sbrk = sbrk;
  return 0;
}
