/* See jit_code.h. The mapping is written, then made read+execute. */
#include "jit_code.h"

#include <string.h>
#include <sys/mman.h>

#define PAGE 4096

struct emitter {
  uint8_t *at;
};

static uintptr_t here(const struct emitter *e) { return (uintptr_t)e->at; }

static void put(struct emitter *e, const uint8_t *bytes, size_t n) {
  memcpy(e->at, bytes, n);
  e->at += n;
}

#define PUT(e, ...)                                                                            \
  do {                                                                                         \
    static const uint8_t bytes_[] = {__VA_ARGS__};                                             \
    put(e, bytes_, sizeof bytes_);                                                             \
  } while (0)

static void put_u64(struct emitter *e, uint64_t v) {
  memcpy(e->at, &v, sizeof v);
  e->at += sizeof v;
}

/* The prologue: on a 64-byte boundary, %rbp saved, then either made the
 * frame pointer or zeroed, and the return address stored in f->caller. */
static void prologue(struct emitter *e, struct jit_function *f, int keeps_fp) {
  while ((uintptr_t)e->at % 64)
    *e->at++ = 0xcc; /* int3 */
  f->entry = e->at;
  PUT(e, 0x55); /* push %rbp */
  if (keeps_fp) {
    PUT(e, 0x48, 0x89, 0xe5);       /* mov %rsp,%rbp */
    PUT(e, 0x48, 0x8b, 0x45, 0x08); /* mov 8(%rbp),%rax */
  } else {
    PUT(e, 0x31, 0xed);                   /* xor %ebp,%ebp */
    PUT(e, 0x48, 0x8b, 0x44, 0x24, 0x08); /* mov 8(%rsp),%rax */
  }
  PUT(e, 0x48, 0xa3); /* movabs %rax,f->caller */
  put_u64(e, (uint64_t)(uintptr_t)&f->caller);
}

static void epilogue(struct emitter *e) { PUT(e, 0x5d, 0xc3); /* pop %rbp; ret */ }

/* cb(arg) for f(cb, arg): %rdi, %rsi are still the arguments. */
static void call_callback(struct emitter *e, struct jit_function *f) {
  PUT(e, 0x48, 0x89, 0xf8, /* mov %rdi,%rax */
      0x48, 0x89, 0xf7,    /* mov %rsi,%rdi */
      0xff, 0xd0);         /* call *%rax */
  f->call_ret = here(e);
}

static void spin_loop(struct emitter *e, struct jit_function *f) {
  f->loop = here(e);
  PUT(e, 0x48, 0xff, 0xcf, /* dec %rdi */
      0x75, 0xfb);         /* jnz back to the dec */
  f->loop_end = here(e);
}

int jit_code_make(struct jit_code *jit) {
  uint8_t *mem = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    return 0;
  struct emitter e = {mem};
  struct jit_function *f = jit->fn;

  prologue(&e, &f[JIT_WITH_FP], 1);
  call_callback(&e, &f[JIT_WITH_FP]);
  epilogue(&e);

  prologue(&e, &f[JIT_WITHOUT_FP], 0);
  call_callback(&e, &f[JIT_WITHOUT_FP]);
  epilogue(&e);

  prologue(&e, &f[JIT_OUTER], 1);
  PUT(&e, 0x48, 0xb8); /* movabs $with_fp,%rax */
  put_u64(&e, (uint64_t)(uintptr_t)f[JIT_WITH_FP].entry);
  PUT(&e, 0xff, 0xd0); /* call *%rax, with cb and arg as they came */
  f[JIT_OUTER].call_ret = here(&e);
  epilogue(&e);

  prologue(&e, &f[JIT_SPIN_FP], 1);
  spin_loop(&e, &f[JIT_SPIN_FP]);
  epilogue(&e);

  prologue(&e, &f[JIT_SPIN_WITHOUT_FP], 0);
  spin_loop(&e, &f[JIT_SPIN_WITHOUT_FP]);
  epilogue(&e);

  return mprotect(mem, PAGE, PROT_READ | PROT_EXEC) == 0;
}
