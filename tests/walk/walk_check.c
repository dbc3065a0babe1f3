/* Harness: compare the fast walker with libunwind unw_step (see walk_check.h). */
#define _GNU_SOURCE
#include "walk_check.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "walk_fast.h"
#include "../../src/arch/frame.h"
#if defined(__arm__)
#include "../../src/arch/arm_ehabi.h"
#include "../../src/arch/arm_prologue.h"
#endif

#define MAX_FRAMES 1024
#define KEEP_MISMATCHES 4

static atomic_long points_hook, points_signal, frames_compared, mismatches, samples, garbage_tails,
    reference_faults, lr_past_reference, libunwind_prefix, guessed_tails, past_by_prologue,
    no_return_tails;
/* the first such frame, and its walk's first frame and lr (0: a hook walk) */
static uintptr_t no_return_first, no_return_pc, no_return_lr;

/* Whether the fast walk being compared was libunwind's whole walk (a
 * thread without stack bounds: walk_fast.h's walks_unwinder went up). */
static __thread int fast_was_libunwind;

/* How many frames of the walk being compared the fast walker stepped by
 * reading a prologue (ARM32: frames without a table entry, where
 * libunwind's walk ends). */
static __thread uint64_t fast_prologue_frames;

static uint64_t walks_by_libunwind(void)
{
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  return st.walks_unwinder;
}

static uint64_t frames_by_prologue(void)
{
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  return st.frames_prologue;
}

struct mismatch {
  const char *kind;
  int n_fast, n_ref;
  uintptr_t fast[64], ref[64];
};
static struct mismatch kept[KEEP_MISMATCHES];

/* The return addresses a signal handler sees: libc's (x86) or the vDSO's
 * (AArch64) signal return trampolines. Learnt once by raising a signal to
 * a handler with SA_SIGINFO and to one without (i386 builds two kinds of
 * signal frames, with sigreturn and rt_sigreturn trampolines; the others
 * one), and checked by their bytes (mov $15, %rax; syscall / mov x8, #139;
 * svc #0 / mov $0xad, %eax; int $0x80 and pop %eax; mov $0x77, %eax;
 * int $0x80), so the reference does not depend on the walker's reading of
 * CIE augmentations. libunwind's own unw_is_signal_frame() cannot serve:
 * after unw_step it describes whichever frame libunwind last fetched
 * unwind info for, which depends on its cache. */
static uintptr_t sigreturn_trampoline[2];
static volatile int learning; /* read by the handlers */

__attribute__((noinline)) static void learn_trampoline(int sig)
{
  (void)sig;
  sigreturn_trampoline[learning] = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory"); /* not a tail call: keep our own frame */
}

__attribute__((noinline)) static void learn_rt_trampoline(int sig, siginfo_t *si, void *uc)
{
  (void)sig, (void)si, (void)uc;
  sigreturn_trampoline[learning] = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

static void find_sigreturn_trampoline(void)
{
#if defined(__x86_64__)
  static const unsigned char rt_code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  static const unsigned char code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
#elif defined(__aarch64__)
  static const unsigned char rt_code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
  static const unsigned char code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
#elif defined(__i386__)
  static const unsigned char rt_code[] = {0xb8, 0xad, 0x00, 0x00, 0x00, 0xcd, 0x80};
  static const unsigned char code[] = {0x58, 0xb8, 0x77, 0x00, 0x00, 0x00, 0xcd, 0x80};
#elif defined(__arm__)
  /* glibc's restorers, Thumb-2: mov.w r7, #119 (sigreturn) or #173
   * (rt_sigreturn); svc 0 */
  static const unsigned char rt_code[] = {0x4f, 0xf0, 0xad, 0x07, 0x00, 0xdf};
  static const unsigned char code[] = {0x4f, 0xf0, 0x77, 0x07, 0x00, 0xdf};
#endif
  struct sigaction sa, old;
  for (learning = 0; learning < 2; learning++) {
    memset(&sa, 0, sizeof sa);
    if (learning) {
      sa.sa_sigaction = learn_rt_trampoline;
      sa.sa_flags = SA_SIGINFO;
    } else {
      sa.sa_handler = learn_trampoline;
    }
    sigaction(SIGUSR2, &sa, &old);
    raise(SIGUSR2);
    sigaction(SIGUSR2, &old, NULL);
    sigreturn_trampoline[learning] = frame_code_address(sigreturn_trampoline[learning]);
  }
  if (!sigreturn_trampoline[0] || !sigreturn_trampoline[1] ||
      memcmp((const void *)sigreturn_trampoline[0], code, sizeof code) != 0 ||
      memcmp((const void *)sigreturn_trampoline[1], rt_code, sizeof rt_code) != 0) {
    fprintf(stderr, "walk_check: cannot find the signal return trampolines (%#lx, %#lx)\n",
            (unsigned long)sigreturn_trampoline[0], (unsigned long)sigreturn_trampoline[1]);
    exit(2);
  }
}

static int is_sigreturn_trampoline(uintptr_t ip)
{
  return ip == sigreturn_trampoline[0] || ip == sigreturn_trampoline[1];
}

/* libunwind 1.6 on AArch64 reads the registers a frame saved without
 * checking their addresses (its x86_64 code checks them), so a reference
 * walk that meets a stack being switched — libgcc installing a landing
 * pad's context — can fault. The fault ends that reference walk where it
 * was (reference_walk's *faulted); a fault anywhere else is the test's
 * crash, as it would be without this handler. */
static __thread sigjmp_buf *reference_jump;

/* The calling thread's stack (check_thread_init; 0 before): an address in
 * it is never a return address. */
static __thread uintptr_t stack_lo, stack_hi;

/* Whether `pc` could be a return address at all: mapped, and not on the
 * thread's stack. */
/* The segments without code (data, bss) of the objects loaded when the
 * check starts (check_init; none of them is unloaded later): a return
 * address in one is garbage, however mapped (seen: AArch64, both walkers
 * reading the same word of the main program's bss during a dlopen). */
#define DATA_RANGES 64
static struct {
  uintptr_t lo, hi;
} data_ranges[DATA_RANGES];
static int n_data_ranges;

static int note_data_ranges(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size, (void)arg;
  for (int i = 0; i < info->dlpi_phnum && n_data_ranges < DATA_RANGES; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && !(ph->p_flags & PF_X)) {
      data_ranges[n_data_ranges].lo = info->dlpi_addr + ph->p_vaddr;
      data_ranges[n_data_ranges].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
      n_data_ranges++;
    }
  }
  return 0;
}

static int could_be_code(uintptr_t pc)
{
#if FRAME_CODE_ALIGN == 4
  /* AArch64 instructions are 4-byte aligned; a frame's address is its
   * return address less one past the first frame: anything else is data
   * (both walkers read the same one past glibc 2.36's _dl_runtime_resolve,
   * whose unwind data leaves out the 16 bytes its PLT header pushed). */
  if ((pc & 3) != 0 && (pc & 3) != 3)
    return 0;
#endif
  for (int i = 0; i < n_data_ranges; i++)
    if (pc >= data_ranges[i].lo && pc < data_ranges[i].hi)
      return 0;
#if defined(__arm__)
  /* qemu-arm answers mincore for some unmapped pages at the top of the
   * 32-bit space (0xffffffe7 passed): code is a loaded object's here. */
  Dl_info info;
  if (!dladdr((void *)pc, &info))
    return 0;
#endif
  return !(pc >= stack_lo && pc < stack_hi) && frame_memory_mapped(pc, 1);
}

/* The fast walker's own libunwind steps (walk_fast.h's escape slot): a
 * fault inside one ends that walk, as in the runtime. libunwind 1.6's ARM
 * unwinder reads the stack without checking it (its msync check passes
 * every address of a 32-bit guest under qemu), and walks of a thread
 * without stack bounds are all libunwind's. */
static __thread void *walker_escape;
void **igprof_unwind_escape_slot(void) { return &walker_escape; }

static void on_reference_fault(int sig, siginfo_t *si, void *ucv)
{
  (void)si;
  ucontext_t *uc = ucv;
  if (walker_escape) {
    sigjmp_buf *to = walker_escape;
    walker_escape = NULL;
    pthread_sigmask(SIG_SETMASK, &uc->uc_sigmask, NULL);
    siglongjmp(*to, 1);
  }
  if (reference_jump)
    siglongjmp(*reference_jump, 1);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void catch_reference_faults(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_reference_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}

#if defined(__arm__)
/* libunwind 1.6 reads the interrupted registers of ARM's sigreturn frame
 * (a handler without SA_SIGINFO: struct sigframe, the ucontext at the
 * trampoline's stack pointer) from the wrong place and goes on from
 * garbage. The reference steps that frame by its definition: the cursor
 * starts again from the context's r0-r15. `ctx` must outlive the cursor. */
static int reference_sigframe_step(unw_cursor_t *c, unw_context_t *ctx)
{
  unw_word_t sp;
  if (unw_get_reg(c, UNW_REG_SP, &sp) < 0 || !frame_memory_mapped(sp, sizeof(ucontext_t)))
    return 0;
  memcpy(ctx, &((const ucontext_t *)sp)->uc_mcontext.arm_r0, sizeof *ctx);
  return unw_init_local2(c, ctx, UNW_INIT_SIGNAL_FRAME) == 0;
}
#endif

#if defined(__i386__)
/* libunwind 1.6 steps an interrupted i386 PC thunk (mov (%esp), %reg; ret,
 * frame.h) that has no unwind data by the frame-pointer chain, which that
 * frame has not set up, and reads garbage. The reference steps it by the
 * thunk's definition instead: the return address at the stack pointer,
 * every other register unchanged. `ctx` must outlive the cursor. */
static int reference_thunk_step(unw_cursor_t *c, ucontext_t *ctx)
{
  static const struct {
    int unw, greg;
  } regs[] = {{UNW_X86_EAX, REG_EAX}, {UNW_X86_EBX, REG_EBX}, {UNW_X86_ECX, REG_ECX},
              {UNW_X86_EDX, REG_EDX}, {UNW_X86_ESI, REG_ESI}, {UNW_X86_EDI, REG_EDI},
              {UNW_X86_EBP, REG_EBP}, {UNW_X86_ESP, REG_ESP}};
  memset(ctx, 0, sizeof *ctx);
  for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
    unw_word_t v;
    if (unw_get_reg(c, regs[i].unw, &v) < 0)
      return 0;
    ctx->uc_mcontext.gregs[regs[i].greg] = (greg_t)v;
  }
  uintptr_t sp = (uintptr_t)ctx->uc_mcontext.gregs[REG_ESP];
  if (!frame_memory_mapped(sp, 4))
    return 0;
  ctx->uc_mcontext.gregs[REG_EIP] = (greg_t) * (const uintptr_t *)sp;
  ctx->uc_mcontext.gregs[REG_ESP] = (greg_t)(sp + 4);
  return unw_init_local(c, ctx) == 0;
}

/* libunwind 1.6 steps through i386 signal trampolines, but then looks up
 * the interrupted frame's unwind row at the instruction before its PC, as
 * for a return address (seen: an interrupted `ret` after `pop %ebx`, whose
 * caller it then read one word too high). The reference starts again from
 * the registers the kernel saved, as a signal frame: at the trampoline the
 * stack pointer is at the frame's signal number, followed (rt_sigframe) by
 * the siginfo and ucontext pointers, or (sigframe) by the sigcontext, whose
 * registers are in mcontext_t's order. `ctx` must outlive the cursor. */
static int reference_signal_step(unw_cursor_t *c, int rt, ucontext_t *ctx)
{
  unw_word_t sp;
  if (unw_get_reg(c, UNW_REG_SP, &sp) < 0 || !frame_memory_mapped(sp, 12))
    return 0;
  if (rt) {
    const ucontext_t *uc = *(ucontext_t *const *)(sp + 8);
    if (!frame_memory_mapped((uintptr_t)uc, sizeof *uc))
      return 0;
    memcpy(ctx, uc, sizeof *ctx);
  } else {
    memset(ctx, 0, sizeof *ctx);
    if (!frame_memory_mapped(sp + 4, sizeof ctx->uc_mcontext.gregs))
      return 0;
    memcpy(ctx->uc_mcontext.gregs, (const void *)(sp + 4), sizeof ctx->uc_mcontext.gregs);
  }
  return unw_init_local2(c, ctx, UNW_INIT_SIGNAL_FRAME) == 0;
}
#endif

/* The reference: libunwind's cursor, stepped to the end. Addresses follow
 * walk.h: a return address minus 1, an interrupted PC (the start of a signal
 * walk, or the frame a signal trampoline returns to) exactly. */
static int reference_walk(unw_cursor_t *c, uintptr_t *pcs, int max, int exact_first,
                          int *truncated, int *faulted, int ask_at, int *guessed)
{
  volatile int n = 0, exact = exact_first;
  sigjmp_buf here, *outer = reference_jump;
#if defined(__arm__)
  unw_context_t sigframe_ctx;
#endif
#if defined(__i386__)
  ucontext_t thunk_ctx, signal_ctx;
#endif
  *truncated = 0;
  *faulted = 0;
  *guessed = 0;
  if (sigsetjmp(here, 1)) {
    reference_jump = outer;
    *faulted = 1;
    return n;
  }
  reference_jump = &here;
  for (;;) {
    unw_word_t ip;
    if (unw_get_reg(c, UNW_REG_IP, &ip) < 0)
      break;
    if (n == max) {
      *truncated = 1;
      break;
    }
    /* libunwind 1.6 keeps an AArch64 return address's pointer-authentication
     * bits; the walk.h addresses are code addresses (frame_code_address). */
    ip = frame_code_address(ip);
    pcs[n] = exact ? ip : ip - 1;
    n = n + 1;
#if defined(__i386__)
    if (is_sigreturn_trampoline(ip)) {
      if (!reference_signal_step(c, ip == sigreturn_trampoline[1], &signal_ctx))
        break;
      exact = 1;
      continue;
    }
    if (exact && frame_code_is_pc_thunk(ip)) {
      exact = 0;
      if (!reference_thunk_step(c, &thunk_ctx))
        break;
      continue;
    }
#endif
    exact = is_sigreturn_trampoline(ip);
#if defined(__arm__)
    if (ip == sigreturn_trampoline[0]) {
      if (!reference_sigframe_step(c, &sigframe_ctx))
        break;
      continue;
    }
#endif
    if (n == ask_at) {
      /* Where the fast walk ended: if libunwind goes on, has it unwind
       * data here, or does it guess (by the frame-pointer chain)? */
      unw_cursor_t here_cursor = *c;
      unw_word_t sp_here = 0, sp_next = 0;
      unw_get_reg(c, UNW_REG_SP, &sp_here);
      if (unw_step(c) <= 0)
        break;
      unw_get_reg(c, UNW_REG_SP, &sp_next);
      /* Without unwind data libunwind's x86 code answers with an empty
       * procedure of one byte at the PC rather than an error. Unwind data
       * that puts the caller's stack pointer at or below this frame's is
       * impossible (i386 glibc's SSE3 memcpy variants say CFA = esp - 4 or
       * esp + 0 in their tails), and libunwind reads below the stack
       * pointer there: a guess too. */
      unw_proc_info_t pi;
      memset(&pi, 0, sizeof pi);
      *guessed = unw_get_proc_info(&here_cursor, &pi) < 0 ||
                 (pi.unwind_info == NULL && pi.end_ip == pi.start_ip + 1) || sp_next <= sp_here;
    } else if (unw_step(c) <= 0) {
      break;
    }
    if (unw_get_reg(c, UNW_REG_IP, &ip) < 0 || ip == 0)
      break;
  }
  reference_jump = outer;
  return n;
}

#if defined(__arm__)
/* libunwind 1.6's ARM unw_getcontext writes its output register (r0)
 * before it stores through its base register, which the compiler may have
 * put in r0 too (it did here, and the reference stored r0-r14 at address
 * 0). The same stores, through a base the asm only reads: */
#define REFERENCE_GETCONTEXT(ctx)                                                                  \
  do {                                                                                             \
    unsigned long *base_ = (ctx)->regs;                                                            \
    __asm__ volatile("stmia %0, {r0-r12}\n\tstr sp, [%0, #52]\n\tstr lr, [%0, #56]\n"              \
                     "1:\n\tadr ip, 1b\n\torr ip, ip, #1\n\tstr ip, [%0, #60]"                  \
                     : : "r"(base_) : "ip", "memory");                                            \
  } while (0)
#else
#define REFERENCE_GETCONTEXT(ctx) unw_getcontext(ctx)
#endif

/* A reference call outside reference_walk (the cursor's set-up and the
 * step out of check_here) under the same fault guard: -1 if it faulted. */
#define GUARDED(call, result)                                                                      \
  do {                                                                                             \
    sigjmp_buf here_, *outer_ = reference_jump;                                                    \
    if (sigsetjmp(here_, 1)) {                                                                     \
      reference_jump = outer_;                                                                     \
      (result) = -1;                                                                               \
      break;                                                                                       \
    }                                                                                              \
    reference_jump = &here_;                                                                       \
    (result) = (call);                                                                             \
    reference_jump = outer_;                                                                       \
  } while (0)

static void keep_mismatch(const char *kind, const uintptr_t *fast, int n_fast,
                          const uintptr_t *ref, int n_ref)
{
  long k = atomic_fetch_add(&mismatches, 1);
  if (k < KEEP_MISMATCHES) {
    struct mismatch *m = &kept[k];
    m->kind = kind;
    m->n_fast = n_fast;
    m->n_ref = n_ref;
    for (int i = 0; i < 64; i++) {
      m->fast[i] = i < n_fast ? fast[i] : 0;
      m->ref[i] = i < n_ref ? ref[i] : 0;
    }
  }
}

static struct mismatch kept_fault;

#if defined(__arm__)
/* glibc's lookup of a PC's EHABI index (libgcc's unwinder uses it). */
extern uintptr_t __gnu_Unwind_Find_exidx(uintptr_t pc, int *count);

/* Whether the EHABI table does not describe an interrupted pc: no entry
 * covers it (no index, or pc below its first entry, where the linkers put
 * the PLT), or pc is its function's first instruction (the entry
 * describes the body, after the prologue's pushes): the entry's start, or
 * a function's first instruction as its code shows it in an entry the
 * linker merged over two functions (arm_function_entry), or a push of the
 * registers the entry pops that has not run (arm_push_at). */
static int table_not_yet(uintptr_t pc)
{
  int count = 0;
  const uint32_t *e = (const uint32_t *)__gnu_Unwind_Find_exidx(pc, &count);
  if (!e || count <= 0)
    return 1;
  uintptr_t start = 0;
  int found = -1;
  for (int lo = 0, hi = count; lo < hi;) {
    int mid = lo + (hi - lo) / 2;
    int32_t off = (int32_t)(e[2 * mid] << 1) >> 1;
    uintptr_t at = (uintptr_t)&e[2 * mid] + (uintptr_t)(intptr_t)off;
    if (at <= pc) {
      start = at;
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (start == 0 || start == pc || (pc > start && arm_function_entry(start, pc)))
    return 1;
  /* A push of exactly the registers the entry pops, not run yet (a leaf's
   * first instruction, or a shrink-wrapped prologue's push): arm_frame.c. */
  uint32_t pushed = pc > start ? arm_push_at(pc) : 0;
  struct ehabi_table t = {e, (size_t)count, 0, UINTPTR_MAX};
  struct ehabi_shape sh;
  return pushed && ehabi_shape(&t, &e[2 * found], &sh) == EHABI_OK && sh.saved == pushed;
}

/* Whether the EHABI table says code at pc cannot be unwound: its entry is
 * EXIDX_CANTUNWIND, or no entry covers it (libunwind's walk ends there). */
static int table_cantunwind(uintptr_t pc)
{
  int count = 0;
  const uint32_t *e = (const uint32_t *)__gnu_Unwind_Find_exidx(pc, &count);
  if (!e || count <= 0)
    return 1;
  int found = -1;
  for (int lo = 0, hi = count; lo < hi;) {
    int mid = lo + (hi - lo) / 2;
    int32_t off = (int32_t)(e[2 * mid] << 1) >> 1;
    if ((uintptr_t)&e[2 * mid] + (uintptr_t)(intptr_t)off <= pc) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return found < 0 || e[2 * found + 1] == 1;
}
#endif

/* The documented difference (ARM32, docs/stack-walking.md): at an
 * interrupted PC the EHABI table does not describe yet (table_not_yet: a
 * PLT stub, a function's first instruction, where qemu-user delivers many
 * signals), the fast walker takes the return address from lr; libunwind
 * applies the entry before it, or the function's own as if its prologue
 * had run, or ends. The stacks agree up to that frame (the first of a
 * signal walk, or the frame a signal trampoline returns to), and at the
 * first of a signal walk the fast walker's next frame is lr's. */
static int lr_frame(const char *kind, const uintptr_t *fast, int n_fast, const uintptr_t *ref,
                    int n_ref, uintptr_t lr0)
{
#if defined(__arm__)
  int k = 0;
  while (k < n_fast && k < n_ref && fast[k] == ref[k])
    k++;
  if (k == n_fast)
    return 0; /* the fast walk is no longer */
  /* The last interrupted frame before the stacks part: libunwind's step
   * from it may still give the right return address (lr, for an entry
   * that pops no lr) with a wrong stack pointer, so they can part one
   * frame later. */
  int e = k - 1;
  while (e > 0 && !is_sigreturn_trampoline(ref[e - 1] + 1))
    e--;
  if (e < 0 || (e == 0 && strcmp(kind, "signal") != 0))
    return 0;
  uintptr_t at = ref[e];
  if ((at & 1) || !table_not_yet(at))
    return 0;
  return e != 0 || fast[1] == frame_code_address(lr0) - 1;
#else
  (void)kind, (void)fast, (void)n_fast, (void)ref, (void)n_ref, (void)lr0;
  return 0;
#endif
}

#if defined(__arm__)
/* Whether code address `ra` (a return address, its mode bit cleared) follows
 * a call: Thumb BL or BLX <label> (32 bits) or BLX <Rm> (16 bits) just
 * before it, or, at a word boundary, an A32 BL, BLX <label> or BLX <Rm>. */
static int follows_call(uintptr_t ra)
{
  if (ra < 4 || !could_be_code(ra - 4) || !frame_memory_mapped(ra - 4, 4))
    return 0;
  uint16_t hi, lo;
  memcpy(&hi, (const void *)(ra - 4), 2);
  memcpy(&lo, (const void *)(ra - 2), 2);
  if ((lo & 0xff87) == 0x4780 ||
      ((hi & 0xf800) == 0xf000 && ((lo & 0xd000) == 0xd000 || (lo & 0xd001) == 0xc000)))
    return 1;
  uint32_t w;
  memcpy(&w, (const void *)(ra - 4), 4);
  return (ra & 3) == 0 && (((w & 0x0f000000) == 0x0b000000 && w >> 28 != 0xf) ||
                           (w & 0xfe000000) == 0xfa000000 || (w & 0x0ffffff0) == 0x012fff30);
}
#endif

/* ARM32: walks equal up to a frame that is no return address: past the
 * first frame, not the interrupted PC a signal frame gives back, an address
 * that follows no call. No call returns there, so what either walker finds
 * past it means nothing (frames past a wrong one are each walker's own
 * reading of whatever the stack holds). Seen under qemu-arm
 * (walk.corpus_c_O2_a32, a few runs in ten): the fast walker's own
 * module_of interrupted before its push, where its table entry, which
 * describes the body, had both walkers read a stale stack word as the
 * return address: the address of a libc function (pthread_condattr_destroy,
 * just after a literal pool). The fast walker now steps that frame by lr
 * (a push of the entry's registers not run yet: table_not_yet, lr_frame);
 * other interrupted prologues and epilogues remain. Counted apart, like
 * agreement up to an address that is no code. */
static int equal_up_to_no_return(const uintptr_t *fast, int n_fast, const uintptr_t *ref, int n_ref,
                                 uintptr_t lr0)
{
#if defined(__arm__)
  int common = n_fast < n_ref ? n_fast : n_ref;
  for (int j = 1; j < common && fast[j] == ref[j] && fast[j - 1] == ref[j - 1]; j++) {
    if (is_sigreturn_trampoline(fast[j - 1] + 1) || is_sigreturn_trampoline(fast[j] + 1))
      continue;
    if (!follows_call(fast[j] + 1)) {
      if (atomic_fetch_add(&no_return_tails, 1) == 0) {
        no_return_first = fast[j];
        no_return_pc = fast[0];
        no_return_lr = lr0;
      }
      return 1;
    }
  }
#else
  (void)fast, (void)n_fast, (void)ref, (void)n_ref, (void)lr0;
#endif
  return 0;
}

/* Whether the fast walk is the start of the reference's, which went on
 * past its end to a return address that is no code, or to one frame whose
 * own return address is no code: that frame was read from the wrong place
 * too, as its successor shows. (Seen under qemu-arm, 3 runs of 26 of
 * corpus_c_O0: a signal at the first instruction of a leaf in libunwind,
 * called during the fast walker's own libunwind replay; libunwind took the
 * check's caller for the leaf's, skipping the frames between, then read an
 * instruction word for the next return address and faulted past it. The
 * fast walk stopped at the leaf.) */
static int stopped_before_garbage(const uintptr_t *fast, int n_fast, const uintptr_t *ref, int n_ref)
{
  if (n_fast >= n_ref)
    return 0;
  for (int i = 0; i < n_fast; i++)
    if (fast[i] != ref[i])
      return 0;
  return !could_be_code(ref[n_fast]) || (n_fast + 1 < n_ref && !could_be_code(ref[n_fast + 1]));
}

static void compare(const char *kind, const uintptr_t *fast, int n_fast, int trunc_fast,
                    const uintptr_t *ref, int n_ref, int trunc_ref, int ref_faulted,
                    int ref_guessed, uintptr_t lr0)
{
  if (ref_faulted) {
    /* The reference's frames up to the one it faulted in stepping out of:
     * the fast walk must begin with them; what follows cannot be checked. */
    int prefix = n_fast >= n_ref;
    for (int i = 0; prefix && i < n_ref; i++)
      prefix = fast[i] == ref[i];
    atomic_fetch_add(&frames_compared, n_ref);
    /* ARM32: at a PC the table does not describe yet, where the fast walk
     * took lr, libunwind's step from the entry before reads through
     * whatever r11 or sp hold and may fault (A32 code called from libc,
     * whose r11 is no frame pointer): the documented difference too. */
    if (lr_frame(kind, fast, n_fast, ref, n_ref, lr0)) {
      atomic_fetch_add(&lr_past_reference, 1);
      return;
    }
    if (!prefix && stopped_before_garbage(fast, n_fast, ref, n_ref)) {
      atomic_fetch_add(&garbage_tails, 1);
      return;
    }
    if (!prefix) {
      keep_mismatch(kind, fast, n_fast, ref, n_ref);
      return;
    }
    if (atomic_fetch_add(&reference_faults, 1) == 0) {
      kept_fault.kind = kind;
      kept_fault.n_fast = n_fast;
      kept_fault.n_ref = n_ref;
      for (int i = 0; i < 64; i++) {
        kept_fault.fast[i] = i < n_fast ? fast[i] : 0;
        kept_fault.ref[i] = i < n_ref ? ref[i] : 0;
      }
    }
    return;
  }
  /* The fast walk ended (its checks failed, or its own guess read a null
   * return address) at a frame without unwind data, or with impossible
   * unwind data, where libunwind goes on by a guess of its own: up to
   * there the walks must agree, the rest is a guess and is counted
   * apart. */
  if (trunc_fast != WALK_TRUNCATED && ref_guessed && n_ref > n_fast) {
    int prefix = 1;
    for (int i = 0; prefix && i < n_fast; i++)
      prefix = fast[i] == ref[i];
    if (prefix) {
      atomic_fetch_add(&frames_compared, n_fast);
      atomic_fetch_add(&guessed_tails, 1);
      return;
    }
  }
  /* The reference tells a full buffer only; a walk the fast walker could
   * not step further (WALK_STOPPED) must still give exactly libunwind's
   * frames. */
  trunc_fast = trunc_fast == WALK_TRUNCATED;
  int same = n_fast == n_ref && trunc_fast == trunc_ref;
  for (int i = 0; same && i < n_fast; i++)
    same = fast[i] == ref[i];
  atomic_fetch_add(&frames_compared, n_ref < n_fast ? n_ref : n_fast);
  if (same)
    return;
#if defined(__arm__)
  /* ARM32: libunwind ends its walk at a frame without a table entry
   * (EXIDX_CANTUNWIND, code outside every entry); the fast walker reads
   * that frame's prologue and goes on (arm_prologue.c). Its walk must
   * begin with every frame of libunwind's; the frames after are checked
   * by walk.prologue_*, against the programs' own construction. */
  /* Whether a frame was stepped by its prologue: the walker's count, or
   * the reference's last frame in code without an entry. */
  if ((fast_prologue_frames || (n_ref > 0 && table_cantunwind((ref[n_ref - 1] & ~(uintptr_t)1) - 1))) &&
      !trunc_ref && n_fast > n_ref) {
    int k = 0;
    while (k < n_ref && fast[k] == ref[k])
      k++;
    if (k == n_ref) {
      atomic_fetch_add(&past_by_prologue, 1);
      return;
    }
  }
  /* A thread without stack bounds is walked by libunwind itself, under the
   * walker's fault escape: against the reference (libunwind too, with its
   * ARM defects worked around, under its own fault guard) only the frames
   * both have are compared; where one stopped on a fault is not. */
  if (fast_was_libunwind) {
    int k = 0, common = n_fast < n_ref ? n_fast : n_ref;
    while (k < common && fast[k] == ref[k])
      k++;
    if (k == common) {
      atomic_fetch_add(&libunwind_prefix, 1);
      return;
    }
  }
#endif
  if (lr_frame(kind, fast, n_fast, ref, n_ref, lr0)) {
    atomic_fetch_add(&lr_past_reference, 1);
    return;
  }
  if (equal_up_to_no_return(fast, n_fast, ref, n_ref, lr0))
    return;
  /* A stack that is being switched (libgcc installing a landing pad's
   * context, say), or unwind data that is wrong at one instruction (i386
   * glibc's SSE2 memcpy variants at their jump-table dispatch), can make
   * both walkers reach the same garbage return address; after it each
   * reads garbage its own way (on x86_64 libunwind follows the
   * frame-pointer chain and the fast walker stops; on AArch64 libunwind 1.6
   * repeats the address and stops, the fast walker guesses by frame
   * pointer). Agreement up to an address that is not even mapped, or that
   * is on the thread's own stack, is counted apart. */
  int common = n_fast < n_ref ? n_fast : n_ref, i = 0;
  while (i < common && fast[i] == ref[i] && could_be_code(fast[i]))
    i++;
  if (i < common && fast[i] == ref[i] && !trunc_fast) {
    atomic_fetch_add(&garbage_tails, 1);
    return;
  }
  /* Or the fast walk ended (a fault inside libunwind's step ends a walk
   * it makes: threads without stack bounds) where the reference went on
   * into garbage. */
  if (!trunc_fast && stopped_before_garbage(fast, n_fast, ref, n_ref)) {
    atomic_fetch_add(&garbage_tails, 1);
    return;
  }
  keep_mismatch(kind, fast, n_fast, ref, n_ref);
}

/* A reference walk must not start inside another on the same thread:
 * libunwind's cache (ARM, AArch64: check_init) is not safe against that,
 * and its lookups call dl_iterate_phdr, which is not async-signal-safe. So
 * the reference walks run with the sampler's signal blocked: one pair of
 * system calls per walk. */
static void reference_begin(sigset_t *old)
{
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, old);
}

static void reference_end(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

__attribute__((noinline)) void check_here(void)
{
  uintptr_t fast[MAX_FRAMES], ref[MAX_FRAMES]; /* on the stack: signal handlers nest */
  void *caller_ret = __builtin_return_address(0);
  int trunc_fast, trunc_ref;
  uint64_t by_libunwind = walks_by_libunwind();
  uint64_t by_prologue = frames_by_prologue();
  int n_fast = igprof_walk_fast_from_hook(fast, MAX_FRAMES, caller_ret, &trunc_fast);
  fast_was_libunwind = walks_by_libunwind() != by_libunwind;
  fast_prologue_frames = frames_by_prologue() - by_prologue;

  unw_context_t ctx;
  unw_cursor_t c;
  unw_word_t ip = 0;
  sigset_t old;
  reference_begin(&old);
  REFERENCE_GETCONTEXT(&ctx);
  int stepped;
  GUARDED(unw_init_local(&c, &ctx), stepped);
  /* One step leaves check_here: the reference then starts where a hook's
   * caller does. */
  if (stepped == 0)
    GUARDED(unw_step(&c), stepped);
  if (stepped < 0) {
    reference_end(&old);
    compare("hook", fast, n_fast, trunc_fast, ref, 0, 0, 1, 0, 0); /* faulted before its first frame */
    atomic_fetch_add(&points_hook, 1);
    return;
  }
  if (stepped == 0 || unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip != (uintptr_t)caller_ret) {
    reference_end(&old);
    compare("hook(reference lost)", fast, n_fast, trunc_fast, fast, 0, 0, 0, 0, 0);
    return;
  }
  int faulted, guessed;
  int n_ref = reference_walk(&c, ref, MAX_FRAMES, 0, &trunc_ref, &faulted,
                             trunc_fast != WALK_TRUNCATED ? n_fast : -1, &guessed);
  reference_end(&old);
  compare("hook", fast, n_fast, trunc_fast, ref, n_ref, trunc_ref, faulted, guessed, 0);
  atomic_fetch_add(&points_hook, 1);
}

void check_signal(const ucontext_t *uc)
{
  uintptr_t fast[MAX_FRAMES], ref[MAX_FRAMES]; /* on the stack: signal handlers nest */
  int trunc_fast, trunc_ref;
  uint64_t by_libunwind = walks_by_libunwind();
  uint64_t by_prologue = frames_by_prologue();
  int n_fast = igprof_walk_fast_from_signal(fast, MAX_FRAMES, uc, &trunc_fast);
  fast_was_libunwind = walks_by_libunwind() != by_libunwind;
  fast_prologue_frames = frames_by_prologue() - by_prologue;
  ucontext_t copy = *uc;
  unw_cursor_t c;
  sigset_t old;
  reference_begin(&old);
  int started;
  GUARDED(unw_init_local2(&c, UNW_CONTEXT(&copy), UNW_INIT_SIGNAL_FRAME), started);
  if (started < 0) {
    reference_end(&old);
    return;
  }
  int faulted, guessed;
  int n_ref = reference_walk(&c, ref, MAX_FRAMES, 1, &trunc_ref, &faulted,
                             trunc_fast != WALK_TRUNCATED ? n_fast : -1, &guessed);
  reference_end(&old);
#if defined(__arm__)
  uintptr_t lr0 = uc->uc_mcontext.arm_lr;
#else
  uintptr_t lr0 = 0;
#endif
  compare("signal", fast, n_fast, trunc_fast, ref, n_ref, trunc_ref, faulted, guessed, lr0);
  atomic_fetch_add(&points_signal, 1);
}

static void note_stack(void);

/* libunwind finds a PC's unwind entry with dl_iterate_phdr (ARM32: every
 * PC's EHABI index; x86, where the reference has no cache: every step;
 * AArch64: every miss of its cache), which takes the loader's write lock, a
 * recursive mutex, and is not async-signal-safe: a sample that lands in
 * its owner's lock or unlock (C++ code throwing: libgcc's unwinder calls
 * it for every frame unwound) finds the lock taken and no owner yet, and
 * waits for itself; the other thread then waits for both (walk.corpus_cxx
 * under qemu-arm, 3 runs of 10: lock word 2, owner 0; under qemu-i386, 2
 * runs of 12 once the x86 reference had no cache). A program whose modules
 * no longer change calls check_static_modules: the reference walks in the
 * sampler's handler then get the modules as listed once, without the
 * lock. */
static struct dl_phdr_info static_modules[64];
static int n_static_modules;
static __thread int in_sampler;
static int (*real_dl_iterate_phdr)(int (*)(struct dl_phdr_info *, size_t, void *), void *);

static int note_static_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size, (void)arg;
  if (n_static_modules < 64)
    static_modules[n_static_modules++] = *info;
  return 0;
}

void check_static_modules(void)
{
  n_static_modules = 0;
  real_dl_iterate_phdr(note_static_module, NULL);
}

int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
  if (in_sampler && n_static_modules > 0) {
    for (int i = 0; i < n_static_modules; i++) {
      int r = cb(&static_modules[i], sizeof static_modules[i], data);
      if (r)
        return r;
    }
    return 0;
  }
  return real_dl_iterate_phdr(cb, data);
}

void check_init(void)
{
  real_dl_iterate_phdr = (int (*)(int (*)(struct dl_phdr_info *, size_t, void *), void *))dlsym(
      RTLD_NEXT, "dl_iterate_phdr");
  if (!real_dl_iterate_phdr) {
    fprintf(stderr, "walk_check: no dl_iterate_phdr after this program's\n");
    exit(2);
  }
  dl_iterate_phdr(note_data_ranges, NULL);
#if defined(__arm__)
  /* libunwind's EHABI method only, as the runtime asks for it
   * (unwind_private.c): its DWARF method reads .debug_frame from files,
   * its frame-chain method follows r11 through data. */
  setenv("UNW_ARM_UNWIND_METHOD", "4", 1);
#endif
  note_stack();
  /* libunwind 1.6 keys its cache of unwind rows by the PC alone, not by
   * whether the row was looked up at the PC (an interrupted frame) or at
   * the instruction before it (a return address). The two rows differ
   * after a call to a function that pops its own argument (x86: `ret $4`,
   * which i386 code has for a structure returned in memory): there the
   * row the first lookup found served the other kind of frame, a stack
   * pointer 4 bytes off and garbage after it (walk.corpus_cxx on i386, a
   * signal at step_slow's return from recipe_for after walks through that
   * call, one run in many; walk.interrupted_return builds that case). On
   * x86 the reference runs without the cache, as the runtime does
   * (walk.c). ARM and AArch64 code has no such calls (only a call that
   * does not return can end a row at its return address), and there
   * libunwind without its cache is some 30 times slower under qemu. */
#if defined(__i386__) || defined(__x86_64__)
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE);
#else
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  /* Room for every PC of the corpus: each miss looks the PC up with
   * dl_iterate_phdr between two sigprocmask calls. */
  unw_set_cache_size(unw_local_addr_space, 4096, 0);
#endif
  find_sigreturn_trampoline();
  catch_reference_faults();
  igprof_walk_fast_init();
}

static void note_stack(void)
{
  pthread_attr_t attr;
  void *lo;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
      stack_lo = (uintptr_t)lo;
      stack_hi = (uintptr_t)lo + size;
    }
    pthread_attr_destroy(&attr);
  }
}

void check_thread_init(void)
{
  igprof_walk_fast_thread_init();
  note_stack();
}

/* ---- sampler ------------------------------------------------------------- */

static timer_t sampler_timer;
static int64_t sampler_started; /* monotonic_ns() at sampler_start */

/* 64-bit nanoseconds: a 32-bit long wraps every 4.3 s (i386, ARM32). */
static int64_t thread_cpu_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t monotonic_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The sampler's checks take at most a quarter of the wall time, whatever a
 * check costs on this machine: after a check that took d of the thread's
 * processor time, ticks are let pass for 3d. Without that, where system
 * calls are slow (the reference's libunwind takes a sigprocmask pair per
 * step, around its cache's lock or, without the cache, its lookup), a check outlasted the 1 ms period and the
 * handler took all the time the workload needed to finish. */
static _Atomic int64_t sampler_quiet_until;

static void on_sample(int sig, siginfo_t *si, void *ucv)
{
  (void)sig;
  (void)si;
  int64_t start = monotonic_ns();
  if (start < atomic_load(&sampler_quiet_until))
    return;
  atomic_fetch_add(&samples, 1);
  int64_t cpu_start = thread_cpu_ns();
  in_sampler = 1;
  check_signal(ucv);
  check_here(); /* hook-style walk across the sigreturn frame */
  in_sampler = 0;
  /* The check's own processor time, not its wall time: a reference walk
   * that waits for a lock the other thread's walk holds (libunwind's cache
   * lock, or the loader's) would otherwise count the wait, and the quiet
   * time grew with the contention until signal points came 20 times more
   * slowly (i386 natively, some runs). */
  int64_t took = thread_cpu_ns() - cpu_start;
  atomic_store(&sampler_quiet_until, monotonic_ns() + 3 * took);
}

void sampler_start(long usec)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sample;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGPROF;
  if (timer_create(CLOCK_MONOTONIC, &ev, &sampler_timer) != 0) {
    perror("timer_create");
    exit(2);
  }
  struct itimerspec its = {{0, usec * 1000}, {0, usec * 1000}};
  sampler_started = monotonic_ns();
  timer_settime(sampler_timer, 0, &its, NULL);
}

void sampler_stop(void)
{
  struct itimerspec off;
  memset(&off, 0, sizeof off);
  timer_settime(sampler_timer, 0, &off, NULL);
  timer_delete(sampler_timer);
  signal(SIGPROF, SIG_IGN);
}

long sampler_samples(void) { return atomic_load(&samples); }

int sampler_more_rounds(long min_signal, long target)
{
  double elapsed = (double)(monotonic_ns() - sampler_started) * 1e-9;
  long got = atomic_load(&points_signal);
  return (got < target && elapsed < 8) || (got < min_signal + min_signal / 4 && elapsed < 40);
}

/* ---- report -------------------------------------------------------------- */

static void print_frame(const char *side, int i, uintptr_t pc)
{
  Dl_info info;
  if (pc && dladdr((void *)pc, &info) && info.dli_sname)
    printf("    %s[%2d] %#lx %s+%#lx (%s)\n", side, i, (unsigned long)pc, info.dli_sname,
           (unsigned long)(pc - (uintptr_t)info.dli_saddr), info.dli_fname);
  else if (pc && dladdr((void *)pc, &info))
    printf("    %s[%2d] %#lx %s+%#lx\n", side, i, (unsigned long)pc, info.dli_fname,
           (unsigned long)(pc - (uintptr_t)info.dli_fbase));
  else
    printf("    %s[%2d] %#lx\n", side, i, (unsigned long)pc);
}

static void print_module(const struct walk_fast_module_info *m, void *arg)
{
  (void)arg;
  printf("  module %-40s rows=%u fdes=%u complex=%u bad=%u status=%s\n",
         m->name[0] ? m->name : "(main program)", m->rows, m->fdes, m->complex_rows,
         m->bad_fdes, m->status);
}

static void print_mismatch(const struct mismatch *m)
{
  printf("(%s): fast %d frames, libunwind %d frames\n", m->kind, m->n_fast, m->n_ref);
  int n = m->n_fast > m->n_ref ? m->n_fast : m->n_ref;
  for (int i = 0; i < n && i < 64; i++) {
    if (i < m->n_fast && i < m->n_ref && m->fast[i] == m->ref[i]) {
      print_frame("same", i, m->fast[i]);
      continue;
    }
    print_frame("fast", i, i < m->n_fast ? m->fast[i] : 0);
    print_frame("ref ", i, i < m->n_ref ? m->ref[i] : 0);
  }
}

int check_report(const char *name, long min_frames, long min_signal)
{
  struct walk_fast_stats st;
  igprof_walk_fast_stats(&st);
  long mm = atomic_load(&mismatches), frames = atomic_load(&frames_compared);
  long sig = atomic_load(&points_signal), hook = atomic_load(&points_hook);
  igprof_walk_fast_modules(print_module, NULL);
  long tails = atomic_load(&garbage_tails), lr_past = atomic_load(&lr_past_reference);
  long guessed = atomic_load(&guessed_tails);
  if (atomic_load(&past_by_prologue))
    printf("%s: %ld walks went on past libunwind's end by reading prologues, equal to it up to "
           "there\n",
           name, (long)atomic_load(&past_by_prologue));
  if (atomic_load(&libunwind_prefix))
    printf("%s: %ld walks of a thread without stack bounds (libunwind's own) equal the reference "
           "up to where one of them stopped\n",
           name, (long)atomic_load(&libunwind_prefix));
  if (atomic_load(&no_return_tails))
    printf("%s: %ld walks equal up to a frame that follows no call (first: %#lx, in a walk from "
           "%#lx, lr %#lx)\n",
           name, (long)atomic_load(&no_return_tails), (unsigned long)no_return_first,
           (unsigned long)no_return_pc, (unsigned long)no_return_lr);
  printf("%s: hook points %ld, signal points %ld, frames compared %ld, mismatches %ld, "
         "equal up to a return address that is no code %ld, "
         "equal up to where the fast walk stopped and libunwind guessed (no or impossible unwind data) %ld, "
         "from lr where the EHABI table does not apply yet %ld "
         "(main thread: recipe steps %lu, libunwind steps %lu, cut %lu, "
         "recipes derived %lu)\n",
         name, hook, sig, frames, mm, tails, guessed, lr_past, (unsigned long)st.frames_fast,
         (unsigned long)st.frames_unwinder,
         (unsigned long)st.walks_cut, (unsigned long)st.derivations);
  for (long k = 0; k < mm && k < KEEP_MISMATCHES; k++) {
    printf("  mismatch %ld ", k);
    print_mismatch(&kept[k]);
  }
  long faults = atomic_load(&reference_faults);
  if (faults) {
    printf("  %ld reference walks faulted, equal up to there; the first ", faults);
    print_mismatch(&kept_fault);
  }
  int ok = 1;
  if (faults * 1000 > hook + sig) {
    printf("FAIL: %ld reference walks faulted, more than 1 in 1000\n", faults);
    ok = 0;
  }
  if (mm != 0) {
    printf("FAIL: %ld stacks differ from libunwind\n", mm);
    ok = 0;
  }
  if (tails * 1000 > hook + sig) {
    printf("FAIL: %ld walks ended at garbage, more than 1 in 1000\n", tails);
    ok = 0;
  }
  if (frames < min_frames) {
    printf("FAIL: only %ld frames compared, expected at least %ld\n", frames, min_frames);
    ok = 0;
  }
  if (sig < min_signal) {
    printf("FAIL: only %ld signal-started walks compared, expected at least %ld\n", sig,
           min_signal);
    ok = 0;
  }
  return ok ? 0 : 1;
}
