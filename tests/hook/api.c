/* hook.api: every status of the public API with its reason, lookups (global,
 * by library, by version, through .symtab), the absolute-jump patch used when
 * no trampoline memory is within reach, installing while other threads run
 * the function, hooking in a forked child, and the ELF symbol reader. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "check.h"
#include "elf_symbols.h"
#include "hook.h"
#include "hook_internal.h"
#include "trampoline_pool.h"

/* Hand-written functions with exactly known bytes and sizes. */
__asm__(".text\n"
        ".globl tiny_ret\n.type tiny_ret,@function\ntiny_ret:\n  ret\n.size tiny_ret, 1\n"
        ".globl short_zero\n.type short_zero,@function\nshort_zero:\n"
        "  xorl %eax, %eax\n  ret\n.size short_zero, 3\n"
        /* count to 10: the loop jumps back to +2, inside the first 5 bytes */
        ".globl loop_back\n.type loop_back,@function\nloop_back:\n"
        "  xorl %eax, %eax\n1:\n  incl %eax\n  cmpl $10, %eax\n  jne 1b\n  ret\n"
        ".size loop_back, .-loop_back\n"
        ".globl bad_bytes\n.type bad_bytes,@function\nbad_bytes:\n"
        "  .byte 0x06, 0x06, 0x06, 0x06, 0x06, 0x06, 0x06, 0x06\n.size bad_bytes, 8\n"
        ".globl in_transaction\n.type in_transaction,@function\nin_transaction:\n"
        "  xbegin 1f\n  xend\n1:\n  xorl %eax, %eax\n  ret\n"
        ".size in_transaction, .-in_transaction\n"
        /* 10 bytes: enough for the near patch, not for the absolute one */
        ".globl ten_bytes\n.type ten_bytes,@function\nten_bytes:\n"
        "  movl %edi, %eax\n  addl %esi, %eax\n  addl $1, %eax\n  nop\n  ret\n"
        ".size ten_bytes, .-ten_bytes\n"
        /* endbr64 landing pads: room to keep it (10 bytes), and not (8 bytes) */
        ".globl cet_long\n.type cet_long,@function\ncet_long:\n"
        "  endbr64\n  leal 7(%rdi), %eax\n  nop\n  nop\n  ret\n.size cet_long, .-cet_long\n"
        ".globl cet_short\n.type cet_short,@function\ncet_short:\n"
        "  endbr64\n  leal 9(%rdi), %eax\n  ret\n.size cet_short, .-cet_short\n"
        /* RIP-relative operands in the first 14 bytes, for the absolute patch */
        ".globl far_rip_sse\n.type far_rip_sse,@function\nfar_rip_sse:\n"
        "  addsd far_const(%rip), %xmm0\n  nop\n  nop\n  nop\n  nop\n  nop\n  nop\n  ret\n"
        ".size far_rip_sse, .-far_rip_sse\n"
        ".globl far_rip_cmp\n.type far_rip_cmp,@function\nfar_rip_cmp:\n"
        "  cmpl $5, far_flag(%rip)\n  sete %al\n  movzbl %al, %eax\n  nop\n  ret\n"
        ".size far_rip_cmp, .-far_rip_cmp\n"
        ".pushsection .rodata\n.balign 8\nfar_const:\n  .double 1.5\n.popsection\n"
        ".pushsection .data\n.globl far_flag\n.balign 4\nfar_flag:\n  .long 5\n.popsection\n");
int cet_long(int);
int cet_short(int);
double far_rip_sse(double);
int far_rip_cmp(void);
extern int far_flag;
int tiny_ret(void);
int short_zero(void);
int loop_back(void);
int ten_bytes(int, int);

static void expect_status(enum hook_status got, enum hook_status want, const struct hook_result *r,
                          const char *detail_has, int line)
{
  if (got != want || (detail_has && !strstr(r->detail, detail_has))) {
    fprintf(stderr, "line %d: status %s (%s), expected %s with \"%s\"\n", line,
            hook_status_str(got), r->detail, hook_status_str(want), detail_has ? detail_has : "");
    check_failures++;
  }
  if (want != HOOK_OK && want != HOOK_ERR_ALREADY_HOOKED && (r->chain || r->trampoline)) {
    fprintf(stderr, "line %d: failed install left a chain or trampoline\n", line);
    check_failures++;
  }
}
#define EXPECT(got, want, r, has) expect_status(got, want, r, has, __LINE__)

static int replacement_int(void) { return 0; }

static enum hook_status hook_named(const char *fn, const char *ver, const char *lib, void *repl,
                                   struct hook_result *r)
{
  struct hook_spec spec = {fn, ver, lib, repl};
  return hook_install(&spec, r);
}

static void test_statuses(void)
{
  const char *seen[HOOK_STATUS_COUNT];
  for (int i = 0; i < HOOK_STATUS_COUNT; i++) {
    seen[i] = hook_status_str((enum hook_status)i);
    CHECK(seen[i] && seen[i][0]);
    for (int j = 0; j < i; j++)
      CHECK(strcmp(seen[i], seen[j]) != 0);
  }
  CHECK_STR(hook_status_str(HOOK_OK), "ok");
  CHECK_STR(hook_status_str(HOOK_ERR_ALREADY_HOOKED), "already-hooked");
  CHECK_STR(hook_status_str(HOOK_STATUS_COUNT), "unknown-status");

  struct hook_result r;
  memset(&r, 0, sizeof r);
  EXPECT(hook_named(NULL, NULL, NULL, (void *)replacement_int, &r), HOOK_ERR_BAD_SPEC, &r, "name");
  EXPECT(hook_named("", NULL, NULL, (void *)replacement_int, &r), HOOK_ERR_BAD_SPEC, &r, "name");
  EXPECT(hook_named("malloc", NULL, NULL, NULL, &r), HOOK_ERR_BAD_SPEC, &r, "replacement");
  EXPECT(hook_install(NULL, &r), HOOK_ERR_BAD_SPEC, &r, NULL);
  EXPECT(hook_install_at(NULL, 0, (void *)replacement_int, &r), HOOK_ERR_BAD_SPEC, &r, NULL);
  EXPECT(hook_named("f", NULL, "libdoesnotexist.so.9", (void *)replacement_int, &r),
         HOOK_ERR_LIBRARY_NOT_FOUND, &r, "libdoesnotexist.so.9 cannot be loaded");
  EXPECT(hook_named("no_such_function_xyz", NULL, NULL, (void *)replacement_int, &r),
         HOOK_ERR_SYMBOL_NOT_FOUND, &r, "no_such_function_xyz is not defined in any loaded module");
  EXPECT(hook_named("malloc", "GLIBC_9.99", "libc.so.6", (void *)replacement_int, &r),
         HOOK_ERR_SYMBOL_NOT_FOUND, &r, "malloc@GLIBC_9.99 is not defined in libc.so.6");
  EXPECT(hook_named("tiny_ret", NULL, NULL, (void *)replacement_int, &r), HOOK_ERR_TOO_SHORT, &r,
         "function is 1 bytes, shorter than the 5-byte patch");
  EXPECT(hook_named("short_zero", NULL, NULL, (void *)replacement_int, &r), HOOK_ERR_TOO_SHORT, &r,
         "function is 3 bytes");
  /* hook_install_at with an unknown size looks it up */
  EXPECT(hook_install_at((void *)short_zero, 0, (void *)replacement_int, &r), HOOK_ERR_TOO_SHORT,
         &r, "function is 3 bytes");
  EXPECT(hook_named("loop_back", NULL, NULL, (void *)replacement_int, &r),
         HOOK_ERR_BRANCH_INTO_PATCH, &r, "jnz at +0x7 branches to +0x2, inside the patched bytes");
  EXPECT(hook_named("bad_bytes", NULL, NULL, (void *)replacement_int, &r), HOOK_ERR_UNDECODABLE,
         &r, "invalid instruction at +0x0");
  EXPECT(hook_named("in_transaction", NULL, NULL, (void *)replacement_int, &r),
         HOOK_ERR_UNRELOCATABLE, &r, "xbegin at +0x0");
  /* the refused functions are untouched */
  CHECK_EQ_LONG(loop_back(), 10);
  CHECK_EQ_LONG(short_zero(), 0);
}

static void test_lookup(void)
{
  size_t size = 0;
  void *m = hook_lookup("malloc", NULL, NULL, &size);
  CHECK(m == dlsym(RTLD_DEFAULT, "malloc"));
  CHECK(size > 5);
  CHECK(hook_lookup("malloc", "GLIBC_2.2.5", "libc.so.6", NULL) == m);
  void *libm = dlopen("libm.so.6", RTLD_NOW);
  CHECK(libm && hook_lookup("cos", NULL, "libm.so.6", &size) == dlsym(libm, "cos"));
  /* not exported: found in the executable's .symtab, with its size */
  CHECK(hook_lookup("loop_back", NULL, NULL, &size) == (void *)loop_back);
  CHECK_EQ_LONG(size, 10);
  CHECK(hook_lookup("no_such_function_xyz", NULL, NULL, &size) == NULL);
  /* an IFUNC resolves to the selected implementation, sized by its unwind entry */
  void *impl = hook_lookup("strlen", NULL, NULL, &size);
  CHECK(impl == dlsym(RTLD_DEFAULT, "strlen"));
  CHECK(size > 16 && size < 4096);
}

static atomic_long crc_calls;
static struct hook_result crc_hook;
static unsigned long my_crc32(unsigned long c, const unsigned char *b, unsigned n)
{
  crc_calls++;
  return ((unsigned long (*)(unsigned long, const unsigned char *, unsigned))crc_hook.chain)(c, b, n);
}

/* A library this program does not link: hook_install loads it. */
static void test_library_loaded_on_demand(void)
{
  CHECK(dlopen("libz.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL);
  enum hook_status st = hook_named("crc32", NULL, "libz.so.1", (void *)my_crc32, &crc_hook);
  EXPECT(st, HOOK_OK, &crc_hook, NULL);
  void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_NOLOAD);
  CHECK(z != NULL);
  if (!z || st != HOOK_OK)
    return;
  unsigned long (*crc)(unsigned long, const unsigned char *, unsigned) = dlsym(z, "crc32");
  CHECK_EQ_LONG(crc(0, (const unsigned char *)"123456789", 9), 0xcbf43926);
  CHECK_EQ_LONG(crc_calls, 1);
}

/* ---- endbr64 at the entry --------------------------------------------------- */

static struct hook_result cet_long_hook, cet_short_hook;
static int cet_long_repl(int x) { return ((int (*)(int))cet_long_hook.chain)(x) * 100; }
static int cet_short_repl(int x) { return ((int (*)(int))cet_short_hook.chain)(x) * 100; }

static void test_landing_pads(void)
{
  static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  EXPECT(hook_named("cet_long", NULL, NULL, (void *)cet_long_repl, &cet_long_hook), HOOK_OK,
         &cet_long_hook, NULL);
  EXPECT(hook_named("cet_short", NULL, NULL, (void *)cet_short_repl, &cet_short_hook), HOOK_OK,
         &cet_short_hook, NULL);
  /* kept: indirect calls still land on endbr64; the chain starts with one */
  CHECK_EQ_LONG(cet_long_hook.entry_kept, 4);
  CHECK(memcmp((void *)cet_long, endbr64, 4) == 0);
  CHECK(memcmp(cet_long_hook.chain, endbr64, 4) == 0);
  uintptr_t target;
  CHECK_EQ_LONG(arch_read_jump((const uint8_t *)cet_long + 4, (uintptr_t)cet_long + 4, &target), 5);
  CHECK(target == (uintptr_t)cet_long_hook.trampoline);
  /* 8 bytes cannot hold endbr64 and the jump: the jump replaces it */
  CHECK_EQ_LONG(cet_short_hook.entry_kept, 0);
  CHECK_EQ_LONG(arch_read_jump((const void *)cet_short, (uintptr_t)cet_short, &target), 5);
  int (*volatile l)(int) = cet_long, (*volatile sh)(int) = cet_short;
  CHECK_EQ_LONG(l(1), 800);
  CHECK_EQ_LONG(sh(1), 1000);
  /* both are recognised as hooked */
  struct hook_result again;
  EXPECT(hook_named("cet_long", NULL, NULL, (void *)cet_short_repl, &again),
         HOOK_ERR_ALREADY_HOOKED, &again, NULL);
  CHECK(again.chain == cet_long_hook.chain);
  EXPECT(hook_named("cet_short", NULL, NULL, (void *)cet_long_repl, &again),
         HOOK_ERR_ALREADY_HOOKED, &again, NULL);
  CHECK(again.chain == cet_short_hook.chain);
}

/* ---- absolute patch ---------------------------------------------------- */

static __attribute__((noinline)) long far_target(long a, long b)
{
  long s = 0;
  for (long i = a; i < b; i++)
    s += i * i;
  return s;
}
static atomic_long far_calls;
static struct hook_result far_hook;
static long far_replacement(long a, long b)
{
  far_calls++;
  return ((long (*)(long, long))far_hook.chain)(a, b);
}
static struct hook_result ten_hook, sse_hook, cmp_hook;
static atomic_long sse_calls, cmp_calls;
static double sse_replacement(double x)
{
  sse_calls++;
  return ((double (*)(double))sse_hook.chain)(x);
}
static int cmp_replacement(void)
{
  cmp_calls++;
  return ((int (*)(void))cmp_hook.chain)();
}

static uintptr_t distance(const void *a, const void *b)
{
  return (uintptr_t)a > (uintptr_t)b ? (uintptr_t)a - (uintptr_t)b : (uintptr_t)b - (uintptr_t)a;
}

static void test_absolute_patch(void)
{
  long (*volatile call)(long, long) = far_target;
  long expected = call(3, 40);
  tramp_pool_refuse_near(1);
  size_t size;
  void *fn = hook_lookup("far_target", NULL, NULL, &size);
  CHECK(fn == (void *)far_target);
  enum hook_status st = hook_install_at(fn, size, (void *)far_replacement, &far_hook);
  EXPECT(st, HOOK_OK, &far_hook, NULL);
  /* ten_bytes has room for the 5-byte jump, not for the 14-byte one */
  st = hook_named("ten_bytes", NULL, NULL, (void *)replacement_int, &ten_hook);
  EXPECT(st, HOOK_ERR_TOO_SHORT, &ten_hook, "too short for the absolute-jump patch");
  /* RIP-relative data beyond rel32 of the trampoline: addsd and cmp run
   * through the scratch-register form, and cmp's flags must survive it */
  EXPECT(hook_named("far_rip_sse", NULL, NULL, (void *)sse_replacement, &sse_hook), HOOK_OK,
         &sse_hook, NULL);
  EXPECT(hook_named("far_rip_cmp", NULL, NULL, (void *)cmp_replacement, &cmp_hook), HOOK_OK,
         &cmp_hook, NULL);
  tramp_pool_refuse_near(0);
  CHECK(distance(sse_hook.trampoline, (void *)far_rip_sse) > ((uintptr_t)1 << 32));
  CHECK_EQ_LONG(far_rip_sse(2.0) == 3.5, 1);
  CHECK_EQ_LONG(far_rip_cmp(), 1);
  far_flag = 4;
  CHECK_EQ_LONG(far_rip_cmp(), 0);
  CHECK_EQ_LONG(sse_calls, 1);
  CHECK_EQ_LONG(cmp_calls, 2);
  CHECK_EQ_LONG(ten_bytes(20, 21), 42);

  uintptr_t target;
  CHECK_EQ_LONG(arch_read_jump(fn, (uintptr_t)fn, &target), arch_patch_size_far());
  CHECK(target == (uintptr_t)far_hook.trampoline);
  CHECK(far_hook.patched_bytes >= arch_patch_size_far());
  CHECK_EQ_LONG(call(3, 40), expected);
  CHECK_EQ_LONG(far_calls, 1);
  /* and an absolute patch is recognised as ours */
  struct hook_result again;
  EXPECT(hook_install_at(fn, size, (void *)replacement_int, &again), HOOK_ERR_ALREADY_HOOKED, &again,
         NULL);
  CHECK(again.chain == far_hook.chain);
}

/* ---- installing while other threads run other hooks ----------------------
 * Callers run every function hooked so far (their trampolines share the
 * chunk each new install writes to) and two that are never hooked. They never
 * run a function while it is being patched: hook.h rules that out. */

#define LIVE_FUNCS 8
static __attribute__((noinline)) long live0(long x) { return x * 3 + 0; }
static __attribute__((noinline)) long live1(long x) { return x * 3 + 1; }
static __attribute__((noinline)) long live2(long x) { return x * 3 + 2; }
static __attribute__((noinline)) long live3(long x) { return x * 3 + 3; }
static __attribute__((noinline)) long live4(long x) { return x * 3 + 4; }
static __attribute__((noinline)) long live5(long x) { return x * 3 + 5; }
static __attribute__((noinline)) long live6(long x) { return x * 3 + 6; }
static __attribute__((noinline)) long live7(long x) { return x * 3 + 7; }
static long (*const live_fns[LIVE_FUNCS])(long) = {live0, live1, live2, live3,
                                                   live4, live5, live6, live7};
static struct hook_result live_hooks[LIVE_FUNCS];
static atomic_long live_calls[LIVE_FUNCS];
static atomic_int live_stop, live_wrong, live_published;
#define LIVE_HOOKED 6 /* live6 and live7 are called but never hooked */

#define LIVE_REPL(i)                                         \
  static long live_repl##i(long x)                           \
  {                                                          \
    live_calls[i]++;                                         \
    return ((long (*)(long))live_hooks[i].chain)(x);         \
  }
LIVE_REPL(0) LIVE_REPL(1) LIVE_REPL(2) LIVE_REPL(3) LIVE_REPL(4) LIVE_REPL(5) LIVE_REPL(6)
LIVE_REPL(7)
static void *const live_repls[LIVE_FUNCS] = {live_repl0, live_repl1, live_repl2, live_repl3,
                                             live_repl4, live_repl5, live_repl6, live_repl7};

static void *live_caller(void *arg)
{
  (void)arg;
  long (*volatile fns[LIVE_FUNCS])(long);
  for (int i = 0; i < LIVE_FUNCS; i++)
    fns[i] = live_fns[i];
  for (long n = 0; !live_stop || n < 1000; n++) {
    int hooked = atomic_load_explicit(&live_published, memory_order_acquire);
    for (int i = 0; i < LIVE_FUNCS; i++)
      if ((i < hooked || i >= LIVE_HOOKED) && fns[i](n) != n * 3 + i)
        live_wrong++;
  }
  return NULL;
}

static void test_live_install(void)
{
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    CHECK_EQ_LONG(pthread_create(&t[i], NULL, live_caller, NULL), 0);
  usleep(20000);
  for (int i = 0; i < LIVE_HOOKED; i++) {
    enum hook_status st = hook_install_at((void *)live_fns[i], 0, live_repls[i], &live_hooks[i]);
    EXPECT(st, HOOK_OK, &live_hooks[i], NULL);
    atomic_store_explicit(&live_published, i + 1, memory_order_release);
    usleep(5000);
  }
  usleep(20000);
  live_stop = 1;
  for (int i = 0; i < 3; i++)
    CHECK_EQ_LONG(pthread_join(t[i], NULL), 0);
  CHECK_EQ_LONG(live_wrong, 0);
  for (int i = 0; i < LIVE_FUNCS; i++)
    if (i < LIVE_HOOKED)
      CHECK(live_calls[i] > 0);
    else
      CHECK_EQ_LONG(live_calls[i], 0);
}

/* ---- fork: the child's new trampolines do not land in the parent's chunk ---- */

/* loops, so that each body is longer than the patch */
static __attribute__((noinline)) int fork_a(int x)
{
  for (int i = 0; i < 100; i++)
    __asm__ volatile("" : "+r"(x));
  return x + 100;
}
static __attribute__((noinline)) int fork_b(int x)
{
  for (int i = 0; i < 200; i++)
    __asm__ volatile("" : "+r"(x));
  return x + 200;
}
static struct hook_result fork_a_hook, fork_b_hook;
static int fork_a_repl(int x) { return ((int (*)(int))fork_a_hook.chain)(x) + 1000; }
static int fork_b_repl(int x) { return ((int (*)(int))fork_b_hook.chain)(x) + 2000; }

static void test_fork(void)
{
  int to_child[2], to_parent[2];
  CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
  int (*volatile a)(int) = fork_a, (*volatile b)(int) = fork_b;
  pid_t pid = fork();
  if (pid == 0) {
    char c = 0;
    close(to_parent[0]);
    close(to_child[1]);
    /* hook fork_a in the child, let the parent hook fork_b, then call fork_a */
    enum hook_status st = hook_install_at((void *)fork_a, hook_function_size((uintptr_t)fork_a), (void *)fork_a_repl, &fork_a_hook);
    if (st != HOOK_OK) {
      fprintf(stderr, "child: %s: %s\n", hook_status_str(st), fork_a_hook.detail);
      _exit(2);
    }
    if (write(to_parent[1], "h", 1) != 1 || read(to_child[0], &c, 1) != 1)
      _exit(3);
    _exit(a(1) == 1101 && b(1) == 201 ? 0 : 4);
  }
  close(to_parent[1]);
  close(to_child[0]);
  char c;
  CHECK_EQ_LONG(read(to_parent[0], &c, 1), 1);
  EXPECT(hook_install_at((void *)fork_b, hook_function_size((uintptr_t)fork_b), (void *)fork_b_repl, &fork_b_hook), HOOK_OK,
         &fork_b_hook, NULL);
  CHECK_EQ_LONG(write(to_child[1], "g", 1), 1);
  int status;
  CHECK_EQ_LONG(waitpid(pid, &status, 0), pid);
  CHECK_EQ_LONG(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), 0);
  close(to_parent[0]);
  close(to_child[1]);
  CHECK_EQ_LONG(a(1), 101);
  CHECK_EQ_LONG(b(1), 2201);
}

/* ---- ELF symbol reader --------------------------------------------------- */

static int count_functions(const struct elf_symbol *s, void *arg)
{
  if (s->type == STT_FUNC || s->type == STT_GNU_IFUNC)
    ++*(long *)arg;
  return 0;
}

static void test_elf_symbols(void)
{
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  char path[4096];
  uintptr_t bias;
  CHECK(elf_module_find((uintptr_t)m + 3, path, sizeof path, &bias) == 0);
  CHECK(strstr(path, "libc.so.6") != NULL);
  struct elf_symbols es;
  CHECK(elf_symbols_open(&es, path, bias) == 0);
  struct elf_symbol sym;
  CHECK(elf_symbols_find(&es, "malloc", &sym) == 0);
  CHECK(sym.address == (uintptr_t)m);
  CHECK_EQ_LONG(sym.type, STT_FUNC);
  CHECK(sym.dynamic && sym.size > 0);
  CHECK_STR(sym.version, "GLIBC_2.2.5");
  struct elf_symbol inside;
  CHECK(elf_symbols_find_address(&es, (uintptr_t)m + sym.size / 2, &inside) == 0);
  CHECK(inside.address == (uintptr_t)m && inside.size == sym.size);
  /* memcpy has an old version hidden behind the default one */
  CHECK(elf_symbols_find(&es, "memcpy", &sym) == 0);
  CHECK_STR(sym.version, "GLIBC_2.14");
  CHECK_EQ_LONG(sym.type, STT_GNU_IFUNC);
  long nfunc = 0;
  elf_symbols_each(&es, ELF_SYMBOLS_DYNAMIC, count_functions, &nfunc);
  CHECK(nfunc > 2000);
  CHECK(elf_symbols_find(&es, "no_such_function_xyz", &sym) == -1);
  elf_symbols_close(&es);

  /* the executable, through /proc/self/exe, with its .symtab */
  CHECK(elf_module_find((uintptr_t)loop_back, path, sizeof path, &bias) == 0);
  CHECK(elf_symbols_open(&es, path, bias) == 0);
  CHECK(es.symtab != NULL);
  CHECK(elf_symbols_find(&es, "loop_back", &sym) == 0);
  CHECK(sym.address == (uintptr_t)loop_back && sym.size == 10 && !sym.dynamic);
  elf_symbols_close(&es);

  /* bad input: a clear errno, never a crash */
  errno = 0;
  CHECK(elf_symbols_open(&es, "/nonexistent/file", 0) == -1 && errno == ENOENT);
  errno = 0;
  CHECK(elf_symbols_open(&es, "/etc/hostname", 0) == -1 && errno == ENOEXEC);
  char tmp[] = "/tmp/hook-api-XXXXXX";
  int fd = mkstemp(tmp);
  CHECK(fd >= 0);
  /* a valid ELF header whose section table lies past the end of the file */
  int src = open(path, O_RDONLY);
  char head[256];
  CHECK(read(src, head, sizeof head) == (ssize_t)sizeof head);
  CHECK(write(fd, head, sizeof head) == (ssize_t)sizeof head);
  close(src);
  close(fd);
  errno = 0;
  CHECK(elf_symbols_open(&es, tmp, 0) == -1 && errno == ENOEXEC);
  unlink(tmp);
}

int main(void)
{
  test_statuses();
  test_lookup();
  test_library_loaded_on_demand();
  test_landing_pads();
  test_absolute_patch();
  test_live_install();
  test_fork();
  test_elf_symbols();
  return check_report("hook.api");
}
