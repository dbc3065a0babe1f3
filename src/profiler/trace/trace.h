/* The tracer (igtrace): what its parts share inside libigprof.so.
 *
 * The tracer is one module ("trace") of the runtime. It is configured from
 * $IGTRACE (trace.c), gets malloc-family calls from the memory hooks through
 * the allocation listener (trace_mem.c), hooks the mapping calls
 * (trace_mmap.c) and __cxa_throw (trace_throw.c) itself, formats each event
 * into one buffer (trace_output.c) with an optional symbolised stack
 * (trace_stack.c), and writes it with one write(2).
 *
 * Everything runs with the re-entrancy guard held and allocates nothing from
 * libc, except __cxa_demangle (trace_stack.c explains when it may run).
 */
#ifndef IGPROF_TRACE_H
#define IGPROF_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define TRACE_MAX_FILTERS 32
#define TRACE_FILTER_TEXT 256

/* -r TYPE:FUNCTION:LIBRARY; an empty field matches nothing. */
struct trace_filter {
  char type[TRACE_FILTER_TEXT];
  char function[TRACE_FILTER_TEXT];
  char library[TRACE_FILTER_TEXT];
};

struct trace_config {
  int mem, mmap, throws; /* event classes: -tm, -tmm, -tt */
  int demangle;          /* -D */
  int stack;             /* --stack: stacks on -tm/-tmm lines too */
  char output[IGPROF_PATH_MAX]; /* -o FILE as given, "" = a dup of fd 2 */
  char target[256];      /* -t NAME, "" = every process */
  struct trace_filter filters[TRACE_MAX_FILTERS];
  int nfilters;
  int functions_filtered; /* some filter has a FUNCTION or LIBRARY part */
};

extern struct trace_config trace_config;

/* Per-thread state of the tracer, initial-exec TLS like the guard. */
struct trace_thread {
  int inside;  /* a tracer hook is running in this thread: nested calls pass through */
  int walking; /* inside the fork gate of trace_stack.c */
  pid_t tid;   /* cached gettid(); 0 = not known yet */
};
extern __thread struct trace_thread trace_tls __attribute__((tls_model("initial-exec")));

/* ---------------------------------------------------------------- */
/* Output (trace_output.c)                                           */
/* ---------------------------------------------------------------- */

/* One event being formatted: text, then the frames area used by the stack
 * formatter. Taken from a pool, so a thread that exits leaves nothing. */
struct trace_event {
  struct trace_event *next_free;
  char *text;
  size_t len, cap;
  int overflow;        /* text was cut */
  int resolved;        /* trace_stack_resolve filled the scratch area */
  char *scratch;       /* trace_stack.c's working area */
  size_t scratch_cap;
};

int trace_output_open(void);     /* at start and in a forked child; 0 or -1 */
void trace_output_fork_child(void);

struct trace_event *trace_event_begin(void); /* NULL if no memory */
void trace_event_printf(struct trace_event *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "<lead>by <prog> [thread <tid> pid <pid>]"; lead is ", " on event lines. */
void trace_event_identity(struct trace_event *e, const char *lead);
/* Write the event with one write(2) (retrying short writes under the
 * output lock) and give the buffer back. */
void trace_event_emit(struct trace_event *e);
void trace_event_discard(struct trace_event *e);

/* ---------------------------------------------------------------- */
/* Stacks and filters (trace_stack.c)                                */
/* ---------------------------------------------------------------- */

/* Look up what the stack printer needs: at start-up (NULL), or in a library
 * just loaded that brought the C++ runtime. */
void trace_stack_init(const char *library);

void trace_stack_fork_child(void);

/* Walk the stack from a hook - frame 0 is in the function that called the
 * hooked one - and resolve every frame (and `extra`, e.g. a destructor, if
 * not 0) into e's scratch area, for filtering and printing. `in_malloc`:
 * the event comes from inside libc's allocator (which may hold an arena
 * lock), so it must not wait for a fork in progress. Returns 0, or -1 if no
 * stack was taken (a fork was under way, or no memory). */
int trace_stack_take(struct trace_event *e, void *caller, uintptr_t extra, int in_malloc);

/* Around fork: no thread may be walking or reading the loader's module
 * list while the process forks (the child would inherit the loader's lock
 * held by a thread it does not have). */
void trace_stack_fork_prepare(void);
void trace_stack_fork_parent(void);

/* Is the event rejected by a -r filter? `type` is the event's type text
 * (exception type or call name); frames are those resolved into e. */
int trace_rejected(struct trace_event *e, const char *type, const char *type2);

/* Append "  N: 0xADDR sym + 0xOFF [lib + 0xOFF]" lines for the resolved
 * frames; `may_demangle` is 0 when libc's allocator may be locked by this
 * thread (an event inside malloc), so __cxa_demangle must not run. */
void trace_stack_print(struct trace_event *e, int may_demangle);

/* The name of the resolved extra address, or NULL. */
const char *trace_extra_name(struct trace_event *e);

/* Demangle `name` into out (cap bytes) with __cxa_demangle under the guard;
 * copies name unchanged if it cannot. */
void trace_demangle(const char *name, char *out, size_t cap);

/* Does the event need a stack walk (printing it or evaluating filters)? */
static inline int trace_wants_stack(int print)
{
  return print || trace_config.functions_filtered;
}

/* ---------------------------------------------------------------- */
/* Event sources                                                     */
/* ---------------------------------------------------------------- */

int trace_mem_start(void);
int trace_mmap_start(void);
int trace_throw_start(void);
void trace_throw_library_loaded(const char *path);

#endif
