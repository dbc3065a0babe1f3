/* hook_lookup() takes a function's size from the dynamic symbol its hash
 * lookup found when the loader chose that same address, and asks
 * hook_function_size() (dladdr1, the file's tables, the unwind table)
 * otherwise. Both must agree for every exported function (and IFUNC) of
 * libc, libm, libstdc++ and libz, and known sizes must be non-zero.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>

#include "check.h"
#include "elf_symbols.h"
#include "hook.h"
#include "hook_internal.h"

struct sweep {
  const char *lib;
  unsigned long names, found, differ, sized;
};

static int sweep_symbol(const struct elf_symbol *sym, void *arg)
{
  struct sweep *s = arg;
  if ((sym->type != STT_FUNC && sym->type != STT_GNU_IFUNC) || sym->version_hidden)
    return 0;
  s->names++;
  size_t size = 0;
  void *addr = hook_lookup(sym->name, NULL, NULL, &size);
  if (!addr)
    return 0;
  s->found++;
  size_t reference = hook_function_size((uintptr_t)addr);
  if (size != reference) {
    if (s->differ++ < 10)
      fprintf(stderr, "%s: %s: hook_lookup says %zu bytes, hook_function_size %zu\n", s->lib,
              sym->name, size, reference);
  }
  s->sized += size != 0;
  return 0;
}

int main(void)
{
  const char *libs[] = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libz.so.1"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
    void *handle = dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL);
    struct link_map *lm = NULL;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
      fprintf(stderr, "cannot load %s\n", libs[i]);
      check_failures++;
      continue;
    }
    struct elf_symbols es;
    CHECK(elf_symbols_open(&es, lm->l_name, lm->l_addr) == 0);
    struct sweep s = {libs[i], 0, 0, 0, 0};
    elf_symbols_each(&es, ELF_SYMBOLS_DYNAMIC, sweep_symbol, &s);
    elf_symbols_close(&es);
    printf("%s: %lu names, %lu found, %lu with a size, %lu sizes differ\n", s.lib, s.names,
           s.found, s.sized, s.differ);
    CHECK(s.names >= 80);
    /* every exported name resolves (an earlier library may define it first) */
    CHECK_EQ_LONG(s.found, s.names);
    CHECK(s.sized * 100 >= s.found * 99);
    CHECK_EQ_LONG(s.differ, 0);
  }
  return check_report("hook.lookup_size");
}
