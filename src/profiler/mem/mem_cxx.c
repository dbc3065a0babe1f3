/* The C++ allocation operators, for the memory profiler (igprof -mp).
 *
 * libstdc++'s operator new and delete are written over malloc and free,
 * which mem.c hooks: their allocations are counted there, with the operator
 * as the innermost frame, and they are not hooked here. Other allocators
 * (jemalloc, tcmalloc, mimalloc, a program's or a library's own operators)
 * define the operators themselves, and their new never reaches the hooked
 * malloc: those definitions are hooked here, every variant (plain, array,
 * nothrow, aligned; delete also sized), in the process's definitions at
 * start-up and in a library loaded later that brings its own.
 *
 * A replacement calls the original with the guard held, as mem.c's do, so a
 * malloc the operator makes inside (some allocators' builds do) passes
 * straight through: one operator call is one allocation, counted once, on
 * the path of the new expression with the operator's entry as its innermost
 * frame. A block made by new and released by free, or the other way round,
 * leaves MEM_LIVE all the same: there is one live table.
 *
 * A throwing operator new may leave by an exception (std::bad_alloc, or
 * whatever a new-handler throws) with the guard held. The replacements
 * therefore carry a personality routine of their own, which the unwinder
 * calls as the exception passes their frame: it gives the guard back. It
 * needs nothing from the C++ runtime (no landing pad, no libgcc_s), so it
 * works whichever unwinder the program has.
 */
#define _GNU_SOURCE
#include "mem_internal.h"

#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unwind.h>

/* Parts of the mangled names. */
#if SIZE_MAX == UINT64_MAX
#define SZ "m"
#else
#define SZ "j"
#endif
#define NOTHROW "RKSt9nothrow_t"
#define ALIGN "St11align_val_t"

/* Every replaceable operator: X(slot, index, kind, mangled name), the
 * deletes first, so a block is never recorded without its release being
 * seen. */
#define CXX_OPERATORS(X, k)                          \
  X(k, 0, delete, "_ZdlPv")                          \
  X(k, 1, delete, "_ZdaPv")                          \
  X(k, 2, delete, "_ZdlPv" SZ)                       \
  X(k, 3, delete, "_ZdaPv" SZ)                       \
  X(k, 4, delete, "_ZdlPv" NOTHROW)                  \
  X(k, 5, delete, "_ZdaPv" NOTHROW)                  \
  X(k, 6, delete, "_ZdlPv" ALIGN)                    \
  X(k, 7, delete, "_ZdaPv" ALIGN)                    \
  X(k, 8, delete, "_ZdlPv" SZ ALIGN)                 \
  X(k, 9, delete, "_ZdaPv" SZ ALIGN)                 \
  X(k, 10, delete, "_ZdlPv" ALIGN NOTHROW)           \
  X(k, 11, delete, "_ZdaPv" ALIGN NOTHROW)           \
  X(k, 12, new, "_Znw" SZ)                           \
  X(k, 13, new, "_Zna" SZ)                           \
  X(k, 14, new, "_Znw" SZ NOTHROW)                   \
  X(k, 15, new, "_Zna" SZ NOTHROW)                   \
  X(k, 16, new, "_Znw" SZ ALIGN)                     \
  X(k, 17, new, "_Zna" SZ ALIGN)                     \
  X(k, 18, new, "_Znw" SZ ALIGN NOTHROW)             \
  X(k, 19, new, "_Zna" SZ ALIGN NOTHROW)
#define OP_COUNT 20

#define OP_NAME(k, i, kind, name) name,
static const char *const op_names[OP_COUNT] = {CXX_OPERATORS(OP_NAME, 0)};

/* Every operator's arguments are integers or pointers (size, pointer,
 * alignment, a nothrow_t reference): one type with three of them forwards
 * each variant's own, whatever it takes. */
typedef void *(*op_fn)(uintptr_t, uintptr_t, uintptr_t);

/* One hooked definition. Slot 0 holds the process's definitions; a library
 * loaded later that brings operators of its own gets the next slot. */
struct op_hook {
  op_fn chain;              /* runs the original */
  uintptr_t entry;          /* the definition's address: the innermost frame */
  size_t (*usable)(void *); /* its allocator's malloc_usable_size, for -mo */
};

#define OP_SLOTS 4
static struct op_hook hooks[OP_SLOTS][OP_COUNT];
static int slots_used;

/* ---------------------------------------------------------------- */
/* Leaving by an exception                                           */
/* ---------------------------------------------------------------- */

/* Set while a replacement that took the guard runs its original. */
static __thread int unwind_owner __attribute__((tls_model("initial-exec")));

#if defined(__arm__)
/* ARM EHABI: the personality routine gets the unwinder's state and unwinds
 * the frame itself, by the opcodes the assembler put after the routine's
 * address in the function's table entry (__gnu_unwind_frame, libgcc's). */
__attribute__((used)) static _Unwind_Reason_Code op_unwinding(_Unwind_State state, _Unwind_Control_Block *ucbp,
                                                             struct _Unwind_Context *context)
{
  if ((state & _US_ACTION_MASK) == _US_UNWIND_FRAME_STARTING && unwind_owner) {
    unwind_owner = 0;
    igprof_leave();
  }
  if (__gnu_unwind_frame(ucbp, context) != _URC_OK) return _URC_FAILURE;
  return _URC_CONTINUE_UNWIND;
}
#else
/* The personality routine of every replacement: called by the unwinder for
 * a replacement's frame when an exception passes it (twice: to search, then
 * to clean up). Nothing here catches; the cleanup gives the guard back. */
__attribute__((used)) static _Unwind_Reason_Code op_unwinding(int version, _Unwind_Action actions,
                                                             uint64_t exception_class, /* _Unwind_Exception_Class */
                                                             struct _Unwind_Exception *exception,
                                                             struct _Unwind_Context *context)
{
  (void) version, (void) exception_class, (void) exception, (void) context;
  if ((actions & _UA_CLEANUP_PHASE) && unwind_owner) {
    unwind_owner = 0;
    igprof_leave();
  }
  return _URC_CONTINUE_UNWIND;
}
#endif

/* Gives the enclosing function op_unwinding as its personality (DWARF
 * unwind tables; encoding 0x1b: PC-relative, signed 4 bytes, resolved when
 * libigprof.so is linked; on ARM the EHABI table entry's directive, the
 * runtime being built with -funwind-tables). */
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
#define OP_PERSONALITY() __asm__(".cfi_personality 0x1b, op_unwinding")
#define OP_THROWING_HOOKED 1
#elif defined(__arm__)
#define OP_PERSONALITY() __asm__(".personality op_unwinding")
#define OP_THROWING_HOOKED 1
#else
#define OP_PERSONALITY() ((void) 0)
#define OP_THROWING_HOOKED 0
#endif

/* ---------------------------------------------------------------- */
/* Replacements                                                      */
/* ---------------------------------------------------------------- */

static inline void *op_new_call(struct op_hook *h, void *caller, const void *frame, uintptr_t size,
                                uintptr_t b, uintptr_t c)
{
  op_fn original = IGPROF_MEM_CHAIN(h->chain);
  if (!IGPROF_MEM_ACTIVE() || !igprof_enter()) return original(size, b, c);
  unwind_owner = 1;
  void *p = IGPROF_MEM_THROUGH(original(size, b, c));
  unwind_owner = 0;
  if (p) {
    int saved = errno; /* as the original left it */
    igprof_mem_record_operator(p, size, caller, frame, h->entry, h->usable);
    errno = saved;
  }
  igprof_leave();
  return p;
}

static inline void *op_delete_call(struct op_hook *h, void *caller, const void *frame, uintptr_t ptr,
                                   uintptr_t b, uintptr_t c)
{
  (void) frame;
  op_fn original = IGPROF_MEM_CHAIN(h->chain);
  if (!ptr || !IGPROF_MEM_ACTIVE() || !igprof_enter()) {
    original(ptr, b, c);
    return NULL;
  }
  struct igprof_mem_release r;
  igprof_mem_release_begin(&r, (void *) ptr, caller);
  IGPROF_MEM_THROUGH_VOID(original(ptr, b, c));
  igprof_mem_release_end(&r);
  igprof_leave();
  return NULL;
}

/* One replacement per slot and operator (the patched entry jumps to it, so
 * __builtin_return_address(0) is the new or delete expression's). */
#define RA __builtin_return_address(0)
#define FA __builtin_frame_address(0)
#define OP_REPLACEMENT(k, i, kind, name)                                         \
  static void *op_##kind##_##k##_##i(uintptr_t a, uintptr_t b, uintptr_t c)     \
  {                                                                              \
    OP_PERSONALITY();                                                            \
    return op_##kind##_call(&hooks[k][i], RA, FA, a, b, c);                      \
  }
CXX_OPERATORS(OP_REPLACEMENT, 0)
CXX_OPERATORS(OP_REPLACEMENT, 1)
CXX_OPERATORS(OP_REPLACEMENT, 2)
CXX_OPERATORS(OP_REPLACEMENT, 3)

#define OP_ADDRESS(k, i, kind, name) op_##kind##_##k##_##i,
static const op_fn replacements[OP_SLOTS][OP_COUNT] = {
  {CXX_OPERATORS(OP_ADDRESS, 0)},
  {CXX_OPERATORS(OP_ADDRESS, 1)},
  {CXX_OPERATORS(OP_ADDRESS, 2)},
  {CXX_OPERATORS(OP_ADDRESS, 3)},
};

/* ---------------------------------------------------------------- */
/* Finding and hooking the definitions                               */
/* ---------------------------------------------------------------- */

static int throwing(int i)
{
  return op_names[i][2] == 'n' && !strstr(op_names[i], NOTHROW);
}

struct module_query {
  uintptr_t address;
  const char *name;
};

static int module_containing(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  struct module_query *q = arg;
  uintptr_t lo, hi;
  igprof_module_span(info, &lo, &hi);
  if (q->address < lo || q->address >= hi) return 0;
  q->name = info->dlpi_name ? info->dlpi_name : "";
  return 1;
}

/* The dl_iterate_phdr name of the module defining `address` ("" for the
 * executable), or NULL. */
static const char *module_of(const void *address)
{
  struct module_query q = {(uintptr_t) address, NULL};
  dl_iterate_phdr(module_containing, &q);
  return q.name;
}

/* The C++ runtimes whose operators are written over malloc and free: their
 * allocations are counted there already. (An executable linked with
 * -static-libstdc++ carries libstdc++'s operators: they are hooked, and
 * counted once all the same.) */
static int malloc_backed_runtime(const char *path)
{
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  return strncmp(base, "libstdc++.so", 12) == 0 || strncmp(base, "libc++.so", 9) == 0 ||
         strncmp(base, "libc++abi.so", 12) == 0;
}

/* Two code addresses of one function (ARM32: with or without the Thumb
 * bit). */
static int same_code(uintptr_t a, uintptr_t b)
{
#if defined(__arm__)
  return (a | 1) == (b | 1);
#else
  return a == b;
#endif
}

/* Hook the definitions found[] with slot k's replacements. Each hook's
 * entry and allocator are in place before it goes live; its chain follows
 * (IGPROF_MEM_CHAIN waits for it). */
static void install(int k, void *const found[OP_COUNT], const size_t sizes[OP_COUNT])
{
  for (int i = 0; i < OP_COUNT; ++i) {
    if (!found[i] || igprof_hook_is_installed(found[i])) continue; /* an alias of one hooked */
    /* An operator that is one jump to another one hooked here (jemalloc's
     * new[] on ARM32: `b.n operator new`, 2 bytes, shorter than any patch)
     * is counted by that one's hook: calls to it run that code. */
    int tail = -1;
    uintptr_t to = (uintptr_t) hook_jump_target(found[i], sizes[i]);
    for (int j = 0; to && j < OP_COUNT && tail < 0; ++j)
      if (j != i && found[j] && same_code(to, (uintptr_t) found[j])) tail = j;
    if (tail >= 0) {
      igprof_debug("mem: %s jumps to %s: counted by its hook", op_names[i], op_names[tail]);
      continue;
    }
    struct op_hook *h = &hooks[k][i];
    const char *module = module_of(found[i]);
    h->entry = (uintptr_t) found[i];
    h->usable = module ? (size_t (*)(void *)) hook_lookup_exported("malloc_usable_size", module, NULL) : NULL;
    void *chain = igprof_hook_at("mem", op_names[i], found[i], sizes[i], (void *) replacements[k][i], 1);
    __atomic_store_n((void **) &h->chain, chain, __ATOMIC_RELEASE);
  }
}

void igprof_mem_cxx_start(void)
{
  void *found[OP_COUNT] = {NULL};
  size_t sizes[OP_COUNT] = {0};
  int any = 0;
  slots_used = 1;
  for (int i = 0; i < OP_COUNT; ++i) {
    if (!OP_THROWING_HOOKED && throwing(i)) continue;
    /* Defined nowhere (no C++ in the process): not looked up further,
     * which would read every module's file. */
    if (!hook_lookup_exported(op_names[i], NULL, NULL)) continue;
    void *f = hook_lookup(op_names[i], NULL, NULL, &sizes[i]);
    const char *module = f ? module_of(f) : NULL;
    if (!module || malloc_backed_runtime(module)) continue;
    found[i] = f;
    any = 1;
  }
  if (any) install(0, found, sizes);
}

void igprof_mem_cxx_library_loaded(const char *path)
{
  if (!slots_used || malloc_backed_runtime(path)) return;
  void *found[OP_COUNT] = {NULL};
  size_t sizes[OP_COUNT] = {0};
  int any = 0;
  for (int i = 0; i < OP_COUNT; ++i) {
    if (!OP_THROWING_HOOKED && throwing(i)) continue;
    found[i] = hook_lookup_exported(op_names[i], path, &sizes[i]);
    if (found[i] && igprof_hook_is_installed(found[i])) found[i] = NULL;
    any |= found[i] != NULL;
  }
  if (!any) return;
  if (slots_used == OP_SLOTS) {
    igprof_warn("mem: %s defines C++ allocation operators of its own, but all %d slots are taken: "
                "not profiled",
                path, OP_SLOTS);
    return;
  }
  int k = slots_used++;
  install(k, found, sizes);
  igprof_debug("mem: C++ allocation operators of %s hooked in slot %d", path, k);
}
