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

/* The registers the fast walker tracks from frame to frame. */
struct frame_regs {
  uintptr_t pc; /* instruction address of this frame */
  uintptr_t sp; /* stack pointer value in this frame (at pc) */
  uintptr_t fp; /* frame pointer register value in this frame (at pc) */
};

/* What a recipe says about a range of instructions. */
enum frame_kind {
  FRAME_NO_INFO = 0,   /* no unwind information covers this address */
  FRAME_COMPLEX = 1,   /* information exists but needs the DWARF unwinder */
  FRAME_OUTERMOST = 2, /* return address is undefined: the stack ends here */
  FRAME_CFA_SP = 3,    /* CFA = SP + cfa_offset */
  FRAME_CFA_FP = 4,    /* CFA = FP + cfa_offset */
};

/* Set in frame_recipe.flags when the caller's frame pointer was saved at
 * CFA + fp_offset; otherwise the frame pointer is unchanged by this frame. */
#define FRAME_FP_SAVED 0x1u
/* Set on FRAME_COMPLEX rows of signal trampolines (CIE augmentation 'S'):
 * the frame they return to was interrupted, so its PC is exact. */
#define FRAME_SIGNAL 0x2u

/* Eight bytes, so a recipe can be moved through the PC cache as one word. */
struct frame_recipe {
  int32_t cfa_offset;
  int16_t fp_offset; /* valid with FRAME_FP_SAVED */
  int8_t ra_offset;  /* return address is at CFA + ra_offset */
  uint8_t kind : 4;  /* enum frame_kind */
  uint8_t flags : 4; /* FRAME_FP_SAVED, FRAME_SIGNAL */
};

_Static_assert(sizeof(struct frame_recipe) == 8, "a recipe must pack into one 64-bit word");

static inline uint64_t frame_recipe_pack(struct frame_recipe r) {
  uint64_t w;
  memcpy(&w, &r, sizeof w);
  return w;
}

static inline struct frame_recipe frame_recipe_unpack(uint64_t w) {
  struct frame_recipe r;
  memcpy(&r, &w, sizeof r);
  return r;
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
 * stack can only end the walk, never fault or loop. On success r->pc is the
 * caller's return address (not yet adjusted for symbolisation). */
static inline enum frame_step_result frame_step(struct frame_regs *r, struct frame_recipe rc,
                                                uintptr_t lo, uintptr_t hi) {
  uintptr_t base;
  switch (rc.kind) {
  case FRAME_CFA_SP: base = r->sp; break;
  case FRAME_CFA_FP: base = r->fp; break;
  case FRAME_OUTERMOST: return FRAME_STEP_END;
  default: return FRAME_STEP_UNWINDER;
  }
  uintptr_t cfa = base + (intptr_t)rc.cfa_offset;
  uintptr_t ra_at = cfa + (intptr_t)rc.ra_offset;
  if (cfa <= r->sp || cfa > hi || ra_at < lo || ra_at > hi - sizeof(uintptr_t))
    return FRAME_STEP_BAD_STACK;
  uintptr_t fp = r->fp;
  if (rc.flags & FRAME_FP_SAVED) {
    uintptr_t fp_at = cfa + (intptr_t)rc.fp_offset;
    if (fp_at < lo || fp_at > hi - sizeof(uintptr_t))
      return FRAME_STEP_BAD_STACK;
    fp = *(const uintptr_t *)fp_at;
  }
  r->pc = *(const uintptr_t *)ra_at;
  r->sp = cfa;
  r->fp = fp;
  return FRAME_STEP_OK;
}

/* Registers of the interrupted context of a signal. */
void frame_regs_from_ucontext(struct frame_regs *r, const ucontext_t *uc);

/* Fill a zeroed ucontext with `r` so a DWARF unwinder can start from it. */
void frame_regs_to_ucontext(ucontext_t *uc, const struct frame_regs *r);

/* A ucontext_t as libunwind's unw_context_t: the same type on x86, on
 * AArch64 a shorter struct with ucontext_t's layout (its FP/SIMD save area
 * cut down), so a whole ucontext_t can stand for it. */
#define UNW_CONTEXT(uc) ((unw_context_t *)(void *)(uc))

/* Read the frame's registers from a libunwind cursor (unw_cursor_t *),
 * after unw_step. Returns 0 when libunwind cannot tell. */
int frame_regs_from_unwinder(struct frame_regs *r, void *unw_cursor);

/* Whether [addr, addr + len) is mapped, asked of the kernel (async-signal-safe,
 * no memory access). Used before handing unknown code to the DWARF unwinder,
 * which reads instructions and frame-pointer chains without checking. */
int frame_memory_mapped(uintptr_t addr, uintptr_t len);

/* Whether the code at `pc` (mapped, at least 9 bytes) is the C library's
 * signal return trampoline, so the frame it returns to was interrupted.
 * For code whose unwind table is not compiled (no CIE 'S' flag to go by). */
int frame_is_sigreturn(uintptr_t pc);

/* Registers of the calling function at the point of the call, captured
 * inline so that pc and sp describe the same instruction. */
#if defined(__x86_64__)
#define FRAME_REGS_HERE(r)                                                                     \
  __asm__ volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"                    \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp))
/* Where a call leaves the return address, relative to the CFA: the call
 * pushed it just below the caller's stack pointer. The walker's PC cache
 * keeps only recipes with this offset. */
#define FRAME_CALL_RA_OFFSET (-8)
/* A function compiled with a frame pointer keeps a frame record at it:
 * [caller's frame pointer, return address] (push %rbp right after the
 * call's push), and the caller's stack pointer after the call is just above
 * the record. */
#define FRAME_RECORD_AT_FP 1
#define FRAME_RECORD_FP 0         /* word of the caller's frame pointer */
#define FRAME_RECORD_RA 1         /* word of the return address */
#define FRAME_RECORD_CALLER_SP 16 /* bytes from the record to the caller's SP */
#elif defined(__aarch64__)
#define FRAME_REGS_HERE(r)                                                                     \
  __asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29"                                  \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->fp))
/* A call leaves the return address in x30; a function that calls others
 * saves it with the caller's x29 as a frame record (stp x29, x30), and when
 * that record is at the top of the frame, as GCC lays out most frames, the
 * return address is at CFA - 8. Only recipes with that offset are cached. */
#define FRAME_CALL_RA_OFFSET (-8)
/* The frame record at x29: [caller's x29, return address]. Where the
 * caller's stack pointer is the record does not say (the record sits at the
 * bottom or the top of the frame); the walker takes the lowest value it can
 * have, just above the record, which only code without unwind information
 * (stepped by the chain alone) ever uses. */
#define FRAME_RECORD_AT_FP 1
#define FRAME_RECORD_FP 0
#define FRAME_RECORD_RA 1
#define FRAME_RECORD_CALLER_SP 16
#else
#error "frame.h: no frame stepping for this architecture yet"
#endif

#if FRAME_RECORD_AT_FP
/* The registers of the caller of the function whose frame record is at
 * `record` (its frame pointer), at the return address. */
static inline void frame_regs_from_record(struct frame_regs *r, const uintptr_t *record) {
  r->pc = record[FRAME_RECORD_RA];
  r->sp = (uintptr_t)record + FRAME_RECORD_CALLER_SP;
  r->fp = record[FRAME_RECORD_FP];
}
#endif

#endif
