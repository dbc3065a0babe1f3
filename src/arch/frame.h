/* Per-architecture frame stepping for the fast stack walker.
 *
 * The walker describes every instruction address by a "frame recipe": where
 * the canonical frame address (CFA) is (stack pointer or frame pointer plus a
 * constant), where the return address is saved (CFA plus a constant) and what
 * happened to the frame pointer (unchanged, or saved at CFA plus a constant).
 * That is all the shape information that ordinary compiled code on x86_64,
 * AArch64 and friends needs at a call site; anything richer (DWARF
 * expressions, signal frames) is marked so the walker hands that one frame to
 * libunwind instead.
 *
 * This header holds what is the same on every architecture: the register
 * triple the walker tracks, the recipe encoding and the step itself. Each
 * architecture's file (src/arch/<arch>_frame.c) supplies the DWARF register
 * numbers, the conversions from and to a ucontext, and the memory probe.
 */
#ifndef IGPROF_ARCH_FRAME_H
#define IGPROF_ARCH_FRAME_H

#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "pages.h"

/* Per-architecture constants (see docs/porting.md, "Frame stepping"). */
#if defined(__x86_64__)
/* A call pushes the return address: no register holds it, even in a leaf. */
#define FRAME_LINK_REGISTER 0
/* Call-frame instruction 0x2d is DW_CFA_GNU_window_save (SPARC): not ours. */
#define FRAME_NEGATE_RA_STATE 0
/* Instructions start at any byte. */
#define FRAME_CODE_ALIGN 1
/* glibc's __restore_rt: mov $15 (rt_sigreturn), %rax; syscall */
#define FRAME_SIGRETURN_LEN 9
/* Where a call leaves the return address, relative to the CFA: the call
 * pushed it just below the caller's stack pointer. */
#define FRAME_CALL_RA_OFFSET (-8)
/* A function compiled with a frame pointer keeps a frame record at it:
 * [caller's frame pointer, return address] (push %rbp right after the
 * call's push), and the caller's stack pointer after the call is just above
 * the record, so the record alone gives the caller's registers. */
#define FRAME_RECORD_AT_FP 1
#define FRAME_RECORD_FP 0         /* word of the caller's frame pointer */
#define FRAME_RECORD_RA 1         /* word of the return address */
#define FRAME_RECORD_CALLER_SP 16 /* bytes from the record to the caller's SP */
#elif defined(__i386__)
/* As on x86_64 with 4-byte words: a call pushes the return address. */
#define FRAME_LINK_REGISTER 0
#define FRAME_NEGATE_RA_STATE 0
#define FRAME_CODE_ALIGN 1
/* The C library's and the vDSO's trampolines: sigreturn's (pop %eax;
 * mov $0x77, %eax; int $0x80: 8 bytes) and rt_sigreturn's (mov $0xad,
 * %eax; int $0x80: 7 bytes). */
#define FRAME_SIGRETURN_LEN 8
/* The call pushed the return address just below the caller's stack pointer. */
#define FRAME_CALL_RA_OFFSET (-4)
/* push %ebp; mov %esp, %ebp: [caller's %ebp, return address] at FP, the
 * caller's stack pointer after the call just above it. */
#define FRAME_RECORD_AT_FP 1
#define FRAME_RECORD_FP 0
#define FRAME_RECORD_RA 1
#define FRAME_RECORD_CALLER_SP 8
#elif defined(__aarch64__)
/* A call (bl, blr) leaves the return address in x30, the link register; a
 * function that calls others saves it, with the caller's x29, as a frame
 * record (stp x29, x30, [sp, #-N]!), usually at the bottom of its frame:
 * the return address at CFA - N + 8. Until the prologue has saved it, and
 * again once the epilogue has restored it, the return address is in x30,
 * which only the interrupted frame of a signal still holds. */
#define FRAME_LINK_REGISTER 1
/* Call-frame instruction 0x2d is DW_CFA_AARCH64_negate_ra_state: the
 * return address is signed from there (paciasp) or no longer (autiasp). */
#define FRAME_NEGATE_RA_STATE 1
/* Instructions are 4 bytes, 4-byte aligned: so is every return address. */
#define FRAME_CODE_ALIGN 4
/* The vDSO's (or glibc's) trampoline: mov x8, #139 (rt_sigreturn); svc #0 */
#define FRAME_SIGRETURN_LEN 8
/* A frame record at the top of the frame (stp x29, x30, [sp, #-16]! first,
 * as JIT compilers lay frames out) puts the return address at CFA - 8. */
#define FRAME_CALL_RA_OFFSET (-8)
/* The frame record at x29: [caller's x29, return address]. Where the
 * caller's stack pointer is the record does not say (GCC puts the record
 * at the bottom of the frame), so a walk cannot start from it:
 * FRAME_RECORD_CALLER_SP is not defined. */
#define FRAME_RECORD_AT_FP 1
#define FRAME_RECORD_FP 0
#define FRAME_RECORD_RA 1
/* Return addresses signed by pointer authentication (paciasp) carry a
 * signature above the virtual address bits; Linux gives user space 48-bit
 * addresses (code is never mapped above them), so clearing the upper 16
 * bits strips any signature and leaves an unsigned address as it is. */
#define FRAME_CODE_ADDRESS_MASK (((uintptr_t)1 << 48) - 1)
#elif defined(__arm__)
/* ARM32 (A32 and Thumb-2): bl and blx leave the return address in lr
 * (r14), with bit 0 set when the caller is Thumb code; a function that
 * calls others pushes it with the registers it saves (push {r4, ..., lr}),
 * as the highest word: the return address at CFA - 4. */
#define FRAME_LINK_REGISTER 1
/* Call-frame instruction 0x2d is not ARM's. */
#define FRAME_NEGATE_RA_STATE 0
/* Thumb instructions are 2 bytes, 2-byte aligned (A32 ones 4). */
#define FRAME_CODE_ALIGN 2
/* glibc's __default_rt_sa_restorer and the kernel's (or qemu's) return
 * code: mov r7, #173 (rt_sigreturn); svc 0 in A32, 8 bytes. */
#define FRAME_SIGRETURN_LEN 8
#define FRAME_CALL_RA_OFFSET (-4)
/* No frame record the walker can start from: GCC's Thumb code points r7 at
 * the bottom of the frame, below the locals, and its A32 code points r11
 * at the saved lr; neither says where the caller's stack pointer is. */
#define FRAME_RECORD_AT_FP 0
/* Unwinding is described by EHABI tables (.ARM.exidx), not .eh_frame: the
 * recipes come from src/arch/arm_frame.c's reading of them. The frame
 * pointer of a recipe is r7 (Thumb code's, which Debian's armhf code is);
 * r11, A32 code's frame pointer, is carried beside it (struct frame_regs)
 * while it is known. */
#define FRAME_EHABI_TABLES 1
/* The Thumb bit of a return address is not part of the address: cleared,
 * a return address minus 1 lies inside the call instruction, as elsewhere. */
#define FRAME_CODE_ADDRESS_MASK (~(uintptr_t)1)
#else
#error "frame.h: no frame stepping for this architecture yet"
#endif

/* The registers the fast walker tracks from frame to frame. */
struct frame_regs {
  uintptr_t pc; /* instruction address of this frame */
  uintptr_t sp; /* stack pointer value in this frame (at pc) */
  uintptr_t fp; /* frame pointer register value in this frame (at pc) */
#if FRAME_LINK_REGISTER
  /* The link register, known only in an interrupted frame (from the
   * signal's context, or restored from a signal frame); 0 elsewhere. */
  uintptr_t lr;
#endif
#ifdef FRAME_EHABI_TABLES
  /* r11: no recipe's CFA is r11's (the EHABI interpreter steps those
   * frames, A32 code with a frame pointer); a recipe restores it where the
   * frame saved it next to the return address (FRAME_R11_SAVED), the
   * interpreter wherever its pops put it, and the other frames leave it
   * alone. 0 where not known (a hook walk's start): the interpreter then
   * hands a frame whose CFA is r11's to libunwind. */
  uintptr_t r11;
#endif
};

/* What a recipe says about a range of instructions. */
enum frame_kind {
  FRAME_NO_INFO = 0,   /* no unwind information covers this address */
  FRAME_COMPLEX = 1,   /* information exists but needs the DWARF unwinder */
  FRAME_OUTERMOST = 2, /* return address is undefined: the stack ends here */
  FRAME_CFA_SP = 3,    /* CFA = SP + cfa_offset */
  FRAME_CFA_FP = 4,    /* CFA = FP + cfa_offset */
  /* CFA = the word at FP + cfa_offset: a frame that realigned its stack
   * pointer and keeps the caller's in a slot of the frame (GCC's "DRAP":
   * main on i386, functions with over-aligned locals on x86), the saved
   * FP, if any, at FP + fp_offset (relative to FP, not to the CFA). */
  FRAME_CFA_DEREF = 5,
};

/* Set in frame_recipe.flags when the caller's frame pointer was saved at
 * CFA + fp_offset; otherwise the frame pointer is unchanged by this frame. */
#define FRAME_FP_SAVED 0x1u
/* Set on FRAME_COMPLEX rows of signal trampolines (CIE augmentation 'S'):
 * the frame they return to was interrupted, so its PC is exact. */
#define FRAME_SIGNAL 0x2u
/* The return address is still in the link register (FRAME_LINK_REGISTER
 * architectures: a leaf, a prologue before the save, an epilogue after the
 * restore); ra_offset is 0. Only an interrupted frame can be stepped so. */
#define FRAME_RA_IN_LR 0x4u
/* On FRAME_COMPLEX recipes of EHABI tables (FRAME_EHABI_TABLES): the frame
 * is stepped by the EHABI interpreter from its table entry (it saves r11,
 * sets the CFA from r11, or pops sp), not by libunwind. */
#define FRAME_EHABI 0x8u
/* ARM32 (FRAME_EHABI_TABLES): the frame saved r11 just below the return
 * address (push {..., r11, lr}), where the step restores it from. */
#define FRAME_R11_SAVED 0x10u

struct frame_recipe {
  int32_t cfa_offset;
  int32_t fp_offset; /* valid with FRAME_FP_SAVED */
  int32_t ra_offset; /* return address is at CFA + ra_offset (not with FRAME_RA_IN_LR) */
  uint8_t kind;      /* enum frame_kind */
  uint8_t flags;     /* FRAME_FP_SAVED, FRAME_SIGNAL, FRAME_RA_IN_LR, FRAME_EHABI */
};

static inline int frame_recipe_same(struct frame_recipe a, struct frame_recipe b)
{
  return a.cfa_offset == b.cfa_offset && a.fp_offset == b.fp_offset &&
         a.ra_offset == b.ra_offset && a.kind == b.kind && a.flags == b.flags;
}

/* A return address as read from the stack or the link register, as a code
 * address (pointer-authentication signature stripped where there is one). */
static inline uintptr_t frame_code_address(uintptr_t ra)
{
#ifdef FRAME_CODE_ADDRESS_MASK
  return ra & FRAME_CODE_ADDRESS_MASK;
#else
  return ra;
#endif
}

/* Architecture facts the recipe compiler needs (DWARF numbering). */
struct frame_arch {
  const char *name;
  unsigned dwarf_sp; /* DWARF number of the stack pointer */
  unsigned dwarf_fp; /* DWARF number of the frame pointer */
  unsigned dwarf_ra; /* return-address column of ordinary CIEs */
  unsigned min_insn; /* smallest instruction size (1 on x86) */
  unsigned red_zone; /* bytes below SP a leaf may use and a signal preserves */
  /* The frame record the frame-pointer chain links (the caller's frame
   * pointer and the return address at FP): the walker's guess for code
   * without unwind information, as JIT compilers that keep the chain lay
   * out their frames. */
  struct frame_recipe fp_chain;
};
extern const struct frame_arch frame_arch;

enum frame_step_result {
  FRAME_STEP_OK,        /* regs now describe the caller */
  FRAME_STEP_END,       /* the recipe says this is the outermost frame */
  FRAME_STEP_UNWINDER,  /* the recipe cannot describe this frame */
  FRAME_STEP_BAD_STACK, /* the step would read outside [lo, hi) or not move outwards */
};

/* Step from the frame in `r` to its caller using `rc`. Memory is read only in
 * [lo, hi - 8], the part of the thread's stack the walker has proven mapped,
 * and the CFA must lie strictly above the current stack pointer, so a corrupt
 * stack can only end the walk, never fault or loop. A return address still
 * in the link register is taken from r->lr, which only an interrupted frame
 * knows (elsewhere the step fails as a bad stack); that step may leave the
 * stack pointer where it is (a leaf without a frame), and it cannot repeat,
 * since the caller's lr is unknown (0). On
 * success r->pc is the caller's return address (not yet adjusted for
 * symbolisation). */
static inline enum frame_step_result frame_step(struct frame_regs *r, struct frame_recipe rc,
                                                uintptr_t lo, uintptr_t hi)
{
  uintptr_t cfa, fp_base, ra;
  switch (rc.kind) {
  case FRAME_CFA_SP: cfa = fp_base = r->sp + (intptr_t)rc.cfa_offset; break;
  case FRAME_CFA_FP: cfa = fp_base = r->fp + (intptr_t)rc.cfa_offset; break;
  case FRAME_CFA_DEREF: {
    uintptr_t cfa_at = r->fp + (intptr_t)rc.cfa_offset;
    if (cfa_at < lo || cfa_at > hi - sizeof(uintptr_t))
      return FRAME_STEP_BAD_STACK;
    cfa = *(const uintptr_t *)cfa_at;
    fp_base = r->fp;
    break;
  }
  case FRAME_OUTERMOST: return FRAME_STEP_END;
  default: return FRAME_STEP_UNWINDER;
  }
  if (rc.flags & FRAME_RA_IN_LR) {
#if FRAME_LINK_REGISTER
    /* At a return address the link register was overwritten by the call
     * itself: a recipe saying the return address is still there is the
     * mark of a stack read wrongly (or of a function that never returns),
     * and the walk ends. */
    if (!r->lr)
      return FRAME_STEP_BAD_STACK;
    if (cfa < r->sp || cfa > hi)
      return FRAME_STEP_BAD_STACK;
    ra = r->lr;
#else
    return FRAME_STEP_UNWINDER;
#endif
  } else {
    uintptr_t ra_at = cfa + (intptr_t)rc.ra_offset;
    if (cfa <= r->sp || cfa > hi || ra_at < lo || ra_at > hi - sizeof(uintptr_t))
      return FRAME_STEP_BAD_STACK;
    ra = *(const uintptr_t *)ra_at;
#ifdef FRAME_EHABI_TABLES
    if (rc.flags & FRAME_R11_SAVED) {
      if (ra_at - sizeof(uintptr_t) < lo)
        return FRAME_STEP_BAD_STACK;
      r->r11 = *(const uintptr_t *)(ra_at - sizeof(uintptr_t));
    }
#endif
  }
  uintptr_t fp = r->fp;
  if (rc.flags & FRAME_FP_SAVED) {
    uintptr_t fp_at = fp_base + (intptr_t)rc.fp_offset;
    if (fp_at < lo || fp_at > hi - sizeof(uintptr_t))
      return FRAME_STEP_BAD_STACK;
    fp = *(const uintptr_t *)fp_at;
  }
  r->pc = frame_code_address(ra);
  r->sp = cfa;
  r->fp = fp;
#if FRAME_LINK_REGISTER
  r->lr = 0;
#endif
  return FRAME_STEP_OK;
}

/* Registers of the interrupted context of a signal. */
void frame_regs_from_ucontext(struct frame_regs *r, const ucontext_t *uc);

/* `r` is the frame of a signal return trampoline (its sp the signal frame
 * the kernel pushed): replace it with the interrupted frame's registers,
 * read from the signal frame's context, every word of it in [lo, hi - 8].
 * Returns 0 where the walker leaves signal frames to libunwind (x86_64) or
 * the context lies outside the bounds. */
int frame_regs_from_signal_frame(struct frame_regs *r, uintptr_t lo, uintptr_t hi);

/* Fill a zeroed ucontext with `r` so a DWARF unwinder can start from it. */
void frame_regs_to_ucontext(ucontext_t *uc, const struct frame_regs *r);

/* A ucontext_t as libunwind's unw_context_t: the same type on x86, on
 * AArch64 a shorter struct with ucontext_t's layout (its FP/SIMD save area
 * cut down), so a whole ucontext_t can stand for it. On ARM32 it is r0-r15,
 * which the ucontext holds as 16 consecutive words from arm_r0. */
#if defined(__arm__)
#define UNW_CONTEXT(uc) ((unw_context_t *)(void *)&(uc)->uc_mcontext.arm_r0)
#else
#define UNW_CONTEXT(uc) ((unw_context_t *)(void *)(uc))
#endif

/* Read the frame's registers from a libunwind cursor (unw_cursor_t *),
 * after unw_step. Returns 0 when libunwind cannot tell. */
int frame_regs_from_unwinder(struct frame_regs *r, void *unw_cursor);

/* frame_memory_mapped (pages.h): whether [addr, addr + len) is mapped,
 * asked of the kernel (async-signal-safe, no memory access). Used before
 * handing unknown code to the DWARF unwinder, which reads instructions and
 * frame-pointer chains without checking. */

/* Whether the code at `pc` is a signal return trampoline (the C library's
 * or the vDSO's rt_sigreturn), so the frame it returns to was interrupted:
 * for code whose unwind data says nothing (no CIE 'S' flag to go by; qemu's
 * AArch64 vDSO has no CFI for its trampoline). frame_is_sigreturn first asks
 * the kernel whether the code is mapped; frame_code_is_sigreturn reads it
 * straight away (FRAME_SIGRETURN_LEN bytes from pc, known to be mapped). */
int frame_is_sigreturn(uintptr_t pc);
int frame_code_is_sigreturn(uintptr_t pc);

#ifdef FRAME_EHABI_TABLES
#include "arm_ehabi.h"
/* The recipe of `pc` (a return address less 1, or an interrupted PC) from
 * a module's EHABI index `t`: FRAME_NO_INFO below its first entry,
 * FRAME_OUTERMOST for EXIDX_CANTUNWIND (libunwind's walk ends there too),
 * FRAME_COMPLEX | FRAME_EHABI for what only the interpreter steps,
 * FRAME_COMPLEX (libunwind) for what it does not take. */
struct frame_recipe frame_ehabi_recipe(const struct ehabi_table *t, uintptr_t pc);
/* Step `r` from the frame at `pc` with the EHABI interpreter, reading the
 * stack only in [lo, hi): FRAME_STEP_UNWINDER for what it does not take. */
enum frame_step_result frame_ehabi_step(const struct ehabi_table *t, uintptr_t pc, struct frame_regs *r,
                                        uintptr_t lo, uintptr_t hi);
#endif

#if defined(FRAME_EHABI_TABLES) || defined(__i386__)
/* Step a libunwind cursor (unw_cursor_t) at the signal trampoline `pc` to
 * the interrupted frame, read from the signal frame into `uc` (which the
 * cursor then reads, so it must outlive its use): libunwind 1.6 reads
 * ARM's sigreturn frame (a handler without SA_SIGINFO) from the wrong
 * place, and on i386 looks the interrupted frame's row up at the
 * instruction before its PC (and follows qemu-i386's vDSO unwind data,
 * which is one word off). 0: not a trampoline, or the frame is not
 * mapped. */
#define FRAME_UNWINDER_SIGNAL_STEP 1
int frame_unwinder_signal_step(void *unw_cursor, ucontext_t *uc, uintptr_t pc);
#endif

/* i386 position-independent code learns its own address by calling a PC
 * thunk (mov (%esp), %reg; ret: __x86.get_pc_thunk.*), which most objects
 * link without unwind data and which every PIC function calls, so a signal
 * often lands in one. An interrupted PC on either of its two instructions
 * has its return address at the stack pointer. FRAME_PC_THUNK_BEFORE bytes
 * before pc and FRAME_PC_THUNK_AFTER from it must be readable; the other
 * architectures have no such thunk (0). */
#if defined(__i386__)
#define FRAME_PC_THUNK_BEFORE 3
#define FRAME_PC_THUNK_AFTER 4
static inline int frame_pc_thunk_mov(const unsigned char *c)
{
  /* 8b /r with mod 00, r/m 100 and SIB 0x24 ([%esp]), any register but %esp */
  return c[0] == 0x8b && (c[1] & 0xc7) == 0x04 && (c[1] & 0x38) != 0x20 && c[2] == 0x24 &&
         c[3] == 0xc3;
}
static inline int frame_code_is_pc_thunk(uintptr_t pc)
{
  const unsigned char *c = (const unsigned char *)pc;
  return frame_pc_thunk_mov(c) || (c[0] == 0xc3 && frame_pc_thunk_mov(c - 3));
}
/* Step a libunwind cursor (unw_cursor_t) at an interrupted PC thunk to the
 * thunk's caller, through `uc`, which the cursor then reads its registers
 * from (it must outlive the cursor's use). 0: the stack pointer is not
 * mapped. */
int frame_unwinder_pc_thunk_step(void *unw_cursor, ucontext_t *uc);
#else
#define FRAME_PC_THUNK_BEFORE 0
#define FRAME_PC_THUNK_AFTER 0
static inline int frame_code_is_pc_thunk(uintptr_t pc)
{
  (void)pc;
  return 0;
}
#endif

/* Registers of the calling function at the point of the call, captured
 * inline so that pc and sp describe the same instruction (and, with a link
 * register, lr: if the recipe there says the return address is still in
 * it, it is). */
#if defined(__x86_64__)
#define FRAME_REGS_HERE(r)                                                                     \
  __asm__ volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"                    \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp))
#elif defined(__i386__)
/* call/pop: i386 has no PC-relative lea (the pop leaves pc at the label). */
#define FRAME_REGS_HERE(r)                                                                     \
  __asm__ volatile("call 1f\n1:\n\tpopl %0\n\tmovl %%esp, %1\n\tmovl %%ebp, %2"              \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp))
#elif defined(__aarch64__)
#define FRAME_REGS_HERE(r)                                                                     \
  __asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"                   \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp), "=r"((r)->lr))
#elif defined(__arm__)
/* Stores, not moves to outputs: an output the compiler put in r7, r11 or
 * lr would be written before that register is read. The label's address
 * (no Thumb bit: a local label is no function) is the stores' PC. */
#define FRAME_REGS_HERE(r)                                                                     \
  __asm__ volatile("str sp, [%0, #4]\n\tstr r7, [%0, #8]\n\tstr lr, [%0, #12]\n\t"            \
                   "str r11, [%0, #16]\n1:\n\tadr ip, 1b\n\tstr ip, [%0]"                     \
                   : : "r"(r) : "ip", "memory")
#endif

#ifdef FRAME_RECORD_CALLER_SP
/* The registers of the caller of the function whose frame record is at
 * `record` (its frame pointer), at the return address. */
static inline void frame_regs_from_record(struct frame_regs *r, const uintptr_t *record)
{
  r->pc = record[FRAME_RECORD_RA];
  r->sp = (uintptr_t)record + FRAME_RECORD_CALLER_SP;
  r->fp = record[FRAME_RECORD_FP];
}
#endif

#endif
