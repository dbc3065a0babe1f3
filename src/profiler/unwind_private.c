/* libunwind, loaded privately.
 *
 * libunwind.so.8 exports the _Unwind_* functions of the C++ exception ABI as
 * well as its own unw_* API. Linked into libigprof.so it would be loaded with
 * LD_PRELOAD into the global symbol scope, and a C++ runtime loaded after it
 * (a program that dlopens C++ code) would bind _Unwind_RaiseException to
 * libunwind instead of libgcc_s: the profiler would change how the program's
 * exceptions are thrown. So libigprof.so does not link libunwind; it opens it
 * RTLD_LOCAL at start-up and defines here, hidden, the unw_* entry points the
 * rest of the runtime calls, each forwarding to the real one.
 *
 * Loading happens in a constructor that runs before the runtime's own, outside
 * any signal handler; the forwarders themselves are async-signal-safe (one
 * indirect call). Without libunwind every forwarder reports failure and the
 * stack walks end where the fast walker's recipes end. */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <stddef.h>

#include "internal.h"

#define NAME_OF(sym) NAME_OF_(sym)
#define NAME_OF_(sym) #sym

static int (*real_init_local)(unw_cursor_t *, unw_context_t *);
static int (*real_init_local2)(unw_cursor_t *, unw_context_t *, int);
static int (*real_step)(unw_cursor_t *);
static int (*real_get_reg)(unw_cursor_t *, int, unw_word_t *);
static int (*real_set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
static void (*real_flush_cache)(unw_addr_space_t, unw_word_t, unw_word_t);
static int (*real_backtrace)(void **, int);
/* Read by the assembly forwarder below. */
__attribute__((used)) void *igprof_unwind_real_getcontext;

unw_addr_space_t unw_local_addr_space;

int unw_init_local(unw_cursor_t *c, unw_context_t *uc)
{
  return real_init_local ? real_init_local(c, uc) : -UNW_EUNSPEC;
}

int unw_init_local2(unw_cursor_t *c, unw_context_t *uc, int flags)
{
  return real_init_local2 ? real_init_local2(c, uc, flags) : -UNW_EUNSPEC;
}

int unw_step(unw_cursor_t *c)
{
  return real_step ? real_step(c) : -UNW_EUNSPEC;
}

int unw_get_reg(unw_cursor_t *c, int reg, unw_word_t *value)
{
  return real_get_reg ? real_get_reg(c, reg, value) : -UNW_EUNSPEC;
}

int unw_set_caching_policy(unw_addr_space_t as, unw_caching_policy_t policy)
{
  return real_set_caching_policy ? real_set_caching_policy(as, policy) : -UNW_EUNSPEC;
}

void unw_flush_cache(unw_addr_space_t as, unw_word_t lo, unw_word_t hi)
{
  if (real_flush_cache) real_flush_cache(as, lo, hi);
}

int unw_backtrace(void **buffer, int size)
{
  return real_backtrace ? real_backtrace(buffer, size) : 0;
}

/* unw_getcontext records its caller's registers, so its forwarder must not
 * have a frame of its own: a bare indirect jump. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl " NAME_OF(unw_tdep_getcontext) "\n"
        ".hidden " NAME_OF(unw_tdep_getcontext) "\n"
        ".type " NAME_OF(unw_tdep_getcontext) ", @function\n"
        NAME_OF(unw_tdep_getcontext) ":\n"
        "  jmp *igprof_unwind_real_getcontext(%rip)\n"
        ".size " NAME_OF(unw_tdep_getcontext) ", .-" NAME_OF(unw_tdep_getcontext) "\n");
#else
#error "unwind_private.c: no getcontext forwarder for this architecture yet"
#endif

static int unwind_getcontext_missing(unw_context_t *uc)
{
  (void) uc;
  return -1;
}

__attribute__((constructor(101))) static void unwind_load(void)
{
  igprof_unwind_real_getcontext = (void *) unwind_getcontext_missing;
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) return; /* reported by igprof_unwind_available() users */
#define LOAD(var, sym) *(void **) &var = dlsym(h, NAME_OF(sym))
  LOAD(real_init_local, unw_init_local);
  LOAD(real_init_local2, unw_init_local2);
  LOAD(real_step, unw_step);
  LOAD(real_get_reg, unw_get_reg);
  LOAD(real_set_caching_policy, unw_set_caching_policy);
  LOAD(real_flush_cache, unw_flush_cache);
  LOAD(real_backtrace, unw_backtrace);
#undef LOAD
  void *gc = dlsym(h, NAME_OF(unw_tdep_getcontext));
  if (gc) igprof_unwind_real_getcontext = gc;
  unw_addr_space_t *as = dlsym(h, NAME_OF(unw_local_addr_space));
  if (as) unw_local_addr_space = *as;
}

int igprof_unwind_available(void)
{
  return real_step != NULL && real_backtrace != NULL;
}
