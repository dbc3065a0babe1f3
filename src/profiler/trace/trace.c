/* The tracer module "trace" (igtrace): configuration from $IGTRACE and the
 * module's life cycle.
 *
 * $IGTRACE uses the $IGPROF grammar (options.h). Tokens:
 *
 *   mem  mmap  throw          event classes (-tm, -tmm, -tt)
 *   demangle  stack           -D, --stack
 *   igtrace:reject='T:F:L'    -r, repeatable
 *   igtrace:out='FILE'        -o (%p = pid)
 *   igtrace:target='NAME'     -t
 *   igtrace:debug             -d
 *
 * The first five are IgProf's own tokens, so an IgProf-style $IGTRACE
 * ("throw,mem igtrace:reject='St9bad_alloc'") reads the same here. Unknown
 * tokens are an error: tracing is then off and stderr says why.
 *
 * The tracer lives with the igprof modules in one process: $IGPROF and
 * $IGTRACE may both be set, giving a dump and a trace.
 */
#define _GNU_SOURCE
#include "trace.h"
#include "options.h"

#include <string.h>

struct trace_config trace_config;
__thread struct trace_thread trace_tls __attribute__((tls_model("initial-exec")));

static struct igprof_module trace_module;

static int copy(char *dst, size_t cap, const struct igprof_token *t, char *err, size_t errlen)
{
  if (!t->has_value || !t->value[0]) {
    igprof_format(err, errlen, "igtrace:%s needs a value", t->key);
    return -1;
  }
  if (strlen(t->value) >= cap) {
    igprof_format(err, errlen, "igtrace:%s value too long", t->key);
    return -1;
  }
  strcpy(dst, t->value);
  return 0;
}

/* "TYPE:FUNCTION:LIBRARY", each part optional, at most two ':'. */
static int add_filter(const char *spec, char *err, size_t errlen)
{
  struct trace_config *c = &trace_config;
  if (c->nfilters == TRACE_MAX_FILTERS) {
    igprof_format(err, errlen, "more than %d reject filters", TRACE_MAX_FILTERS);
    return -1;
  }
  struct trace_filter *f = &c->filters[c->nfilters];
  char *field[3] = {f->type, f->function, f->library};
  int k = 0;
  size_t n = 0;
  memset(f, 0, sizeof *f);
  for (const char *p = spec; *p; ++p) {
    if (*p == ':') {
      if (++k == 3) {
        igprof_format(err, errlen, "reject filter '%s' has more than three fields", spec);
        return -1;
      }
      n = 0;
      continue;
    }
    if (n + 1 >= TRACE_FILTER_TEXT) {
      igprof_format(err, errlen, "reject filter field too long");
      return -1;
    }
    field[k][n++] = *p;
  }
  if (!f->type[0] && !f->function[0] && !f->library[0]) {
    igprof_format(err, errlen, "reject filter '%s' is empty", spec);
    return -1;
  }
  if (f->function[0] || f->library[0]) c->functions_filtered = 1;
  c->nfilters++;
  return 0;
}

static int trace_token(void *ctx, const struct igprof_token *t, char *err, size_t errlen)
{
  struct trace_config *c = &trace_config;
  (void) ctx;
  if (!t->key[0]) {
    if (strcmp(t->module, "mem") == 0) c->mem = 1;
    else if (strcmp(t->module, "mmap") == 0) c->mmap = 1;
    else if (strcmp(t->module, "throw") == 0) c->throws = 1;
    else if (strcmp(t->module, "demangle") == 0) c->demangle = 1;
    else if (strcmp(t->module, "stack") == 0) c->stack = 1;
    else {
      igprof_format(err, errlen, "unknown token '%s'", t->module);
      return -1;
    }
    return 0;
  }
  if (strcmp(t->module, "igtrace") != 0) {
    igprof_format(err, errlen, "unknown option '%s:%s'", t->module, t->key);
    return -1;
  }
  if (strcmp(t->key, "reject") == 0) {
    if (!t->has_value) { igprof_format(err, errlen, "igtrace:reject needs a value"); return -1; }
    return add_filter(t->value, err, errlen);
  }
  if (strcmp(t->key, "out") == 0) return copy(c->output, sizeof c->output, t, err, errlen);
  if (strcmp(t->key, "target") == 0) return copy(c->target, sizeof c->target, t, err, errlen);
  if (strcmp(t->key, "debug") == 0 && !t->has_value) {
    igprof_config.debug = 1;
    return 0;
  }
  igprof_format(err, errlen, "unknown option 'igtrace:%s%s'", t->key, t->has_value ? "=..." : "");
  return -1;
}

static struct igprof_token scratch_token; /* 4 KiB: keep it off the stack */

extern char *program_invocation_name;

/* Parse $IGTRACE (the module's `configure`, before $IGPROF is read) and
 * decide whether this process traces: 1 if it does (the module is then
 * enabled), 0 if $IGTRACE is empty or -t excludes this process, -1 if it is
 * malformed (said on stderr). */
static int trace_configure(const char *env)
{
  char err[512];
  if (!*env) return 0;
  if (igprof_options_parse(env, &scratch_token, trace_token, NULL, err, sizeof err) != 0) {
    igprof_warn("bad $IGTRACE (%s), tracing disabled: %s", env, err);
    memset(&trace_config, 0, sizeof trace_config);
    return -1;
  }
  const char *name = program_invocation_name ? program_invocation_name : "";
  if (trace_config.target[0] && !strstr(name, trace_config.target)) {
    igprof_debug("not tracing %s: name does not contain '%s'", igprof_state.program, trace_config.target);
    return 0;
  }
  if (!trace_config.mem && !trace_config.mmap && !trace_config.throws) {
    igprof_debug("$IGTRACE selects no events (mem, mmap or throw): not tracing");
    return 0;
  }
  trace_module.enabled = 1;
  return 1;
}

static int trace_start(void)
{
  if (!trace_config.mem && !trace_config.mmap && !trace_config.throws) {
    igprof_warn("trace: the tracer is configured through $IGTRACE (see igtrace --help)");
    return -1;
  }
  if (trace_output_open() != 0) return -1;
  trace_stack_init(NULL);
  /* Each class is independent: one that cannot start leaves the others on. */
  int any = 0;
  if (trace_config.throws && trace_throw_start() == 0) any = 1;
  if (trace_config.mmap && trace_mmap_start() == 0) any = 1;
  if (trace_config.mem && trace_mem_start() == 0) any = 1;
  if (!any) igprof_warn("trace: no event class could be traced");
  igprof_debug("tracing %s%s%s%s%s (%d reject filters)", trace_config.mem ? "mem " : "",
               trace_config.mmap ? "mmap " : "", trace_config.throws ? "throw " : "",
               trace_config.demangle ? "demangled " : "", trace_config.stack ? "with stacks" : "",
               trace_config.nfilters);
  return any ? 0 : -1;
}

/* The tracer holds no lock across fork (trace_output.c); it only keeps its
 * stack walks out of the way (trace_stack.c). */
static void trace_fork_child(void)
{
  trace_tls.tid = 0;
  trace_output_fork_child();
  trace_stack_fork_child();
}

static struct igprof_module trace_module = {
  .name = "trace",
  .environment = "IGTRACE",
  .configure = trace_configure,
  .start = trace_start,
  .fork_prepare = trace_stack_fork_prepare,
  .fork_parent = trace_stack_fork_parent,
  .fork_child = trace_fork_child,
  .library_loaded = trace_throw_library_loaded,
};
IGPROF_MODULE(trace_module);
