/* See jit_code.h. The mapping is written, its instruction cache flushed,
 * then made read+execute. One emitter per architecture: the same functions
 * with the same frames (a frame record kept by the frame pointer, or the
 * frame pointer zeroed). */
#include "jit_code.h"

#include <string.h>
#include <sys/mman.h>

#define PAGE 4096

struct emitter {
  uint8_t *at;
};

static uintptr_t here(const struct emitter *e) { return (uintptr_t)e->at; }

#if defined(__x86_64__) || defined(__aarch64__)
static void put_u64(struct emitter *e, uint64_t v)
{
  memcpy(e->at, &v, sizeof v);
  e->at += sizeof v;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
static void put(struct emitter *e, const uint8_t *bytes, size_t n)
{
  memcpy(e->at, bytes, n);
  e->at += n;
}

#define PUT(e, ...)                                                                            \
  do {                                                                                         \
    static const uint8_t bytes_[] = {__VA_ARGS__};                                             \
    put(e, bytes_, sizeof bytes_);                                                             \
  } while (0)
#endif

#if defined(__x86_64__)
/* The prologue: on a 64-byte boundary, %rbp saved, then either made the
 * frame pointer or zeroed, and the return address stored in f->caller. */
static void prologue(struct emitter *e, struct jit_function *f, int keeps_fp)
{
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
static void call_callback(struct emitter *e, struct jit_function *f)
{
  PUT(e, 0x48, 0x89, 0xf8, /* mov %rdi,%rax */
      0x48, 0x89, 0xf7,    /* mov %rsi,%rdi */
      0xff, 0xd0);         /* call *%rax */
  f->call_ret = here(e);
}

/* with_fp(cb, arg), with cb and arg as they came. */
static void call_function(struct emitter *e, struct jit_function *f, const void *target)
{
  PUT(e, 0x48, 0xb8); /* movabs $target,%rax */
  put_u64(e, (uint64_t)(uintptr_t)target);
  PUT(e, 0xff, 0xd0); /* call *%rax */
  f->call_ret = here(e);
}

static void spin_loop(struct emitter *e, struct jit_function *f)
{
  f->loop = here(e);
  PUT(e, 0x48, 0xff, 0xcf, /* dec %rdi */
      0x75, 0xfb);         /* jnz back to the dec */
  f->loop_end = here(e);
}

#elif defined(__i386__)
static void put_u32(struct emitter *e, uint32_t v)
{
  memcpy(e->at, &v, sizeof v);
  e->at += sizeof v;
}

/* The prologue: on a 64-byte boundary, %ebp saved, then either made the
 * frame pointer or zeroed, and the return address stored in f->caller.
 * The arguments are on the stack: after the push, the first at 8(%esp). */
static void prologue(struct emitter *e, struct jit_function *f, int keeps_fp)
{
  while ((uintptr_t)e->at % 64)
    *e->at++ = 0xcc; /* int3 */
  f->entry = e->at;
  PUT(e, 0x55); /* push %ebp */
  if (keeps_fp) {
    PUT(e, 0x89, 0xe5);       /* mov %esp,%ebp */
    PUT(e, 0x8b, 0x45, 0x04); /* mov 4(%ebp),%eax */
  } else {
    PUT(e, 0x31, 0xed);             /* xor %ebp,%ebp */
    PUT(e, 0x8b, 0x44, 0x24, 0x04); /* mov 4(%esp),%eax */
  }
  PUT(e, 0xa3); /* mov %eax,f->caller */
  put_u32(e, (uint32_t)(uintptr_t)&f->caller);
}

static void epilogue(struct emitter *e) { PUT(e, 0x5d, 0xc3); /* pop %ebp; ret */ }

/* cb(arg) for f(cb, arg), the stack 16-byte aligned at the call as the
 * i386 ABI wants (it was 8 bytes past it after the push). */
static void call_callback(struct emitter *e, struct jit_function *f)
{
  PUT(e, 0x8b, 0x44, 0x24, 0x08, /* mov 8(%esp),%eax: cb */
      0x8b, 0x4c, 0x24, 0x0c,    /* mov 12(%esp),%ecx: arg */
      0x83, 0xec, 0x04,          /* sub $4,%esp */
      0x51,                      /* push %ecx */
      0xff, 0xd0);               /* call *%eax */
  f->call_ret = here(e);
  PUT(e, 0x83, 0xc4, 0x08); /* add $8,%esp */
}

/* with_fp(cb, arg), with cb and arg as they came. */
static void call_function(struct emitter *e, struct jit_function *f, const void *target)
{
  PUT(e, 0x8b, 0x44, 0x24, 0x08, /* mov 8(%esp),%eax: cb */
      0x8b, 0x4c, 0x24, 0x0c,    /* mov 12(%esp),%ecx: arg */
      0x51, 0x50,                /* push %ecx; push %eax */
      0xb8);                     /* mov $target,%eax */
  put_u32(e, (uint32_t)(uintptr_t)target);
  PUT(e, 0xff, 0xd0); /* call *%eax */
  f->call_ret = here(e);
  PUT(e, 0x83, 0xc4, 0x08); /* add $8,%esp */
}

static void spin_loop(struct emitter *e, struct jit_function *f)
{
  PUT(e, 0x8b, 0x4c, 0x24, 0x08); /* mov 8(%esp),%ecx: n */
  f->loop = here(e);
  PUT(e, 0x49,        /* dec %ecx */
      0x75, 0xfd);    /* jnz back to the dec */
  f->loop_end = here(e);
}

#elif defined(__aarch64__)
static void put_insn(struct emitter *e, uint32_t insn)
{
  memcpy(e->at, &insn, sizeof insn);
  e->at += sizeof insn;
}

/* ldr xN, 1f; b 2f; 1: .quad value; 2: */
static void load_u64(struct emitter *e, unsigned reg, uint64_t value)
{
  put_insn(e, 0x58000040u | reg); /* ldr x<reg>, pc + 8 */
  put_insn(e, 0x14000003u);       /* b pc + 12 */
  put_u64(e, value);
}

/* The prologue: on a 64-byte boundary, the frame record pushed (stp x29,
 * x30, [sp, #-16]!), then x29 either made the frame pointer or zeroed, and
 * the return address (x30) stored in f->caller. */
static void prologue(struct emitter *e, struct jit_function *f, int keeps_fp)
{
  while ((uintptr_t)e->at % 64)
    put_insn(e, 0xd4200000u); /* brk #0 */
  f->entry = e->at;
  put_insn(e, 0xa9bf7bfdu); /* stp x29, x30, [sp, #-16]! */
  put_insn(e, keeps_fp ? 0x910003fdu   /* mov x29, sp */
                       : 0xd280001du); /* mov x29, #0 */
  load_u64(e, 17, (uint64_t)(uintptr_t)&f->caller);
  put_insn(e, 0xf900023eu); /* str x30, [x17] */
}

static void epilogue(struct emitter *e)
{
  put_insn(e, 0xa8c17bfdu); /* ldp x29, x30, [sp], #16 */
  put_insn(e, 0xd65f03c0u); /* ret */
}

/* cb(arg) for f(cb, arg): x0, x1 are still the arguments. */
static void call_callback(struct emitter *e, struct jit_function *f)
{
  put_insn(e, 0xaa0003f0u); /* mov x16, x0 */
  put_insn(e, 0xaa0103e0u); /* mov x0, x1 */
  put_insn(e, 0xd63f0200u); /* blr x16 */
  f->call_ret = here(e);
}

/* with_fp(cb, arg), with cb and arg as they came. */
static void call_function(struct emitter *e, struct jit_function *f, const void *target)
{
  load_u64(e, 16, (uint64_t)(uintptr_t)target);
  put_insn(e, 0xd63f0200u); /* blr x16 */
  f->call_ret = here(e);
}

static void spin_loop(struct emitter *e, struct jit_function *f)
{
  f->loop = here(e);
  put_insn(e, 0xf1000400u); /* subs x0, x0, #1 */
  put_insn(e, 0x54ffffe1u); /* b.ne back to the subs */
  f->loop_end = here(e);
}
#else
#error "jit_code.c: no emitter for this architecture"
#endif

int jit_code_make(struct jit_code *jit)
{
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
  call_function(&e, &f[JIT_OUTER], f[JIT_WITH_FP].entry);
  epilogue(&e);

  prologue(&e, &f[JIT_SPIN_FP], 1);
  spin_loop(&e, &f[JIT_SPIN_FP]);
  epilogue(&e);

  prologue(&e, &f[JIT_SPIN_WITHOUT_FP], 0);
  spin_loop(&e, &f[JIT_SPIN_WITHOUT_FP]);
  epilogue(&e);

  __builtin___clear_cache((char *)mem, (char *)e.at);
  return mprotect(mem, PAGE, PROT_READ | PROT_EXEC) == 0;
}
