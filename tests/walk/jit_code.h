/* Machine code made at run time, without unwind information, for the walker's
 * tests: what a JIT compiler leaves on the stack. x86_64, i386 and AArch64.
 *
 * The functions are written into an anonymous executable mapping (no module,
 * no FDE). Each one first stores its own return address in its `caller`
 * field, so a test knows every frame a walk through it must report. A frame
 * pointer is kept as JIT compilers keep it: the caller's frame pointer saved
 * next to the return address (push %rbp on x86_64, push %ebp on i386;
 * stp x29, x30, [sp, #-16]! on AArch64, a frame record at the top of the
 * frame) and the frame pointer
 * set to it; "without a frame pointer" saves the same but puts data (0) in
 * the frame-pointer register.
 */
#ifndef WALK_JIT_CODE_H
#define WALK_JIT_CODE_H

#include <stdint.h>

typedef void (*jit_callback)(long);

enum jit_function_id {
  /* f(cb, arg): frame record, frame pointer to it; cb(arg). Keeps the chain. */
  JIT_WITH_FP,
  /* f(cb, arg): frame record, frame pointer zeroed; cb(arg). No chain. */
  JIT_WITHOUT_FP,
  /* f(cb, arg): with a frame pointer, calls JIT_WITH_FP(cb, arg). */
  JIT_OUTER,
  /* f(n): with a frame pointer, loops n (> 0) times. */
  JIT_SPIN_FP,
  /* f(n): with the frame pointer zeroed, loops n (> 0) times. */
  JIT_SPIN_WITHOUT_FP,
  JIT_FUNCTIONS
};

struct jit_function {
  void *entry;
  uintptr_t call_ret;        /* return address of its call, if it makes one */
  uintptr_t loop, loop_end;  /* a spin's loop: the frame is complete there */
  volatile uintptr_t caller; /* its return address, stored by each call */
};

struct jit_code {
  struct jit_function fn[JIT_FUNCTIONS];
};

/* Writes the functions into a fresh mapping; 0 on failure (errno set).
 * `jit` must stay where it is: the code stores into its fields. */
int jit_code_make(struct jit_code *jit);

static inline void jit_call(const struct jit_code *jit, enum jit_function_id id, jit_callback cb,
                            long arg)
{
  ((void (*)(jit_callback, long))jit->fn[id].entry)(cb, arg);
}

static inline void jit_spin(const struct jit_code *jit, enum jit_function_id id, long n)
{
  ((void (*)(long))jit->fn[id].entry)(n);
}

#endif
