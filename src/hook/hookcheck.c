/* igprof-hookcheck LIB...: how much of a library can the hook engine hook?
 *
 * Every defined function exported by each library (STT_FUNC and
 * STT_GNU_IFUNC in .dynsym; an IFUNC is judged by the implementation the
 * loader selects) is hooked for real, in scratch child processes forked per
 * batch, so the tool's own process is never modified. The replacement of
 * each hook is a pass-through stub that jumps straight into the hook's own
 * chain: a hooked function keeps behaving exactly as before, and whatever
 * the child itself calls afterwards (mprotect, memcpy, read...) runs through
 * the freshly built trampolines. No function is called deliberately.
 *
 * A child that crashes names the function it was installing; that function
 * is reported as "crash" and the batch resumes after it in a new child.
 *
 * Output, per library:
 *   LIB: hookable N of M (P%)
 * where M counts distinct functions (aliases and versions of one address
 * count once) at least as long as the patch, N those hooked (or found already
 * hooked), followed by each refusal with its reason and a tally per status.
 * Exit status: 0, or 2 on bad usage / a library that cannot be loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "elf_symbols.h"
#include "hook.h"
#include "hook_internal.h"

#define BATCH 400
#define STUB_SIZE 16
/* beyond the engine's statuses: the child died while installing this one */
#define STATUS_CRASH HOOK_STATUS_COUNT

struct candidate {
  const char *name;
  uintptr_t address;
  size_t size;
  int type;
};

/* Shared with the scratch children. */
struct outcome {
  int status;
  struct hook_result result;
};

struct check {
  struct candidate *cand;
  size_t ncand, cap;
  size_t too_short;       /* functions shorter than the patch: not counted */
  void *handle;
};

static int verbose;

static int usage(FILE *f, int rc)
{
  fprintf(f,
          "usage: igprof-hookcheck [-v] LIB...\n"
          "Hooks every exported function of each library in scratch child processes\n"
          "and prints 'LIB: hookable N of M (P%%)' followed by every refusal and its\n"
          "reason. LIB is a soname (libc.so.6) or a path. -v also lists hooked functions.\n");
  return rc;
}

static int add_symbol(const struct elf_symbol *sym, void *arg)
{
  struct check *c = arg;
  if (sym->type != STT_FUNC && sym->type != STT_GNU_IFUNC)
    return 0;
  uintptr_t address = sym->address;
  size_t size = sym->size;
  if (sym->type == STT_GNU_IFUNC) {
    void *impl = sym->version ? dlvsym(c->handle, sym->name, sym->version)
                              : dlsym(c->handle, sym->name);
    if (!impl)
      return 0;
    address = (uintptr_t)impl;
    size = hook_function_size(address);
  }
  for (size_t i = 0; i < c->ncand; i++)
    if (c->cand[i].address == address)
      return 0; /* an alias or another version of a function we have */
  if (c->ncand == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 1024;
    c->cand = realloc(c->cand, c->cap * sizeof *c->cand);
    if (!c->cand) {
      perror("igprof-hookcheck");
      exit(2);
    }
  }
  c->cand[c->ncand++] = (struct candidate){sym->name, address, size, sym->type};
  return 0;
}

/* The scratch child: hook cand[from..to) with pass-through stubs, recording
 * progress in *cursor so that the parent can name the culprit of a crash. */
static void run_batch(const struct candidate *cand, size_t from, size_t to, struct outcome *out,
                      const uint8_t *stubs, volatile size_t *cursor)
{
  alarm(60); /* a child spinning on a broken patch counts as a crash */
  for (size_t i = from; i < to; i++) {
    *cursor = i;
    out[i].status = (int)hook_install_at((void *)cand[i].address, cand[i].size,
                                         (void *)(stubs + i * STUB_SIZE), &out[i].result);
  }
  *cursor = to;
  _exit(0);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Hook every candidate, batch by batch, each batch in a fresh child. The
 * outcomes live in a shared mapping of *mapped bytes that the caller unmaps. */
static int hook_all(const struct check *c, struct outcome **outcomes, size_t *mapped,
                    int *crash_signal)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t out_bytes = round_up(c->ncand * sizeof(struct outcome) + sizeof(size_t), page);
  size_t stub_bytes = round_up(c->ncand * STUB_SIZE, page);
  uint8_t *region = mmap(NULL, out_bytes + stub_bytes, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED)
    return -1;
  struct outcome *out = (struct outcome *)region;
  volatile size_t *cursor = (volatile size_t *)(region + out_bytes - sizeof(size_t));
  uint8_t *stubs = region + out_bytes;
  for (size_t i = 0; i < c->ncand; i++) {
    uint8_t *stub = stubs + i * STUB_SIZE;
    /* the stub jumps to whatever chain the install stores in the outcome */
    if (!arch_write_pointer_jump(stub, (uintptr_t)stub, (uintptr_t)&out[i].result.chain))
      return -1;
    arch_write_traps(stub + 6, STUB_SIZE - 6);
  }
  if (mprotect(stubs, stub_bytes, PROT_READ | PROT_EXEC) != 0)
    return -1;
  fflush(NULL);
  size_t next = 0;
  while (next < c->ncand) {
    size_t end = next + BATCH < c->ncand ? next + BATCH : c->ncand;
    *cursor = next;
    pid_t pid = fork();
    if (pid < 0)
      return -1;
    if (pid == 0)
      run_batch(c->cand, next, end, out, stubs, cursor);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
      ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && *cursor == end) {
      next = end;
      continue;
    }
    size_t k = *cursor;
    out[k].status = STATUS_CRASH;
    crash_signal[k] = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
    next = k + 1;
  }
  *outcomes = out;
  *mapped = out_bytes + stub_bytes;
  return 0;
}

static const char *status_name(int st)
{
  return st == STATUS_CRASH ? "crash" : hook_status_str((enum hook_status)st);
}

static int check_library(const char *lib)
{
  struct check c = {0};
  c.handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!c.handle) {
    fprintf(stderr, "igprof-hookcheck: %s: cannot load: %s\n", lib, dlerror());
    return 2;
  }
  struct link_map *lm = NULL;
  if (dlinfo(c.handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name[0]) {
    fprintf(stderr, "igprof-hookcheck: %s: cannot find the loaded file\n", lib);
    return 2;
  }
  struct elf_symbols es;
  if (elf_symbols_open(&es, lm->l_name, lm->l_addr) != 0) {
    fprintf(stderr, "igprof-hookcheck: %s: cannot read %s: %s\n", lib, lm->l_name,
            strerror(errno));
    return 2;
  }
  elf_symbols_each(&es, ELF_SYMBOLS_DYNAMIC, add_symbol, &c);

  size_t patch = arch_patch_size_near();
  struct candidate *kept = c.cand;
  size_t nkept = 0;
  for (size_t i = 0; i < c.ncand; i++) {
    if (c.cand[i].size && c.cand[i].size < patch)
      c.too_short++;
    else
      kept[nkept++] = c.cand[i];
  }
  c.ncand = nkept;

  int *crash_signal = calloc(c.ncand + 1, sizeof *crash_signal);
  struct outcome *out = NULL;
  size_t mapped = 0;
  if (!crash_signal || hook_all(&c, &out, &mapped, crash_signal) != 0) {
    fprintf(stderr, "igprof-hookcheck: %s: cannot run the scratch processes: %s\n", lib,
            strerror(errno));
    return 2;
  }
  size_t hooked = 0, tally[HOOK_STATUS_COUNT + 1] = {0};
  for (size_t i = 0; i < c.ncand; i++) {
    int st = out[i].status;
    tally[st]++;
    if (st == HOOK_OK || st == HOOK_ERR_ALREADY_HOOKED) {
      hooked++;
      if (verbose)
        printf("  hooked %s (%zu bytes patched)\n", c.cand[i].name,
               out[i].result.patched_bytes);
    }
  }
  printf("%s: hookable %zu of %zu (%.1f%%)\n", lib, hooked, c.ncand,
         c.ncand ? 100.0 * (double)hooked / (double)c.ncand : 100.0);
  for (size_t i = 0; i < c.ncand; i++) {
    int st = out[i].status;
    if (st == HOOK_OK || st == HOOK_ERR_ALREADY_HOOKED)
      continue;
    printf("  refused %s (%s, %zu bytes): %s: ", c.cand[i].name,
           c.cand[i].type == STT_GNU_IFUNC ? "ifunc" : "func", c.cand[i].size, status_name(st));
    if (st == STATUS_CRASH)
      printf("scratch process died (signal %d) while installing\n", crash_signal[i]);
    else
      printf("%s\n", out[i].result.detail);
  }
  for (int st = 1; st <= HOOK_STATUS_COUNT; st++)
    if (tally[st])
      printf("  %s: %zu\n", status_name(st), tally[st]);
  printf("  (%zu functions shorter than the %zu-byte patch not counted)\n", c.too_short, patch);
  munmap(out, mapped);
  free(crash_signal);
  free(c.cand);
  elf_symbols_close(&es);
  return 0;
}

int main(int argc, char **argv)
{
  int first = 1;
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
    return usage(stdout, 0);
  if (argc > 1 && !strcmp(argv[1], "-v")) {
    verbose = 1;
    first = 2;
  }
  if (first >= argc)
    return usage(stderr, 2);
  int rc = 0;
  for (int i = first; i < argc; i++) {
    if (argv[i][0] == '-') {
      fprintf(stderr, "igprof-hookcheck: unknown option %s\n", argv[i]);
      return usage(stderr, 2);
    }
    int r = check_library(argv[i]);
    if (r > rc)
      rc = r;
  }
  return rc;
}
