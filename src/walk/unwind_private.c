/* libunwind, loaded privately.
 *
 * libunwind.so.8 exports the _Unwind_* functions of the C++ exception ABI as
 * well as its own unw_* API. Linked into libigprof.so it would be loaded with
 * LD_PRELOAD into the global symbol scope, and a C++ runtime loaded after it
 * (a program that dlopens C++ code) would bind _Unwind_RaiseException to
 * libunwind instead of libgcc_s: the profiler would change how the program's
 * exceptions are thrown. So libigprof.so does not link libunwind; it opens it
 * RTLD_LOCAL at start-up and defines here, hidden, the unw_* entry points the
 * rest of the runtime calls, each forwarding to the real one.
 *
 * libunwind must also own no file descriptor. When it falls back to stepping
 * by frame pointer it checks each stack address it reads by writing one byte
 * from it into a pipe it opened at its initialisation (and reading one byte
 * back out first, re-opening the pipe when that read fails). Those two
 * descriptors belong to the program's numbering: a program that closes all
 * its descriptors and opens or dup2()s its own files onto those numbers would
 * get bytes of stack memory written into its files and lose bytes of its
 * input. So the private copy's imports of the descriptor calls it makes
 * (pipe2, pipe, read, write, syscall, close, fcntl) are bound here, before its
 * initialisation, to replacements that hand out two numbers no descriptor can
 * have and answer for them without the kernel's descriptor table: the check
 * becomes a process_vm_readv of the address (see probe_readable); every other
 * descriptor goes to libc unchanged. If that binding cannot be done, libunwind
 * is not used at all.
 *
 * Loading happens in a constructor that runs before the runtime's own, outside
 * any signal handler; the forwarders themselves are async-signal-safe (one
 * indirect call). Without libunwind every forwarder reports failure and the
 * stack walks end where the fast walker's recipes end. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../arch/context.h"
#include "../arch/pages.h"
#include "internal.h"
#include "walk.h"

#define NAME_OF(sym) NAME_OF_(sym)
#define NAME_OF_(sym) #sym

static int (*real_init_local)(unw_cursor_t *, unw_context_t *);
static int (*real_init_local2)(unw_cursor_t *, unw_context_t *, int);
static int (*real_step)(unw_cursor_t *);
static int (*real_get_reg)(unw_cursor_t *, int, unw_word_t *);
static int (*real_set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
static void (*real_flush_cache)(unw_addr_space_t, unw_word_t, unw_word_t);
static int (*real_backtrace)(void **, int);
/* Read by the getcontext forwarder (context.h). */
void *igprof_unwind_real_getcontext;

unw_addr_space_t unw_local_addr_space;

int unw_init_local(unw_cursor_t *c, unw_context_t *uc)
{
  return real_init_local ? real_init_local(c, uc) : -UNW_EUNSPEC;
}

int unw_init_local2(unw_cursor_t *c, unw_context_t *uc, int flags)
{
  return real_init_local2 ? real_init_local2(c, uc, flags) : -UNW_EUNSPEC;
}

int unw_step(unw_cursor_t *c)
{
  return real_step ? real_step(c) : -UNW_EUNSPEC;
}

int unw_get_reg(unw_cursor_t *c, int reg, unw_word_t *value)
{
  return real_get_reg ? real_get_reg(c, reg, value) : -UNW_EUNSPEC;
}

int unw_set_caching_policy(unw_addr_space_t as, unw_caching_policy_t policy)
{
  return real_set_caching_policy ? real_set_caching_policy(as, policy) : -UNW_EUNSPEC;
}

void unw_flush_cache(unw_addr_space_t as, unw_word_t lo, unw_word_t hi)
{
  if (real_flush_cache) real_flush_cache(as, lo, hi);
}

int unw_backtrace(void **buffer, int size)
{
  return real_backtrace ? real_backtrace(buffer, size) : 0;
}

/* unw_getcontext's forwarder is machine code: src/arch/<arch>_context.c. */

/* ---- libunwind's descriptor calls, without descriptors -------------------- */

/* The two ends of libunwind's validation pipe: negative, so no call of the
 * program's can ever mean them, and no real call of ours either. */
#define QUIET_READ_END (-1000)
#define QUIET_WRITE_END (-1001)

static int quiet_fd(int fd) { return fd == QUIET_READ_END || fd == QUIET_WRITE_END; }

/* Whether `len` bytes at `addr` can be read, which is what the pipe write
 * found out: a copy through the kernel, into a buffer of ours, that fails
 * with EFAULT on an unreadable page and touches no descriptor. Where there
 * is no process_vm_readv (qemu-user answers ENOSYS; a seccomp filter may
 * refuse it), whether the pages are mapped at all (mincore): libunwind took
 * every address for unmapped there, and stepped from the link register in
 * place of the PC. Returns `len` or -1 with errno set, as the write did. */
static long probe_readable(const void *addr, size_t len)
{
  static _Atomic int no_vm_readv;
  char buf[64];
  if (len > sizeof buf) len = sizeof buf; /* libunwind checks one byte */
  if (!atomic_load_explicit(&no_vm_readv, memory_order_relaxed)) {
    struct iovec local = {buf, len}, remote = {(void *) addr, len};
    long n = syscall(SYS_process_vm_readv, (long) getpid(), &local, 1L, &remote, 1L, 0L);
    if (n >= 0) {
      if ((size_t) n == len) return n;
      errno = EFAULT;
      return -1;
    }
    if (errno != ENOSYS && errno != EPERM) return -1;
    atomic_store_explicit(&no_vm_readv, 1, memory_order_relaxed);
  }
  if (!frame_memory_mapped((uintptr_t) addr, len)) {
    errno = EFAULT;
    return -1;
  }
  return (long) len;
}

static int quiet_pipe2(int fds[2], int flags)
{
  (void) flags;
  fds[0] = QUIET_READ_END;
  fds[1] = QUIET_WRITE_END;
  return 0;
}

static int quiet_pipe(int fds[2]) { return quiet_pipe2(fds, 0); }

/* The read that takes a byte out of the pipe: an empty non-blocking pipe
 * (EAGAIN), which libunwind takes as a working one. */
static ssize_t quiet_read(int fd, void *buf, size_t len)
{
  if (fd == QUIET_READ_END) {
    errno = EAGAIN;
    return -1;
  }
  return read(fd, buf, len);
}

static ssize_t quiet_write(int fd, const void *buf, size_t len)
{
  if (fd == QUIET_WRITE_END) return probe_readable(buf, len);
  return write(fd, buf, len);
}

static int quiet_close(int fd)
{
  if (quiet_fd(fd)) return 0;
  return close(fd);
}

static int quiet_fcntl(int fd, int cmd, ...)
{
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long); /* every fcntl argument fits a long */
  va_end(ap);
  if (quiet_fd(fd)) return 0;
  return fcntl(fd, cmd, arg);
}

/* libunwind on 32-bit ARM checks addresses with msync instead, which
 * qemu-user answers 0 for every page of a 32-bit guest (it reserves the
 * whole guest address space): mincore tells, on a kernel as under qemu. */
static int quiet_msync(void *addr, size_t len, int flags)
{
  (void) flags;
  if (frame_memory_mapped((uintptr_t) addr, len ? len : 1)) return 0;
  errno = ENOMEM;
  return -1;
}

#if defined(__arm__)
/* libunwind's ARM unwinder reads UNW_ARM_UNWIND_METHOD (a mask: 1 DWARF,
 * 2 APCS frame chain, 4 EHABI tables) when it initialises; the private copy
 * is told 4. Its DWARF method looks for .debug_frame by opening and reading
 * the module's file with malloc (not in a signal handler), and its frame
 * chain method follows r11 as an APCS frame pointer, which EABI code does
 * not keep: in Thumb code r11 holds data, and the step reads memory through
 * it. The program's own environment is left as it is. */
#define UNWIND_ENV_NAME "UNW_ARM_UNWIND_METHOD"
#define UNWIND_ENV_VALUE "4"
#endif

static char *quiet_getenv(const char *name)
{
#ifdef UNWIND_ENV_NAME
  if (strcmp(name, UNWIND_ENV_NAME) == 0) return (char *) UNWIND_ENV_VALUE;
#endif
  return getenv(name);
}

/* libunwind writes to the pipe with syscall(SYS_write, ...). Six arguments
 * are read whatever the call passed, as libc's own syscall() does. */
static long quiet_syscall(long nr, ...)
{
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  /* A descriptor is an int: the upper half of its register is not. */
  int fd = (int) a[0];
  if (nr == SYS_write && quiet_fd(fd)) return probe_readable((const void *) a[1], (size_t) a[2]);
  if (nr == SYS_read && quiet_fd(fd)) return quiet_read(fd, NULL, 0);
  if (nr == SYS_close && quiet_fd(fd)) return 0;
  return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static const struct quiet_import {
  const char *name;
  void *replacement;
  int opens; /* creates the descriptors: must be bound, or no libunwind */
} quiet_imports[] = {
    {"pipe2", (void *) quiet_pipe2, 1}, {"pipe", (void *) quiet_pipe, 1},
    {"read", (void *) quiet_read, 0},   {"write", (void *) quiet_write, 0},
    {"close", (void *) quiet_close, 0}, {"fcntl", (void *) quiet_fcntl, 0},
    {"syscall", (void *) quiet_syscall, 0},
    {"msync", (void *) quiet_msync, 0},   {"getenv", (void *) quiet_getenv, 0},
};
#define QUIET_IMPORTS (sizeof quiet_imports / sizeof quiet_imports[0])

#if defined(__x86_64__)
#define IMPORT_SLOT_RELOC(type) ((type) == R_X86_64_JUMP_SLOT || (type) == R_X86_64_GLOB_DAT)
#elif defined(__aarch64__)
#define IMPORT_SLOT_RELOC(type) ((type) == R_AARCH64_JUMP_SLOT || (type) == R_AARCH64_GLOB_DAT)
#elif defined(__i386__)
#define IMPORT_SLOT_RELOC(type) ((type) == R_386_JMP_SLOT || (type) == R_386_GLOB_DAT)
#elif defined(__arm__)
#define IMPORT_SLOT_RELOC(type) ((type) == R_ARM_JUMP_SLOT || (type) == R_ARM_GLOB_DAT)
#else
#error "unwind_private.c: no import relocation types for this architecture yet"
#endif

/* r_info's halves in the word size of this build. */
#if UINTPTR_MAX > 0xffffffffu
#define REL_SYM(info) ELF64_R_SYM(info)
#define REL_TYPE(info) ELF64_R_TYPE(info)
#else
#define REL_SYM(info) ELF32_R_SYM(info)
#define REL_TYPE(info) ELF32_R_TYPE(info)
#endif

/* The loaded object's dynamic tables. Their addresses are relocated in
 * place by the loader on most targets, not on all: a value below the load
 * address is still an offset. */
struct import_tables {
  uintptr_t base;
  const ElfW(Sym) *symtab;
  const char *strtab;
  /* The relocation tables: DT_RELA, DT_REL, DT_JMPREL (whose entries are
   * either, by DT_PLTREL). Both entry forms start with r_offset, r_info. */
  const unsigned char *rel[3];
  size_t rel_bytes[3], rel_entry[3];
  uintptr_t relro_start, relro_end;
};

static uintptr_t dyn_address(uintptr_t base, uintptr_t value)
{
  return value < base ? base + value : value;
}

static int find_relro(struct dl_phdr_info *info, size_t size, void *arg)
{
  struct import_tables *t = arg;
  (void) size;
  if (info->dlpi_addr != t->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_GNU_RELRO) {
      t->relro_start = t->base + ph->p_vaddr;
      t->relro_end = t->relro_start + ph->p_memsz;
    }
  }
  return 1;
}

static int import_tables_of(void *handle, struct import_tables *t)
{
  struct link_map *lm = NULL;
  memset(t, 0, sizeof *t);
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld) return 0;
  t->base = lm->l_addr;
  t->rel_entry[0] = sizeof(ElfW(Rela));
  t->rel_entry[1] = sizeof(ElfW(Rel));
  t->rel_entry[2] = sizeof(ElfW(Rela));
  for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
    const unsigned char *at = (const unsigned char *) dyn_address(t->base, d->d_un.d_ptr);
    switch (d->d_tag) {
    case DT_SYMTAB: t->symtab = (const ElfW(Sym) *) at; break;
    case DT_STRTAB: t->strtab = (const char *) at; break;
    case DT_RELA: t->rel[0] = at; break;
    case DT_RELASZ: t->rel_bytes[0] = d->d_un.d_val; break;
    case DT_REL: t->rel[1] = at; break;
    case DT_RELSZ: t->rel_bytes[1] = d->d_un.d_val; break;
    case DT_JMPREL: t->rel[2] = at; break;
    case DT_PLTRELSZ: t->rel_bytes[2] = d->d_un.d_val; break;
    case DT_PLTREL: t->rel_entry[2] = d->d_un.d_val == DT_REL ? sizeof(ElfW(Rel)) : sizeof(ElfW(Rela)); break;
    default: break;
    }
  }
  if (!t->symtab || !t->strtab) return 0;
  dl_iterate_phdr(find_relro, t);
  return 1;
}

/* Point one import slot at `value`, opening a RELRO page for the write. */
static int write_slot(const struct import_tables *t, void **slot, void *value)
{
  uintptr_t at = (uintptr_t) slot;
  if (at < t->relro_start || at >= t->relro_end) {
    *slot = value;
    return 1;
  }
  uintptr_t page = at & ~(uintptr_t) 4095;
  if (mprotect((void *) page, 4096, PROT_READ | PROT_WRITE) != 0) return 0;
  *slot = value;
  mprotect((void *) page, 4096, PROT_READ);
  return 1;
}

/* Bind the private libunwind's descriptor calls to the quiet ones. Returns
 * NULL when done, or why it could not be: an import that creates
 * descriptors was left bound to libc. */
static const char *quiet_bind(void *handle)
{
  struct import_tables t;
  if (!import_tables_of(handle, &t)) return "libunwind.so.8 not used: its dynamic section could not be read";
  int found[QUIET_IMPORTS] = {0}, bound[QUIET_IMPORTS] = {0};
  for (int k = 0; k < 3; k++) {
    size_t count = t.rel_bytes[k] / t.rel_entry[k];
    for (size_t i = 0; t.rel[k] && i < count; i++) {
      const ElfW(Rel) *r = (const ElfW(Rel) *) (t.rel[k] + i * t.rel_entry[k]);
      size_t sym = REL_SYM(r->r_info);
      if (sym == 0) continue;
      const char *name = t.strtab + t.symtab[sym].st_name;
      for (size_t q = 0; q < QUIET_IMPORTS; q++) {
        if (strcmp(name, quiet_imports[q].name) != 0) continue;
        found[q] = 1;
        if (IMPORT_SLOT_RELOC(REL_TYPE(r->r_info)) &&
            write_slot(&t, (void **) (t.base + r->r_offset), quiet_imports[q].replacement))
          bound[q] = 1;
        else if (quiet_imports[q].opens)
          return "libunwind.so.8 not used: its pipe could not be replaced";
      }
    }
  }
  for (size_t q = 0; q < QUIET_IMPORTS; q++)
    if (found[q] && !bound[q]) return "libunwind.so.8 not used: its descriptor calls could not be replaced";
  return NULL;
}

static const char *unavailable_reason = "libunwind.so.8 could not be opened";

const char *igprof_unwind_unavailable_reason(void) { return unavailable_reason; }

static int unwind_getcontext_missing(unw_context_t *uc)
{
  (void) uc;
  return -1;
}

__attribute__((constructor(101))) static void unwind_load(void)
{
  igprof_unwind_real_getcontext = (void *) unwind_getcontext_missing;
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) return; /* reported by igprof_walk_init */
  /* Before any unw_* call: libunwind opens its pipe when it initialises. */
  const char *why = quiet_bind(h);
  if (why) {
    unavailable_reason = why;
    dlclose(h);
    return;
  }
#define LOAD(var, sym) *(void **) &var = dlsym(h, NAME_OF(sym))
  LOAD(real_init_local, unw_init_local);
  LOAD(real_init_local2, unw_init_local2);
  LOAD(real_step, unw_step);
  LOAD(real_get_reg, unw_get_reg);
  LOAD(real_set_caching_policy, unw_set_caching_policy);
  LOAD(real_flush_cache, unw_flush_cache);
  LOAD(real_backtrace, unw_backtrace);
#undef LOAD
  void *gc = dlsym(h, NAME_OF(unw_tdep_getcontext));
  if (gc) igprof_unwind_real_getcontext = gc;
  unw_addr_space_t *as = dlsym(h, NAME_OF(unw_local_addr_space));
  if (as) unw_local_addr_space = *as;
  if (!igprof_unwind_available()) unavailable_reason = "libunwind.so.8 lacks unw_step or unw_backtrace";
}

int igprof_unwind_available(void)
{
  return real_step != NULL && real_backtrace != NULL;
}
