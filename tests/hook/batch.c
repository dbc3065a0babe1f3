/* hook.batch: hooks installed between hook_batch_begin and hook_batch_end
 * work like single installs (the replacement runs, the chain reaches the
 * original), the mappings patched are writable only during the batch, and
 * every mapping that existed before has the same bounds and protection in
 * /proc/self/maps after the batch. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "hook.h"
#include "proc_maps.h"

static size_t (*real_strlen)(const char *);
static int (*real_abs)(int);
static uLong (*real_adler32)(uLong, const Bytef *, uInt);
static int strlen_calls, abs_calls, adler_calls;

static size_t my_strlen(const char *s) { strlen_calls++; return real_strlen(s); }
static int my_abs(int x) { abs_calls++; return real_abs(x); }
static uLong my_adler32(uLong a, const Bytef *b, uInt n) { adler_calls++; return real_adler32(a, b, n); }

/* Every mapping as "start-end prot path", to compare before and after.
 * Under an emulator (qemu-user) the bounds in /proc/self/maps are the
 * host's, cut wherever the emulator write-protected a host page of
 * translated code; what the program itself mapped is then the run of
 * adjacent entries with one protection and path, so those are joined. */
#define MAX_LINES 512
struct snapshot {
  int n;
  int join;
  uintptr_t start[MAX_LINES], end[MAX_LINES];
  int prot[MAX_LINES];
  char path[MAX_LINES][128];
  char lines[MAX_LINES][160];
};

static int record_mapping(const struct maps_entry *e, void *arg)
{
  struct snapshot *s = arg;
  int i = s->n - 1;
  if (s->join && i >= 0 && s->end[i] == e->start && s->prot[i] == e->prot &&
      strcmp(s->path[i], e->path) == 0) {
    s->end[i] = e->end;
  } else if (s->n < MAX_LINES) {
    i = s->n++;
    s->start[i] = e->start;
    s->end[i] = e->end;
    s->prot[i] = e->prot;
    snprintf(s->path[i], sizeof s->path[i], "%s", e->path);
  }
  snprintf(s->lines[i], sizeof s->lines[i], "%lx-%lx %d %s", (unsigned long)s->start[i],
           (unsigned long)s->end[i], s->prot[i], s->path[i]);
  return 0;
}

static void *install(const char *name, const char *lib, void *replacement)
{
  struct hook_spec spec = {0};
  struct hook_result res;
  spec.function = name;
  spec.library = lib;
  spec.replacement = replacement;
  enum hook_status st = hook_install(&spec, &res);
  if (st != HOOK_OK)
    fprintf(stderr, "install %s: %s: %s\n", name, hook_status_str(st), res.detail);
  CHECK_EQ_LONG(st, HOOK_OK);
  return st == HOOK_OK ? res.chain : NULL;
}

static struct snapshot before, after;

int main(void)
{
  volatile uLong seed = 1;
  adler32(seed, (const Bytef *)"x", 1); /* resolve lazy bindings before the snapshot */
  (void)strlen(getenv("PATH") ? getenv("PATH") : "");
  before.join = after.join = !check_maps_from_kernel();
  proc_maps_for_each(record_mapping, &before);
  /* The heap may grow during the batch: a library named in a hook spec is
   * opened with dlopen(RTLD_NOLOAD), and glibc's first dlopen of a library
   * loaded as a dependency builds its search list with malloc. (The kernel
   * shows no [heap] before the first brk; qemu-user shows the region it
   * reserved for the break from the start, unnamed.) */
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t heap_end = ((uintptr_t)sbrk(0) + page - 1) & ~(page - 1);

  hook_batch_begin();
  real_strlen = install("strlen", NULL, (void *)my_strlen);
  real_abs = install("abs", NULL, (void *)my_abs);
  real_adler32 = install("adler32", "libz.so.1", (void *)my_adler32);
  /* During the batch the patched code is writable. */
  uintptr_t start, end;
  CHECK(proc_maps_region((uintptr_t)abs, &start, &end, NULL, 0) & PROT_WRITE);
  hook_batch_end();

  proc_maps_for_each(record_mapping, &after);
  /* Every mapping that existed before is still there, with the same bounds
   * and protection (the trampoline pool adds new ones). */
  CHECK(before.n > 0);
  for (int i = 0; i < before.n; i++) {
    int found = before.end[i] == heap_end || strcmp(before.path[i], "[heap]") == 0;
    for (int j = 0; j < after.n && !found; j++)
      found = strcmp(after.lines[j], before.lines[i]) == 0;
    if (!found)
      fprintf(stderr, "changed by the batch: %s\n", before.lines[i]);
    CHECK(found);
  }
  CHECK(!(proc_maps_region((uintptr_t)abs, &start, &end, NULL, 0) & PROT_WRITE));
  CHECK(!(proc_maps_region((uintptr_t)adler32, &start, &end, NULL, 0) & PROT_WRITE));

  /* The hooks are live and chain to the originals. */
  const char *volatile word = "batched";
  volatile int minus = -42;
  CHECK_EQ_LONG(strlen(word), 7);
  CHECK_EQ_LONG(abs(minus), 42);
  CHECK_EQ_LONG(adler32(1, (const Bytef *)"abc", 3), 0x024d0127);
  CHECK(strlen_calls >= 1);
  CHECK_EQ_LONG(abs_calls, 1);
  CHECK_EQ_LONG(adler_calls, 1);
  return check_report("hook.batch");
}
