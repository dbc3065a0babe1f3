/* The one interface through which the hook engine touches machine code.
 *
 * Every opcode, encoding and reach limit lives behind this header, in one file
 * per architecture family (src/arch/x86.c, ...). The engine in src/hook decides
 * *what* to do (which window to copy, where the trampoline goes, whether a
 * branch lands in the patch) and asks this layer *how*: decode one
 * instruction, relocate a window of instructions, write a jump, recognise a
 * jump it wrote, flush the instruction cache.
 *
 * Shape, after Frida-gum's writer/relocator split:
 *   decoder    arch_decode()            one instruction: length, kind, target
 *   relocator  arch_relocate()          whole instructions from A to B, every
 *                                       PC-relative form fixed or refused
 *   writer     arch_write_*()           jumps, pointer jumps, trap padding
 *
 * Nothing here allocates, takes a lock or calls into libc beyond memcpy-like
 * byte copies; all functions are safe from any thread.
 */
#ifndef IGPROF_ARCH_H
#define IGPROF_ARCH_H

#include <stddef.h>
#include <stdint.h>

/* Longest jump any arch_write_* function emits, and the longest single
 * instruction the relocator can produce from one source instruction. Buffers
 * sized with these never overflow. */
#define ARCH_MAX_JUMP_SIZE 16
#define ARCH_MAX_RELOCATED_INSN 40
/* The most source bytes a patch window can span (the far patch plus one
 * instruction that straddles its end). */
#define ARCH_MAX_WINDOW 32
/* Bytes at the head of a trampoline, before the chain: what
 * arch_write_pad_undo() writes plus the longest jump, rounded to 16. */
#if defined(__aarch64__)
#define ARCH_TRAMPOLINE_HEAD 32
#else
#define ARCH_TRAMPOLINE_HEAD 16
#endif

/* Patch sizes at a function's entry. The near patch reaches a trampoline
 * within arch_near_reachable(); the far patch reaches any address. */
size_t arch_patch_size_near(void);
size_t arch_patch_size_far(void);

/* Non-zero when a near jump placed anywhere in [from, from + span) can reach
 * `to`, and a near jump placed at `to` can reach back. The trampoline pool
 * uses it to decide whether a chunk serves a target. */
int arch_near_reachable(uintptr_t from, uintptr_t to, size_t span);
/* How far from a target the trampoline pool may search for near memory. */
uintptr_t arch_near_search_radius(void);

enum arch_insn_kind {
  ARCH_INSN_PLAIN = 0,     /* falls through, no PC-relative operand */
  ARCH_INSN_PCREL_DATA,    /* falls through, reads/writes memory relative to the PC */
  ARCH_INSN_BRANCH,        /* conditional branch with a PC-relative target */
  ARCH_INSN_CALL,          /* call with a PC-relative target */
  ARCH_INSN_JUMP,          /* unconditional jump with a PC-relative target */
  ARCH_INSN_END,           /* flow does not fall through: return, indirect jump, trap */
  ARCH_INSN_OTHER          /* falls through; other PC-relative form (e.g. xbegin) */
};

struct arch_insn {
  uintptr_t pc;            /* where the instruction runs */
  size_t length;
  enum arch_insn_kind kind;
  uintptr_t target;        /* branch target or data address for PC-relative kinds */
  /* A load of a constant from a literal pool in the code (ARM32's ldr
   * rd, [pc, #imm]): the bytes it reads at target, which are data, not
   * instructions. 0 otherwise; a backend without literal pools leaves it
   * as the caller set it. */
  unsigned literal;
  char mnemonic[16];       /* for messages only */
};

/* Decode one instruction of at most `avail` bytes at `code`, which runs at
 * `pc`. Returns 0, or -1 if the bytes are not a valid instruction. */
int arch_decode(const void *code, size_t avail, uintptr_t pc, struct arch_insn *insn);

/* A bound for scans that look for branches into [lo, hi): every instruction
 * in [code, code + len) (running at pc) whose PC-relative branch target could
 * lie in [lo, hi) ends at or before code + the returned length, so decoding
 * may stop there; 0 when no instruction in the range can branch into it.
 * Looks at raw bytes only (no decoding): it may overestimate, never
 * underestimate. */
size_t arch_branch_scan_limit(const void *code, size_t len, uintptr_t pc, uintptr_t lo,
                              uintptr_t hi);

enum arch_reloc_status {
  ARCH_RELOC_OK = 0,
  ARCH_RELOC_UNDECODABLE,    /* an instruction in the window is not valid */
  ARCH_RELOC_UNRELOCATABLE,  /* an instruction cannot run elsewhere (reason given) */
  ARCH_RELOC_TOO_SHORT,      /* the window would pass the end of the function */
  ARCH_RELOC_NO_SPACE        /* the destination buffer is too small */
};

struct arch_relocation {
  size_t consumed;          /* source bytes covered (whole instructions, >= min_bytes) */
  size_t written;           /* bytes written to the destination */
  unsigned instructions;    /* source instructions relocated */
  char reason[120];         /* set on failure */
};

/* Copy whole instructions from `src` (running at `src_pc`) until at least
 * `min_bytes` are covered, into `dst` (which will run at `dst_pc`, capacity
 * `dst_cap`), rewriting every PC-relative form so that each copied
 * instruction has the same effect as the original. `src_limit` is the
 * function size (0 = unknown: then a window that ends the function's flow
 * before `min_bytes` is refused). Branches that land inside the window itself
 * are refused. Nothing is written after the relocated instructions; the caller
 * appends the jump back. */
enum arch_reloc_status arch_relocate(const void *src, uintptr_t src_pc, size_t min_bytes,
                                     size_t src_limit, void *dst, uintptr_t dst_pc,
                                     size_t dst_cap, struct arch_relocation *out);

/* Writers. Each writes at `dst`, which will run at `pc`, and returns the
 * number of bytes written, or 0 if the form cannot be used (out of reach). */
size_t arch_write_near_jump(void *dst, uintptr_t pc, uintptr_t target);
size_t arch_write_far_jump(void *dst, uintptr_t pc, uintptr_t target);
/* Near if reachable, else far. Never returns 0. */
size_t arch_write_jump(void *dst, uintptr_t pc, uintptr_t target);
/* A jump to the address stored in the pointer `slot` at the moment the jump
 * executes (slot must be within near reach of pc). */
size_t arch_write_pointer_jump(void *dst, uintptr_t pc, uintptr_t slot);
/* Fill `n` bytes with instructions that trap if ever executed. */
void arch_write_traps(void *dst, size_t n);

/* If the code at `code` (running at `pc`) is one of the jumps the writers
 * above produce, store its destination in *target and return its length;
 * otherwise return 0. A pointer jump reports the slot's current value. */
size_t arch_read_jump(const void *code, uintptr_t pc, uintptr_t *target);

/* The same for the forms whose target is in the instruction bytes only (the
 * two the engine writes); never reads other memory. 0 for anything else. */
size_t arch_inline_jump(const void *code, uintptr_t pc, uintptr_t *target);

/* Overwrite the first `n` bytes of live code at `at` with `patch` (a jump
 * from the writers above plus trap padding) so that a thread entering `at`
 * concurrently sees the old entry, a short spin, or the new jump, never a torn
 * instruction. The page must already be writable. */
void arch_write_live_patch(void *at, const void *patch, size_t n);

/* Bytes at a function's entry that indirect branches must land on under
 * control-flow enforcement (endbr64 on x86_64, bti on AArch64), or 0. The
 * engine leaves them in place and patches after them. */
size_t arch_entry_landing_pad(const void *code);

/* When the landing pad at `pad` stays at a patched entry, the code it ran
 * before the patch may have changed state the replacement must not see:
 * AArch64's paciasp signs the return address (x30). Writes at `dst` the
 * instructions that undo it (autiasp), to run in the trampoline before the
 * jump to the replacement, and returns their length; 0 when the pad changes
 * nothing (bti, endbr64). */
size_t arch_write_pad_undo(void *dst, const void *pad);

/* Make instructions written at [addr, addr+len) visible to execution. */
void arch_flush_icache(void *addr, size_t len);

/* Where the bytes of the code at `code` (an address as calls use it) are:
 * ARM32 clears the Thumb bit; elsewhere the address itself. */
uintptr_t arch_code_bytes(uintptr_t code);

#endif
