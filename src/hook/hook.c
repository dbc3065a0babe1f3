/* The hook engine: install sequence, "already hooked" detection, status names.
 *
 * Layout of one trampoline (in the executable view of a pool chunk):
 *
 *   +0   jump to the replacement (near or absolute), after what undoes a
 *        kept landing pad if it changed state (AArch64 paciasp), trap
 *        padding to CHAIN_OFFSET (16; 32 on AArch64)
 *   +CHAIN_OFFSET  chain: the relocated instructions of the patch window,
 *        then a jump back to original + patched_bytes
 *
 * The function's entry gets a jump to +0. Because the chain is always at a
 * fixed offset from the slot the entry jumps to, a second install finds the
 * existing chain from the entry jump alone, even in a forked child.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "hook_internal.h"
#include "message.h"
#include "proc_maps.h"
#include "trampoline_pool.h"

#define CHAIN_OFFSET ARCH_TRAMPOLINE_HEAD
/* Room for the relocated window in the worst case (every instruction a short
 * branch that needs an absolute form). */
#define RELOCATED_CAP (ARCH_MAX_WINDOW * ARCH_MAX_RELOCATED_INSN / 2)
#define SLOT_SIZE (CHAIN_OFFSET + RELOCATED_CAP + ARCH_MAX_JUMP_SIZE)
_Static_assert(HOOK_PATCH_MAX >= ARCH_MAX_WINDOW, "a patch window fits the patch log");

static const char *const status_names[HOOK_STATUS_COUNT] = {
    [HOOK_OK] = "ok",
    [HOOK_ERR_BAD_SPEC] = "bad-spec",
    [HOOK_ERR_LIBRARY_NOT_FOUND] = "library-not-found",
    [HOOK_ERR_SYMBOL_NOT_FOUND] = "symbol-not-found",
    [HOOK_ERR_ALREADY_HOOKED] = "already-hooked",
    [HOOK_ERR_TOO_SHORT] = "too-short",
    [HOOK_ERR_UNDECODABLE] = "undecodable",
    [HOOK_ERR_UNRELOCATABLE] = "unrelocatable",
    [HOOK_ERR_BRANCH_INTO_PATCH] = "branch-into-patch",
    [HOOK_ERR_TRAMPOLINE_ALLOC] = "trampoline-alloc",
    [HOOK_ERR_PROTECT] = "protect",
};

const char *hook_status_str(enum hook_status status)
{
  if ((unsigned)status >= HOOK_STATUS_COUNT)
    return "unknown-status";
  return status_names[status];
}

/* One installer at a time. The lock records its holder's pid (threads share
 * it): a value other than ours can only have come through fork, from a
 * thread of the parent that was installing at that moment and does not exist
 * here, so the child takes the lock over. */
static _Atomic pid_t install_lock;

static void lock_install(void)
{
  pid_t self = getpid(), expected = 0;
  while (!atomic_compare_exchange_weak(&install_lock, &expected, self)) {
    if (expected != 0 && expected != self &&
        atomic_compare_exchange_strong(&install_lock, &expected, self))
      return;
    expected = 0;
    sched_yield();
  }
}

static void unlock_install(void) { atomic_store(&install_lock, 0); }

void *hook_lookup(const char *function, const char *version, const char *library, size_t *size)
{
  void *addr;
  size_t sz;
  char detail[8];
  if (!function)
    return NULL;
  if (hook_locate(function, version, library, &addr, &sz, detail, sizeof detail) != HOOK_OK)
    return NULL;
  if (size)
    *size = sz;
  return addr;
}

/* A failed install leaves no stale pointers behind. Fields are never cleared
 * on entry: the caller may pass the result of a live hook again (a re-hook
 * after dlopen), and its replacement may be reading out->chain right now. */
static enum hook_status finish(enum hook_status st, struct hook_result *out)
{
  if (st != HOOK_OK && st != HOOK_ERR_ALREADY_HOOKED) {
    out->chain = out->trampoline = NULL;
    out->patched_bytes = 0;
  }
  return st;
}

enum hook_status hook_install(const struct hook_spec *spec, struct hook_result *out)
{
  struct message m = message_start(out->detail, sizeof out->detail);
  if (!spec || !spec->function || !spec->function[0] || !spec->replacement) {
    message_str(&m, "a hook needs a function name and a replacement");
    out->original = NULL;
    return finish(HOOK_ERR_BAD_SPEC, out);
  }
  void *addr;
  size_t size;
  enum hook_status st = hook_locate(spec->function, spec->version, spec->library, &addr, &size,
                                    out->detail, sizeof out->detail);
  if (st != HOOK_OK) {
    out->original = NULL;
    return finish(st, out);
  }
  return hook_install_at(addr, size, spec->replacement, out);
}

/* If `fn` already enters one of our trampolines, its chain; else NULL. */
static void *existing_chain(uintptr_t fn)
{
  uintptr_t target;
  if (arch_read_jump((const void *)fn, fn, &target) && tramp_pool_contains(target))
    return (void *)(target + CHAIN_OFFSET);
  return NULL;
}

/* Code within this distance of a function is decoded for branches into its
 * patch window: hand-written assembly enters its neighbours' bodies (glibc's
 * mempcpy jumps to memmove+3, right after memmove's first instruction). */
#define NEIGHBOURHOOD 4096

struct branch_scan {
  uintptr_t fn;       /* the function */
  uintptr_t site;     /* where the patch goes (after a kept landing pad) */
  uintptr_t end;      /* end of the bytes the trampoline takes over */
  struct message *m;
};

void *hook_jump_target(void *function, size_t size)
{
  struct arch_insn insn;
  insn.literal = 0;
  uintptr_t at = (uintptr_t)function;
  if (!function || arch_decode(function, size ? size : 16, at, &insn) != 0 ||
      insn.kind != ARCH_INSN_JUMP)
    return NULL;
  return (void *)insn.target;
}

/* Decode [start, start+len) and look for a branch landing inside the bytes
 * the trampoline takes over, (fn, end): that code would land in the middle
 * of our jump. A branch to fn itself, or to the patch site right after a
 * kept landing pad, is fine (it enters the hook like a call). */
static int scan_code(uintptr_t start, size_t len, void *arg)
{
  struct branch_scan *s = arg;
  /* Decoding was most of an install's cost, and a branch into a window of a
   * few bytes is rare: decode only as far as a raw-byte bound says such a
   * branch could end (the bound also counts branches to the site, which
   * only makes it longer). The instructions before it are the same ones a
   * full scan decodes, so the answer is the same. */
  size_t limit = arch_branch_scan_limit((const void *)start, len, start, s->fn + 1, s->end);
  size_t off = 0;
  /* Literals the code loads (ARM32's literal pools, at the end of a
   * function): data, whose bytes could pass for a branch; skipped. */
  uintptr_t literals[32];
  unsigned nliterals = 0;
  while (off < limit) {
    int literal = 0;
    for (unsigned i = 0; i < nliterals && !literal; i++)
      literal = literals[i] == ((start + off) & ~(uintptr_t)1); /* a Thumb pc has bit 0 set */
    if (literal) {
      off += 4;
      continue;
    }
    /* A patch of ours (a neighbour hooked earlier): the absolute jump's
     * address literal is data, and decoded as code its random bytes could
     * pass for a branch into this window. */
    uintptr_t to;
    size_t jump = len - off >= arch_patch_size_far()
                      ? arch_inline_jump((const void *)(start + off), start + off, &to)
                      : 0;
    if (jump && tramp_pool_contains(to)) {
      off += jump;
      continue;
    }
    struct arch_insn insn;
    insn.literal = 0;
    if (arch_decode((const void *)(start + off), len - off, start + off, &insn) != 0)
      break; /* data or padding: nothing further can be seen */
    if (insn.literal < 4 || (insn.target & 3)) /* words only: a byte literal may share a word with code */
      insn.literal = 0;
    for (uintptr_t at = insn.target; at < insn.target + insn.literal; at += 4)
      if (at > start + off && at < start + len && nliterals < sizeof literals / sizeof literals[0])
        literals[nliterals++] = at;
    if ((insn.kind == ARCH_INSN_BRANCH || insn.kind == ARCH_INSN_JUMP ||
         insn.kind == ARCH_INSN_CALL) &&
        insn.target > s->fn && insn.target < s->end && insn.target != s->site) {
      message_str(s->m, insn.mnemonic);
      if (start == s->fn) {
        message_hex(message_str(s->m, " at +"), off);
      } else {
        message_hex(message_str(s->m, " at "), start + off);
        message_str(s->m, " in a neighbouring function");
      }
      message_hex(message_str(s->m, " branches to +"), insn.target - s->fn);
      message_str(s->m, ", inside the patched bytes");
      return 1;
    }
    off += insn.length;
  }
  return 0;
}

static int scan_neighbour(uintptr_t start, size_t len, void *arg)
{
  struct branch_scan *s = arg;
  return start == s->fn ? 0 : scan_code(start, len, arg);
}

static enum hook_status scan_branches(uintptr_t fn, size_t size, size_t keep, size_t window,
                                      struct message *m)
{
  struct branch_scan s = {fn, fn + keep, fn + window, m};
  if (scan_code(fn, size > window ? size : window, &s) ||
      hook_unwind_each(fn, fn > NEIGHBOURHOOD ? fn - NEIGHBOURHOOD : 0, fn + size + NEIGHBOURHOOD,
                       scan_neighbour, &s) > 0)
    return HOOK_ERR_BRANCH_INTO_PATCH;
  return HOOK_OK;
}

/* A batch (hook_batch_begin/end): each mapping patched is made writable
 * once, as a whole, and gets its protection back at the end. At start-up
 * that is two mprotect calls for libc instead of two per hook (each of
 * which split and re-merged libc's text mapping in the kernel). */
#define BATCH_REGIONS 16
static struct {
  int on;
  int count;
  struct {
    uintptr_t start, end;
    int prot;
  } regions[BATCH_REGIONS];
} batch;

void hook_batch_begin(void)
{
  batch.on = 1;
  batch.count = 0;
}

void hook_batch_end(void)
{
  for (int i = 0; i < batch.count; i++)
    mprotect((void *)batch.regions[i].start, batch.regions[i].end - batch.regions[i].start,
             batch.regions[i].prot);
  batch.on = 0;
  batch.count = 0;
}

static int is_kernel_mapping(const char *path)
{
  return strcmp(path, "[vdso]") == 0 || strcmp(path, "[vsyscall]") == 0;
}

/* In a batch: make sure the mapping(s) holding [fn, fn+n) are writable and
 * remembered. Returns 1 if done, 0 if the caller should patch the page
 * alone (no room, or the whole mapping cannot be made RWX). */
static int batch_writable(uintptr_t fn, size_t n)
{
  for (uintptr_t a = fn; a < fn + n;) {
    int found = -1;
    for (int i = 0; i < batch.count; i++)
      if (a >= batch.regions[i].start && a < batch.regions[i].end)
        found = i;
    if (found < 0) {
      uintptr_t start, end;
      char path[64];
      int prot = proc_maps_region(a, &start, &end, path, sizeof path);
      if (prot < 0 || is_kernel_mapping(path) || batch.count == BATCH_REGIONS)
        return 0;
      /* Writable and executable at once: the code doing the writing may
       * live in the mapping. Where the system refuses that, patch alone. */
      if (mprotect((void *)start, end - start, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
        return 0;
      found = batch.count++;
      batch.regions[found].start = start;
      batch.regions[found].end = end;
      batch.regions[found].prot = prot;
    }
    a = batch.regions[found].end;
  }
  return 1;
}

/* Write `patch` over [fn, fn+n) with the page(s) made writable briefly and
 * their original protection restored afterwards (in a batch: at its end). */
static enum hook_status write_patch(uintptr_t fn, const uint8_t *patch, size_t n, struct message *m)
{
  if (batch.on && batch_writable(fn, n)) {
    arch_write_live_patch((void *)fn, patch, n);
    arch_flush_icache((void *)fn, n);
    return HOOK_OK;
  }
  long pagesize = sysconf(_SC_PAGESIZE);
  uintptr_t first = fn & ~(uintptr_t)(pagesize - 1);
  uintptr_t last = (fn + n - 1) & ~(uintptr_t)(pagesize - 1);
  char path[64];
  int prot_first = proc_maps_protection(first, path, sizeof path);
  int prot_last = last == first ? prot_first : proc_maps_protection(last, NULL, 0);
  if (prot_first < 0 || prot_last < 0) {
    message_str(m, "the function's page is not in /proc/self/maps");
    return HOOK_ERR_PROTECT;
  }
  if (is_kernel_mapping(path)) {
    message_str(message_str(m, "the function is in the kernel's "), path);
    message_str(m, ", which cannot be made writable");
    return HOOK_ERR_PROTECT;
  }
  size_t len = last - first + (size_t)pagesize;
  /* Keep the page executable while it is written: the code doing the write
   * (mprotect itself, memcpy...) may live on it. */
  if (mprotect((void *)first, len, PROT_READ | PROT_WRITE | PROT_EXEC) != 0 &&
      mprotect((void *)first, len, PROT_READ | PROT_WRITE) != 0) {
    int e = errno;
    message_dec(message_str(m, "mprotect of the function's page failed, errno "), (unsigned)e);
    return HOOK_ERR_PROTECT;
  }
  arch_write_live_patch((void *)fn, patch, n);
  arch_flush_icache((void *)fn, n);
  mprotect((void *)first, (size_t)pagesize, prot_first);
  if (last != first)
    mprotect((void *)last, (size_t)pagesize, prot_last);
  return HOOK_OK;
}

static enum hook_status status_of_relocation(enum arch_reloc_status st)
{
  switch (st) {
  case ARCH_RELOC_OK: return HOOK_OK;
  case ARCH_RELOC_UNDECODABLE: return HOOK_ERR_UNDECODABLE;
  case ARCH_RELOC_TOO_SHORT: return HOOK_ERR_TOO_SHORT;
  case ARCH_RELOC_UNRELOCATABLE:
  case ARCH_RELOC_NO_SPACE: break;
  }
  return HOOK_ERR_UNRELOCATABLE;
}

/* Build the trampoline for fn in `block` and say how many bytes the patch
 * replaces (after `keep` bytes of landing pad left in place). Nothing is
 * live yet. */
static enum hook_status build_trampoline(uintptr_t fn, size_t size, size_t keep,
                                         uintptr_t replacement, size_t patch_size,
                                         struct tramp_block *block, size_t *used,
                                         size_t *consumed, struct message *m)
{
  size_t n = keep ? arch_write_pad_undo(block->write, (const void *)fn) : 0;
  n += arch_write_jump(block->write + n, block->exec + n, replacement);
  arch_write_traps(block->write + n, CHAIN_OFFSET - n);
  struct arch_relocation rel;
  enum arch_reloc_status rst =
      arch_relocate((const void *)fn, fn, patch_size, size, block->write + CHAIN_OFFSET,
                    block->exec + CHAIN_OFFSET, RELOCATED_CAP, &rel);
  if (rst != ARCH_RELOC_OK) {
    message_str(m, rel.reason);
    return status_of_relocation(rst);
  }
  size_t back = CHAIN_OFFSET + rel.written;
  back += arch_write_jump(block->write + back, block->exec + back, fn + rel.consumed);
  *used = back;
  *consumed = rel.consumed;
  return HOOK_OK;
}

/* If the function's entry (or, behind a landing pad still in place, the
 * instruction after it) jumps into our trampolines, its chain. The entry is
 * looked at first: when a short function had its pad overwritten, the bytes
 * at entry + pad are the middle of our jump. */
static void *installed_chain(uintptr_t fn, size_t keep)
{
  void *chain = existing_chain(fn);
  return chain || !keep ? chain : existing_chain(fn + keep);
}

static enum hook_status install_locked(uintptr_t fn, size_t size, uintptr_t replacement,
                                       struct hook_result *out, struct message *m)
{
  /* A landing pad (endbr64) stays where indirect calls expect it; the patch
   * goes after it, unless the function is too short to leave it. */
  size_t keep = arch_entry_landing_pad((const void *)fn);
  void *chain = installed_chain(fn, keep);
  if (chain) {
    out->chain = chain;
    out->trampoline = (void *)((uintptr_t)chain - CHAIN_OFFSET);
    message_str(m, "the function already jumps into a hook trampoline");
    return HOOK_ERR_ALREADY_HOOKED;
  }
  size_t patch_size = arch_patch_size_near();
  if (size && size < patch_size) {
    message_dec(message_str(m, "function is "), size);
    message_dec(message_str(m, " bytes, shorter than the "), patch_size);
    message_str(m, "-byte patch");
    return HOOK_ERR_TOO_SHORT;
  }
  struct tramp_block block;
  const char *why = NULL;
  if (tramp_reserve(fn, 1, SLOT_SIZE, &block, &why) != 0) {
    /* No memory within near reach: an absolute jump at the entry reaches a
     * trampoline anywhere, if the function has room for it. */
    patch_size = arch_patch_size_far();
    if (size && size < patch_size) {
      message_str(message_str(m, why), "; function too short for the absolute-jump patch");
      return HOOK_ERR_TOO_SHORT;
    }
    if (tramp_reserve(fn, 0, SLOT_SIZE, &block, &why) != 0) {
      message_str(m, why);
      return HOOK_ERR_TRAMPOLINE_ALLOC;
    }
  }
  if (size && size < keep + patch_size)
    keep = 0;
  size_t used = 0, consumed = 0;
  enum hook_status st =
      build_trampoline(fn, size, keep, replacement, keep + patch_size, &block, &used, &consumed, m);
  if (st == HOOK_OK)
    st = scan_branches(fn, size, keep, consumed, m);
  if (st != HOOK_OK) {
    tramp_commit(&block, 0);
    return st;
  }
  tramp_commit(&block, used);

  uintptr_t site = fn + keep;
  uint8_t patch[ARCH_MAX_WINDOW];
  size_t n = patch_size == arch_patch_size_near()
                 ? arch_write_near_jump(patch, site, block.exec)
                 : arch_write_far_jump(patch, site, block.exec);
  arch_write_traps(patch + n, consumed - keep - n);

  /* The result is complete before the patch goes live, so a replacement that
   * reads out->chain can be entered the moment the jump is written. */
  out->original = (void *)fn;
  out->trampoline = (void *)block.exec;
  out->chain = (void *)(block.exec + CHAIN_OFFSET);
  out->patched_bytes = consumed - keep;
  out->entry_kept = keep;
  atomic_thread_fence(memory_order_release);
  hook_patch_log_add(site, consumed - keep);
  return write_patch(site, patch, consumed - keep, m);
}

enum hook_status hook_install_at(void *function, size_t size, void *replacement,
                                 struct hook_result *out)
{
  struct message m = message_start(out->detail, sizeof out->detail);
  out->original = function;
  if (!function || !replacement) {
    message_str(&m, "a hook needs a function address and a replacement");
    return finish(HOOK_ERR_BAD_SPEC, out);
  }
  /* an unknown size is looked up: it bounds the window and the branch scan */
  if (!size)
    size = hook_function_size((uintptr_t)function);
  lock_install();
  enum hook_status st = install_locked((uintptr_t)function, size, (uintptr_t)replacement, out, &m);
  unlock_install();
  return finish(st, out);
}
