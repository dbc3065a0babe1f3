/* igtrace -tm: one line per malloc-family call, as it happens.
 *
 * The calls come from the memory hooks of mem.c through the allocation
 * listener (the functions are hooked once, whoever asks first), so the
 * tracer and -mp share one process and one set of hooks. Lines:
 *
 *   *** MALLOC <n> bytes => <ptr>, by <prog> [thread <tid> pid <pid>]
 *   *** CALLOC <n>x<m> bytes => <ptr>, by ...
 *   *** REALLOC <old> <n> bytes => <ptr>, by ...
 *   *** REALLOCARRAY <old> <n>x<m> bytes => <ptr>, by ...
 *   *** MEMALIGN <align> <n> bytes => <ptr>, by ...          (also POSIX_MEMALIGN,
 *   *** VALLOC <n> bytes => <ptr>, by ...                     ALIGNED_ALLOC; PVALLOC)
 *   *** FREE <ptr>, by ...
 *
 * A failed call shows "=> 0x0". free(NULL) does nothing and is not shown.
 * A FREE line is written before the block is released, so no other
 * thread's MALLOC of the same address can come before it in the trace.
 */
#include "trace.h"

static const char *const call_names[] = {
  [IGPROF_ALLOC_MALLOC] = "MALLOC",
  [IGPROF_ALLOC_CALLOC] = "CALLOC",
  [IGPROF_ALLOC_REALLOC] = "REALLOC",
  [IGPROF_ALLOC_REALLOCARRAY] = "REALLOCARRAY",
  [IGPROF_ALLOC_MEMALIGN] = "MEMALIGN",
  [IGPROF_ALLOC_POSIX_MEMALIGN] = "POSIX_MEMALIGN",
  [IGPROF_ALLOC_ALIGNED_ALLOC] = "ALIGNED_ALLOC",
  [IGPROF_ALLOC_VALLOC] = "VALLOC",
  [IGPROF_ALLOC_PVALLOC] = "PVALLOC",
  [IGPROF_ALLOC_FREE] = "FREE",
};

/* The filter's TYPE for a call: its name in lower case, as in "-r free". */
static const char *const call_types[] = {
  [IGPROF_ALLOC_MALLOC] = "malloc",
  [IGPROF_ALLOC_CALLOC] = "calloc",
  [IGPROF_ALLOC_REALLOC] = "realloc",
  [IGPROF_ALLOC_REALLOCARRAY] = "reallocarray",
  [IGPROF_ALLOC_MEMALIGN] = "memalign",
  [IGPROF_ALLOC_POSIX_MEMALIGN] = "posix_memalign",
  [IGPROF_ALLOC_ALIGNED_ALLOC] = "aligned_alloc",
  [IGPROF_ALLOC_VALLOC] = "valloc",
  [IGPROF_ALLOC_PVALLOC] = "pvalloc",
  [IGPROF_ALLOC_FREE] = "free",
};

static void describe(struct trace_event *e, const struct igprof_alloc_call *c)
{
  trace_event_printf(e, "*** %s ", call_names[c->fn]);
  switch (c->fn) {
  case IGPROF_ALLOC_FREE:
    trace_event_printf(e, "%p", c->old);
    return;
  case IGPROF_ALLOC_CALLOC:
    trace_event_printf(e, "%zux%zu bytes", c->n, c->m);
    break;
  case IGPROF_ALLOC_REALLOC:
    trace_event_printf(e, "%p %zu bytes", c->old, c->n);
    break;
  case IGPROF_ALLOC_REALLOCARRAY:
    trace_event_printf(e, "%p %zux%zu bytes", c->old, c->n, c->m);
    break;
  case IGPROF_ALLOC_MEMALIGN:
  case IGPROF_ALLOC_POSIX_MEMALIGN:
  case IGPROF_ALLOC_ALIGNED_ALLOC:
    trace_event_printf(e, "%zu %zu bytes", c->align, c->n);
    break;
  default:
    trace_event_printf(e, "%zu bytes", c->n);
    break;
  }
  trace_event_printf(e, " => %p", c->result);
}

/* Guard held (the memory hook holds it), errno saved by the caller. */
static void on_call(const struct igprof_alloc_call *c)
{
  if (trace_tls.inside) return;
  trace_tls.inside = 1;
  struct trace_event *e = trace_event_begin();
  if (e) {
    int with_stack = trace_wants_stack(trace_config.stack);
    if (with_stack) trace_stack_take(e, c->caller, 0, 0);
    if (trace_config.nfilters && trace_rejected(e, call_types[c->fn], NULL)) {
      trace_event_discard(e);
    } else {
      describe(e, c);
      trace_event_identity(e, ", ");
      trace_event_printf(e, "\n");
      /* The allocator is not locked here: the call is over (or, for free,
       * not begun), so demangling may allocate. */
      if (trace_config.stack) trace_stack_print(e, 1);
      trace_event_emit(e);
    }
  }
  trace_tls.inside = 0;
}

static const struct igprof_alloc_listener listener = {.on_call = on_call};

int trace_mem_start(void)
{
  if (igprof_mem_listen(&listener) != 0) {
    igprof_warn("trace: cannot trace malloc-family calls (hooks not installed)");
    return -1;
  }
  return 0;
}
