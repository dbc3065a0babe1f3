/* The hook engine: redirect a function to a replacement by patching its prologue.
 *
 * A hook overwrites the first bytes of the target function with a jump to the
 * replacement. The instructions it overwrote are copied, relocated, into a
 * trampoline followed by a jump back to the rest of the original, so that
 * calling `chain` runs the original function unchanged.
 *
 * Thread-safety: hook_install() serialises itself; it must not run while another
 * thread may be executing the very bytes it patches (install hooks at start-up or
 * on a library that was just loaded). No libc allocation happens on any path.
 *
 * Notes for callers (docs/hook-engine.md has the details):
 * - out->original, out->chain, out->trampoline and out->patched_bytes are all
 *   written BEFORE the patch goes live, so a replacement that reads out->chain
 *   may be entered the moment the jump is in place. A failed install never
 *   clears the chain of a hook that is already live (passing the same result
 *   again after a dlopen is safe).
 * - Two names for one function (glibc: aligned_alloc is memalign) give
 *   HOOK_ERR_ALREADY_HOOKED on the second install, with out->chain = the first
 *   hook's chain; calls under either name reach the FIRST replacement.
 * - While installing, the engine itself calls dlopen (only when spec->library
 *   is set), dlsym/dlvsym, dladdr1, dl_iterate_phdr, open/read/close, mmap,
 *   munmap, mprotect, memfd_create, ftruncate, getpid: hooks on any of these must
 *   pass straight through while the caller's re-entrancy guard is set.
 * - A global lookup never yields a PLT stub: when dlsym finds a non-PIE
 *   executable's canonical PLT entry for the name, the library definition it
 *   stands for is used instead.
 * - Not async-signal-safe (takes the loader lock). In particular, not in a
 *   child forked from a multi-threaded process before it execs: another
 *   thread of the parent may have held the loader lock at the fork.
 * - A child forked while another thread of the parent was patching a
 *   function may get it half written, parked on a branch to itself for
 *   good: the child must not call a function that was being hooked at the
 *   fork (the same rule as for the parent's threads, above).
 */
#ifndef IGPROF_HOOK_H
#define IGPROF_HOOK_H

#include <stddef.h>
#include <stdint.h>

enum hook_status {
  HOOK_OK = 0,
  HOOK_ERR_BAD_SPEC,            /* no function name or no replacement */
  HOOK_ERR_LIBRARY_NOT_FOUND,   /* spec->library is not loaded and cannot be opened */
  HOOK_ERR_SYMBOL_NOT_FOUND,    /* neither the dynamic symbols nor any .symtab define it */
  HOOK_ERR_ALREADY_HOOKED,      /* the entry already jumps into one of our trampolines */
  HOOK_ERR_TOO_SHORT,           /* the symbol's size is smaller than the patch */
  HOOK_ERR_UNDECODABLE,         /* the decoder could not decode an instruction in the window */
  HOOK_ERR_UNRELOCATABLE,       /* an instruction in the window cannot be moved (reason in detail) */
  HOOK_ERR_BRANCH_INTO_PATCH,   /* code later in the function branches into the patched window */
  HOOK_ERR_TRAMPOLINE_ALLOC,    /* no trampoline memory could be had within reach */
  HOOK_ERR_PROTECT,             /* mprotect of the target or trampoline page failed */
  HOOK_STATUS_COUNT
};

struct hook_spec {
  const char *function;     /* symbol name, e.g. "malloc" */
  const char *version;      /* optional symbol version, e.g. "GLIBC_2.2.5"; NULL for the default */
  const char *library;      /* optional library (soname or path); NULL looks the name up globally */
  void *replacement;        /* where calls to the function go from now on */
};

struct hook_result {
  void *original;           /* address of the function that was (or would have been) patched */
  void *chain;              /* call this (cast to the function's type) to run the original */
  void *trampoline;         /* the trampoline holding the relocated prologue */
  size_t patched_bytes;     /* how many bytes of the original were overwritten */
  size_t entry_kept;        /* bytes left in place at the entry before them (an endbr64
                               landing pad); the chain starts with their copy */
  char detail[160];         /* human-readable reason on failure, "" on success */
};

/* Locate spec->function and redirect it to spec->replacement.
 * On HOOK_OK, out->chain runs the original. On HOOK_ERR_ALREADY_HOOKED,
 * out->original is set and out->chain is the chain of the existing hook when it
 * is one of ours. On other errors out->detail says why. */
enum hook_status hook_install(const struct hook_spec *spec, struct hook_result *out);

/* The same for a function given by address (e.g. a second definition found in a
 * library loaded later). `size` is the symbol size, 0 if unknown (then it is
 * looked up from the symbol tables and unwind tables of the function's module). */
enum hook_status hook_install_at(void *function, size_t size, void *replacement,
                                 struct hook_result *out);

/* Find a function without hooking it: dlvsym/dlsym in the library or globally,
 * then the .symtab of loaded ELF objects. Returns NULL if not found; *size gets
 * the symbol size (0 if unknown). */
void *hook_lookup(const char *function, const char *version, const char *library, size_t *size);

/* A function defined in the dynamic symbol table of a loaded module: of the
 * module whose dl_iterate_phdr name is `module`, or with NULL the first one
 * in load order that defines it (not necessarily the loader's choice, and
 * possibly a non-PIE executable's canonical PLT entry: ask hook_lookup for
 * the definition calls reach). Only the modules' hash tables in memory are read:
 * no file, no dlsym, nothing allocated, so it is cheap to ask about names
 * that may be defined nowhere. NULL if not found; *size gets the symbol size. */
void *hook_lookup_exported(const char *function, const char *module, size_t *size);

/* Where a function whose first instruction is an unconditional jump with
 * a PC-relative target goes (a tail call that is the whole function: a C++
 * operator new[] written as `b operator new`, too short for a patch on
 * ARM32), or NULL. `size` is the symbol's size (0: unknown). */
void *hook_jump_target(void *function, size_t size);

/* Install several hooks with fewer protection changes: between begin and
 * end, each mapping that gets a patch is made writable once, as a whole,
 * and its protection is restored by hook_batch_end (a mapping that cannot
 * be made writable and executable at once is patched page by page as
 * usual). For start-up, from one thread, with no other thread running
 * code that could be patched; every install of the batch must happen
 * between the two calls on that thread. */
void hook_batch_begin(void);
void hook_batch_end(void);

/* Code a hook overwrote, as it was before (HOOK_PATCH_MAX bytes at most
 * per window). */
#define HOOK_PATCH_MAX 32
struct hook_original {
  uintptr_t at;          /* the first byte overwritten (ARM32: no Thumb bit) */
  size_t len;            /* how many */
  const uint8_t *bytes;  /* what they were (valid for the process's life) */
};

/* The windows patched by hooks that overlap [lo, hi), at most cap of them,
 * in install order; returns how many were written to out. For readers of
 * code that must see a function's own instructions (the ARM32 walker's
 * prologue reader). Async-signal-safe: no lock, no allocation. */
size_t hook_original_code(uintptr_t lo, uintptr_t hi, struct hook_original *out, size_t cap);

/* A short stable name for a status, e.g. "already-hooked". */
const char *hook_status_str(enum hook_status status);

#endif
