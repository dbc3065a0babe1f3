/* igtrace -tt: every C++ throw, with the exception's type and the stack of
 * the throwing code. One block per throw, written with one write(2):
 *
 *   *** THROW by <prog> [thread <tid> pid <pid>]:
 *    Exception of type <type> (object 0x...)
 *    Destructor <symbol> (0x...)          ("none" for a trivial destructor)
 *    Stack:
 *       0: 0xADDR <symbol> + 0xOFF [<library> + 0xOFF]
 *       ...
 *
 * Frame 0 is the function that called __cxa_throw - the thrower itself: the
 * walk starts from the hook's return address, without skip counts. -D
 * demangles the type and the frames; -r TYPE matches the type as printed
 * and as mangled.
 *
 * `throw;` (__cxa_rethrow) gives the same block headed "*** RETHROW by ...",
 * with " Exception of type <type> (rethrown)" and no destructor line;
 * frame 0 is the function that rethrew.
 *
 * A C++ runtime loaded later by dlopen (a C++ extension of a C program) is
 * hooked when it arrives.
 *
 * The hook reports and then calls the original __cxa_throw with the guard
 * clear: the exception unwinds through this function (C, with unwind
 * tables) to the program's handler as if the hook were not there.
 */
#include "trace.h"

#include <errno.h>
#include <sched.h>

/* std::type_info's layout in the Itanium C++ ABI: vtable, then the name. */
struct cxx_type_info {
  const void *vtable;
  const char *name;
};

typedef void (*cxa_throw_fn)(void *, struct cxx_type_info *, void (*)(void *));
typedef void (*cxa_rethrow_fn)(void);
typedef struct cxx_type_info *(*current_type_fn)(void);
static _Atomic(cxa_throw_fn) real_cxa_throw;
static _Atomic(cxa_rethrow_fn) real_cxa_rethrow;
static _Atomic(current_type_fn) current_exception_type;

#define TYPE_CHARS 512

/* One block for a throw (obj set) or a rethrow (obj NULL, no destructor). */
static void report(const char *what, void *obj, struct cxx_type_info *tinfo, void (*dest)(void *),
                   void *caller)
{
  struct trace_event *e = trace_event_begin();
  if (!e) return;
  /* A leading '*' marks a type with internal linkage; it is not part of the name. */
  const char *mangled = tinfo && tinfo->name ? tinfo->name + (tinfo->name[0] == '*') : "?";
  char type[TYPE_CHARS];
  if (trace_config.demangle) trace_demangle(mangled, type, sizeof type);
  else igprof_format(type, sizeof type, "%s", mangled);

  trace_stack_take(e, caller, (uintptr_t) dest, 0);
  if (trace_config.nfilters && trace_rejected(e, type, mangled)) {
    trace_event_discard(e);
    return;
  }
  trace_event_printf(e, "*** %s", what);
  trace_event_identity(e, " ");
  if (obj) {
    trace_event_printf(e, ":\n Exception of type %s (object %p)\n", type, obj);
    const char *dname = trace_extra_name(e);
    char ddemangled[TYPE_CHARS];
    if (dname && trace_config.demangle) {
      trace_demangle(dname, ddemangled, sizeof ddemangled);
      dname = ddemangled;
    }
    if (dest) trace_event_printf(e, " Destructor %s (%p)\n", dname ? dname : "@?", (void *) dest);
    else trace_event_printf(e, " Destructor none\n");
  } else {
    trace_event_printf(e, ":\n Exception of type %s (rethrown)\n", type);
  }
  trace_event_printf(e, " Stack:\n");
  trace_stack_print(e, 1);
  trace_event_emit(e);
}

static int report_enter(void)
{
  if (!atomic_load_explicit(&igprof_state.active, memory_order_relaxed) || trace_tls.inside ||
      !igprof_enter())
    return 0;
  trace_tls.inside = 1;
  return 1;
}

static void report_leave(void)
{
  trace_tls.inside = 0;
  igprof_leave();
}

static void trace_cxa_throw(void *obj, struct cxx_type_info *tinfo, void (*dest)(void *))
{
  if (report_enter()) {
    int saved = errno;
    report("THROW", obj, tinfo, dest, __builtin_return_address(0));
    errno = saved;
    report_leave();
  }
  cxa_throw_fn original;
  /* Hooked on dlopen, the patch is live a moment before its chain is stored. */
  while (!(original = atomic_load(&real_cxa_throw))) sched_yield();
  original(obj, tinfo, dest);
  __builtin_unreachable();
}

/* `throw;` in a handler: the exception being handled goes on. */
static void trace_cxa_rethrow(void)
{
  current_type_fn type = atomic_load(&current_exception_type);
  if (type && report_enter()) {
    int saved = errno;
    report("RETHROW", NULL, type(), NULL, __builtin_return_address(0));
    errno = saved;
    report_leave();
  }
  cxa_rethrow_fn original;
  while (!(original = atomic_load(&real_cxa_rethrow))) sched_yield();
  original();
  __builtin_unreachable();
}

/* Hook `name` found through `library`, or by name in the global scope
 * (NULL: igprof_hook copes with PLT stubs of non-PIE programs there). */
static void *hook_one(const char *library, const char *name, void *replacement)
{
  size_t size;
  if (!library) return igprof_hook("trace", name, replacement, 1);
  void *fn = hook_lookup(name, NULL, library, &size);
  if (!fn || igprof_hook_is_installed(fn)) return NULL;
  return igprof_hook_at("trace", name, fn, size, replacement, 1);
}

/* Hook __cxa_throw and __cxa_rethrow of the C++ runtime found through
 * `library` (NULL: the global scope). Returns 0 if __cxa_throw is hooked. */
static int hook_runtime(const char *library)
{
  size_t size;
  atomic_store(&current_exception_type,
               (current_type_fn) hook_lookup("__cxa_current_exception_type", NULL, library, &size));
  cxa_throw_fn chain = (cxa_throw_fn) hook_one(library, "__cxa_throw", (void *) trace_cxa_throw);
  atomic_store(&real_cxa_throw, chain);
  if (chain && atomic_load(&current_exception_type))
    atomic_store(&real_cxa_rethrow, (cxa_rethrow_fn) hook_one(library, "__cxa_rethrow", (void *) trace_cxa_rethrow));
  return chain ? 0 : -1;
}

int trace_throw_start(void)
{
  size_t size;
  if (!hook_lookup("__cxa_throw", NULL, NULL, &size)) {
    /* Not a C++ program (yet): trace_throw_library_loaded hooks a C++ runtime loaded later. */
    igprof_debug("trace: no __cxa_throw in this process, throws are not traced");
    return 0;
  }
  return hook_runtime(NULL);
}

void trace_throw_library_loaded(const char *path)
{
  if (!trace_config.throws || atomic_load(&real_cxa_throw)) return;
  /* A C++ runtime arriving with (or as) this library. */
  if (hook_runtime(path) == 0) trace_stack_init(path); /* __cxa_demangle came with it */
}
