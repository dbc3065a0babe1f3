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
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "elf_symbols.h"
#include "hook.h"
#include "hook_internal.h"
#include "trampoline_pool.h"

#define BATCH 400
#define STUB_SIZE 16
/* beyond the engine's statuses: the child died while installing this one */
#define STATUS_CRASH HOOK_STATUS_COUNT
/* ...or a batch failed only with this one and others hooked together */
#define STATUS_UNRESOLVED (HOOK_STATUS_COUNT + 1)

struct candidate {
  const char *name;
  uintptr_t address;
  size_t size;
  int type;
};

/* Shared with the scratch children. */
struct outcome {
  int status;
  int crash_signal;       /* with STATUS_CRASH: the signal, 0 for wrong results */
  int crash_in_workload;  /* with STATUS_CRASH: while calling, not installing */
  struct hook_result result;
};

struct check {
  struct candidate *cand;
  size_t ncand, cap;
  size_t too_short;       /* functions shorter than the patch: not counted */
  void *handle;
};

static int verbose;
/* --far: near trampoline memory refused, so every hook takes the far patch
 * (the absolute jump), as where no memory is free within near reach */
static int far_only;

static int usage(FILE *f, int rc)
{
  fprintf(f,
          "usage: igprof-hookcheck [-v] [--far] LIB...\n"
          "       igprof-hookcheck --help | --version\n"
          "Hooks every exported function of each library in scratch child processes\n"
          "and prints 'LIB: hookable N of M (P%%)' followed by every refusal and its\n"
          "reason. LIB is a soname (libc.so.6) or a path.\n"
          "  -v          also list the hooked functions\n"
          "  --far       refuse trampoline memory within near-jump reach, so that every\n"
          "              hook takes the absolute-jump patch\n"
          "  -h, --help  this text\n"
          "  --version   igprof's version\n");
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

/* What the scratch child runs once its hooks are in: ordinary calls into the
 * C library (and into the library under test where it has these functions),
 * all of them now going through pass-through hooks if they were hooked. The
 * parent computes the same results unhooked; any difference, or a crash,
 * means a trampoline does not behave like the original. */
struct workload {
  char text[160];
  double number;
  long values[24];
};

static int compare_longs(const void *a, const void *b)
{
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

static void run_workload(void *lib, struct workload *w)
{
  memset(w, 0, sizeof *w);
  int n = 0;
  char *block = malloc(1000);
  for (int i = 0; i < 1000; i++)
    block[i] = (char)('a' + i % 26);
  block = realloc(block, 5000);
  char *copy = calloc(1, 1001);
  memcpy(copy, block, 1000);
  w->values[n++] = (long)strlen(copy);
  w->values[n++] = memcmp(copy, block, 1000);
  w->values[n++] = strchr(copy, 'q') - copy;
  free(copy);
  free(block);
  long v[] = {31, 4, 15, 9, 26, 5, 35, 8};
  qsort(v, 8, sizeof v[0], compare_longs);
  for (int i = 0; i < 8; i++)
    w->values[n++] = v[i];
  char *end;
  w->number = strtod("6.02214076e23xyz", &end);
  w->values[n++] = end[0];
  time_t t0 = 1000000000;
  struct tm tm;
  gmtime_r(&t0, &tm);
  size_t len = strftime(w->text, 40, "%Y-%m-%d %H:%M:%S|", &tm);
  snprintf(w->text + len, sizeof w->text - len, "%d %.4f %s %lx", 42, 3.14159265, "str", 0xbeefUL);
  /* the library's own functions, when it has these */
  double (*d1)(double) = (double (*)(double))dlsym(lib, "sin");
  double (*d2)(double, double) = (double (*)(double, double))dlsym(lib, "pow");
  unsigned long (*crc)(unsigned long, const unsigned char *, unsigned) =
      (unsigned long (*)(unsigned long, const unsigned char *, unsigned))dlsym(lib, "crc32");
  /* operator new(size_t): size_t's mangling is m (unsigned long) on LP64, j (unsigned int) on ILP32 */
  void *(*new_)(size_t) = (void *(*)(size_t))dlsym(lib, sizeof(size_t) == 8 ? "_Znwm" : "_Znwj");
  void (*delete_)(void *) = (void (*)(void *))dlsym(lib, "_ZdlPv");
  if (d1)
    w->values[n++] = (long)(d1(0.5) * 1e15);
  if (d2)
    w->values[n++] = (long)(d2(2.0, 0.5) * 1e15);
  if (crc)
    w->values[n++] = (long)crc(0, (const unsigned char *)"123456789", 9);
  if (new_ && delete_) {
    void *p = new_(64);
    w->values[n++] = p != NULL;
    delete_(p);
  }
}

/* Hooked after each batch, so that the engine runs once more with the
 * batch's hooks in place (a broken mprotect or getpid shows up here). */
static __attribute__((noinline)) long probe_target(long x)
{
  long s = 0;
  for (long i = 0; i < x; i++)
    s += i * i;
  return s;
}
static struct hook_result probe_hook;
static long probe_replacement(long x) { return ((long (*)(long))probe_hook.chain)(x) + 1; }

/* The scratch child: hook cand[from..to) with pass-through stubs, recording
 * progress in *cursor so that the
 * parent can name the culprit of a crash, then run the workload. Exit status
 * 0, or 5 when the workload's results differ. */
static void run_batch(const struct check *c, size_t from, size_t to, struct outcome *out,
                      const uint8_t *stubs, volatile size_t *cursor, const struct workload *expected)
{
  alarm(60); /* a child spinning on a broken patch counts as a crash */
  for (size_t i = from; i < to; i++) {
    *cursor = i;
    out[i].status = (int)hook_install_at((void *)c->cand[i].address, c->cand[i].size,
                                         (void *)(stubs + i * STUB_SIZE), &out[i].result);
  }
  *cursor = to;
  long (*volatile probe)(long) = probe_target;
  if (hook_install_at((void *)probe_target, hook_function_size((uintptr_t)probe_target),
                      (void *)probe_replacement, &probe_hook) != HOOK_OK ||
      probe(10) != 286)
    _exit(6);
  struct workload w;
  run_workload(c->handle, &w);
  _exit(memcmp(&w, expected, sizeof w) == 0 ? 0 : 5);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct range {
  size_t from, to;
};

/* The hooks of r that installed fine fail only in combination. */
static void mark_unresolved(struct outcome *out, struct range r)
{
  for (size_t i = r.from; i < r.to; i++)
    if (out[i].status == HOOK_OK || out[i].status == HOOK_ERR_ALREADY_HOOKED)
      out[i].status = STATUS_UNRESOLVED;
}

/* Run one child over [from, to). Returns 0 when it installed everything and
 * its workload gave the expected results, 1 when it failed (died or wrong
 * results; *phase says whether it was still installing), -1 if no child
 * could be started. */
static int run_child(const struct check *c, struct range r, struct outcome *out,
                     const uint8_t *stubs, volatile size_t *cursor, const struct workload *expected,
                     int *signal, int *in_workload)
{
  *cursor = r.from;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0)
    run_batch(c, r.from, r.to, out, stubs, cursor, expected);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && *cursor == r.to)
    return 0;
  *signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  *in_workload = *cursor == r.to;
  return 1;
}

/* Hook every candidate, batch by batch, each batch in a fresh child. A batch
 * that fails (a crash while installing or while running the workload, or
 * wrong workload results) is split in halves until the single functions that
 * fail on their own are found; a hook may break the engine's next install
 * (mprotect, memcpy...) rather than itself, so the function being installed
 * when a child died is not trusted as the culprit. The outcomes live in a
 * shared mapping of *mapped bytes that the caller unmaps. */
static int hook_all(const struct check *c, struct outcome **outcomes, size_t *mapped)
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
    size_t n = arch_write_pointer_jump(stub, (uintptr_t)stub, (uintptr_t)&out[i].result.chain);
    if (!n)
      return -1;
    arch_write_traps(stub + n, STUB_SIZE - n);
  }
  if (mprotect(stubs, stub_bytes, PROT_READ | PROT_EXEC) != 0)
    return -1;
  struct workload expected;
  run_workload(c->handle, &expected);

  /* a stack of ranges; bisection adds at most one entry per level */
  enum { MAX_RANGES = 128 };
  struct range todo[MAX_RANGES];
  int ntodo = 0;
  if (c->ncand > (size_t)(MAX_RANGES - 32) * BATCH)
    return -1;
  for (size_t from = c->ncand; from > 0;) {
    size_t start = from > BATCH ? from - BATCH : 0;
    todo[ntodo++] = (struct range){start, from}; /* pushed last-first: run in order */
    from = start;
  }
  /* ranges that failed as a whole: each must end up with a culprit inside */
  struct range failed[MAX_RANGES];
  int nfailed = 0;
  while (ntodo > 0) {
    struct range r = todo[--ntodo];
    int signal = 0, in_workload = 0;
    int st = run_child(c, r, out, stubs, cursor, &expected, &signal, &in_workload);
    if (st < 0)
      return -1;
    if (st == 0)
      continue;
    if (r.to - r.from == 1) {
      out[r.from].status = STATUS_CRASH;
      out[r.from].crash_signal = signal;
      out[r.from].crash_in_workload = in_workload;
      continue;
    }
    if (ntodo + 2 > MAX_RANGES || nfailed == MAX_RANGES) {
      mark_unresolved(out, r);
      continue;
    }
    failed[nfailed++] = r;
    size_t mid = r.from + (r.to - r.from) / 2;
    todo[ntodo++] = (struct range){mid, r.to};
    todo[ntodo++] = (struct range){r.from, mid};
  }
  /* a range whose halves pass on their own fails only through functions
   * hooked together: none of them can be called hookable */
  for (int f = nfailed - 1; f >= 0; f--) { /* innermost first */
    int culprit = 0;
    for (size_t i = failed[f].from; i < failed[f].to && !culprit; i++)
      culprit = out[i].status == STATUS_CRASH || out[i].status == STATUS_UNRESOLVED;
    if (!culprit)
      mark_unresolved(out, failed[f]);
  }
  *outcomes = out;
  *mapped = out_bytes + stub_bytes;
  return 0;
}

static const char *status_name(int st)
{
  return st == STATUS_CRASH        ? "crash"
         : st == STATUS_UNRESOLVED ? "crash-together"
                                   : hook_status_str((enum hook_status)st);
}

static void print_refusal(const struct candidate *cand, const struct outcome *o)
{
  int st = o->status;
  printf("  refused %s (%s, %zu bytes): %s: ", cand->name,
         cand->type == STT_GNU_IFUNC ? "ifunc" : "func", cand->size, status_name(st));
  if (st == STATUS_CRASH && !o->crash_in_workload)
    printf("scratch process failed (signal %d) while installing hooks\n", o->crash_signal);
  else if (st == STATUS_CRASH && o->crash_signal)
    printf("scratch process died (signal %d) calling through the hook\n", o->crash_signal);
  else if (st == STATUS_CRASH)
    printf("calls through the hook gave results different from the original's\n");
  else if (st == STATUS_UNRESOLVED)
    printf("a scratch process failed with this and other functions hooked together\n");
  else
    printf("%s\n", o->result.detail);
}

static void print_report(const char *lib, const struct check *c, const struct outcome *out)
{
  size_t hooked = 0, tally[STATUS_UNRESOLVED + 1] = {0};
  for (size_t i = 0; i < c->ncand; i++) {
    int st = out[i].status;
    tally[st]++;
    if (st == HOOK_OK || st == HOOK_ERR_ALREADY_HOOKED) {
      hooked++;
      if (verbose)
        printf("  hooked %s (%zu bytes patched)\n", c->cand[i].name, out[i].result.patched_bytes);
    }
  }
  printf("%s: hookable %zu of %zu (%.1f%%)\n", lib, hooked, c->ncand,
         c->ncand ? 100.0 * (double)hooked / (double)c->ncand : 100.0);
  for (size_t i = 0; i < c->ncand; i++)
    if (out[i].status != HOOK_OK && out[i].status != HOOK_ERR_ALREADY_HOOKED)
      print_refusal(&c->cand[i], &out[i]);
  for (int st = 1; st <= STATUS_UNRESOLVED; st++)
    if (tally[st])
      printf("  %s: %zu\n", status_name(st), tally[st]);
  printf("  (%zu functions shorter than the %zu-byte patch not counted)\n", c->too_short,
         far_only ? arch_patch_size_far() : arch_patch_size_near());
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

  size_t patch = far_only ? arch_patch_size_far() : arch_patch_size_near();
  struct candidate *kept = c.cand;
  size_t nkept = 0;
  for (size_t i = 0; i < c.ncand; i++) {
    if (c.cand[i].size && c.cand[i].size < patch)
      c.too_short++;
    else
      kept[nkept++] = c.cand[i];
  }
  c.ncand = nkept;

  struct outcome *out = NULL;
  size_t mapped = 0;
  if (hook_all(&c, &out, &mapped) != 0) {
    fprintf(stderr, "igprof-hookcheck: %s: cannot run the scratch processes: %s\n", lib,
            strerror(errno));
    return 2;
  }
  print_report(lib, &c, out);
  munmap(out, mapped);
  free(c.cand);
  elf_symbols_close(&es);
  return 0;
}

int main(int argc, char **argv)
{
  int first = 1;
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
    return usage(stdout, 0);
  if (argc > 1 && !strcmp(argv[1], "--version")) {
    puts("igprof-hookcheck (igprof) " IGPROF_VERSION);
    return 0;
  }
  for (; first < argc; first++) {
    if (!strcmp(argv[first], "-v"))
      verbose = 1;
    else if (!strcmp(argv[first], "--far"))
      far_only = 1;
    else
      break;
  }
  tramp_pool_refuse_near(far_only);
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
