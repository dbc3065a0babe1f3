/* The log of patched windows (hook.h, hook_original_code): what the bytes
 * a hook overwrote were, for readers of code that must see the function as
 * its compiler wrote it (the ARM32 walker reads prologues, and -mp patches
 * the very push it looks for).
 *
 * Entries are appended under the install lock and never removed (a hook
 * stays for the process's life); the count is published with release
 * order after its entry is complete, so a reader in a signal handler sees
 * only whole entries. A forked child inherits the log with the patches. */
#include <stdatomic.h>
#include <string.h>

#include "arch.h"
#include "hook_internal.h"

#define PATCH_LOG_SIZE 1024

struct patch_entry {
  uintptr_t at;
  size_t len;
  uint8_t bytes[HOOK_PATCH_MAX];
};

static struct patch_entry patch_log[PATCH_LOG_SIZE];
static atomic_size_t patch_count;

void hook_patch_log_add(uintptr_t at, size_t len)
{
  size_t n = atomic_load_explicit(&patch_count, memory_order_relaxed);
  if (n >= PATCH_LOG_SIZE || len == 0 || len > HOOK_PATCH_MAX)
    return;
  at = arch_code_bytes(at);
  patch_log[n].at = at;
  patch_log[n].len = len;
  memcpy(patch_log[n].bytes, (const void *)at, len);
  atomic_store_explicit(&patch_count, n + 1, memory_order_release);
}

size_t hook_original_code(uintptr_t lo, uintptr_t hi, struct hook_original *out, size_t cap)
{
  size_t n = atomic_load_explicit(&patch_count, memory_order_acquire), found = 0;
  for (size_t i = 0; i < n && found < cap; i++) {
    const struct patch_entry *e = &patch_log[i];
    if (e->at < hi && e->at + e->len > lo) {
      out[found].at = e->at;
      out[found].len = e->len;
      out[found].bytes = e->bytes;
      found++;
    }
  }
  return found;
}
