/* The runtime's state and the services every part of it uses: the
 * per-thread state, the configuration, the module registry, the
 * environment without libc's getenv, hooks with status reporting. It calls
 * no other part of the runtime (start.c starts them all).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "walk.h" /* enum walk_method, the default */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread struct igprof_thread igprof_tls __attribute__((tls_model("initial-exec")));
struct igprof_config igprof_config = {.depth = IGPROF_DEPTH_DEFAULT, .unwind_method = WALK_FAST};
struct igprof_state igprof_state;
_Atomic int igprof_threaded;

void igprof_note_threads(void) { atomic_store(&igprof_threaded, 1); }

/* Hidden here makes the linker-made section bounds hidden in the library. */
extern struct igprof_module *const __start_igprof_modules[] __attribute__((weak, visibility("hidden")));
extern struct igprof_module *const __stop_igprof_modules[] __attribute__((weak, visibility("hidden")));

struct igprof_module *const *igprof_modules_begin(void) { return __start_igprof_modules; }
struct igprof_module *const *igprof_modules_end(void) { return __stop_igprof_modules; }

extern char **environ;

const char *igprof_getenv(const char *name)
{
  size_t n = strlen(name);
  for (char **e = environ; e && *e; ++e)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

int igprof_is_own_process(void)
{
  return (pid_t) syscall(SYS_getpid) == igprof_state.pid;
}

/* ---------------------------------------------------------------- */
/* Hooks with status reporting                                       */
/* ---------------------------------------------------------------- */

#define MAX_OWN_HOOKS 256 /* the start-up set, 20 C++ operators per allocator, and libraries loaded later */
static struct { void *original, *chain; } own_hooks[MAX_OWN_HOOKS];
static int own_hook_count;

/* Report a hook_install result; returns the chain or NULL. */
static void *hook_outcome(const char *module, const char *function, enum hook_status st,
                          const struct hook_result *res, int required)
{
  if (st == HOOK_ERR_ALREADY_HOOKED) {
    for (int i = 0; i < own_hook_count; ++i)
      if (own_hooks[i].original == res->original) {
        igprof_debug("%s: hook %s: ok (same function as an earlier hook)", module, function);
        return own_hooks[i].chain;
      }
  }
  if (st != HOOK_OK) {
    if (required || igprof_config.debug)
      igprof_warn("%s: cannot hook %s: %s%s%s", module, function, hook_status_str(st),
                  res->detail[0] ? ": " : "", res->detail);
    return NULL;
  }
  if (own_hook_count < MAX_OWN_HOOKS) {
    own_hooks[own_hook_count].original = res->original;
    own_hooks[own_hook_count].chain = res->chain;
    own_hook_count++;
  }
  igprof_debug("%s: hook %s: ok (%p, %zu bytes patched)", module, function, res->original,
               res->patched_bytes);
  return res->chain;
}

void *igprof_hook(const char *module, const char *function, void *replacement, int required)
{
  struct hook_spec spec = {.function = function, .replacement = replacement};
  struct hook_result res;
  /* A non-PIE executable's canonical PLT entry for a libc function is seen
   * through by the engine's global lookup: the definition in libc is hooked. */
  memset(&res, 0, sizeof res);
  return hook_outcome(module, function, hook_install(&spec, &res), &res, required);
}

void *igprof_hook_at(const char *module, const char *function, void *address, size_t size,
                     void *replacement, int required)
{
  struct hook_result res;
  memset(&res, 0, sizeof res);
  return hook_outcome(module, function, hook_install_at(address, size, replacement, &res), &res, required);
}

int igprof_hook_is_installed(void *address)
{
  for (int i = 0; i < own_hook_count; ++i)
    if (own_hooks[i].original == address) return 1;
  return 0;
}
