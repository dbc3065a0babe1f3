/* Go programs: their dump when the Go runtime ends the process.
 *
 * A Go program built with cgo is dynamically linked: the launcher's
 * LD_PRELOAD brings the runtime in, glibc starts it like any program, and
 * the hooks work (-mp counts the C allocations: cgo's C.malloc, C
 * libraries; Go's own heap is not malloc). But the Go runtime ends the
 * process by itself, with a raw exit_group system call in runtime.exit —
 * after main returns, on os.Exit, after a panic or a fatal error: no exit(),
 * no atexit handler, no _exit, so no dump. runtime.exit is therefore hooked,
 * and its replacement writes the final dump, then makes the system call.
 *
 * runtime.exit is a Go assembly function: four instructions, the ABI0
 * calling convention (the exit code on the stack), found by its symbol in
 * the executable's .symtab or, in a stripped executable, by its code; its
 * code must be exactly those instructions, or it is not hooked (a one-line
 * warning says the dump will be missing). It may be
 * called on a goroutine's stack, a few KiB that C code must not run on: the
 * replacement is an assembly stub that blocks every signal (the Go runtime's
 * handlers must not run on a stack that is not Go's; a fault in the dump
 * then kills the process at once instead of entering Go), switches to a
 * stack of its own and calls C. Two goroutines ending the process at once:
 * the second waits for the first's exit_group.
 *
 * This module is always on (a Go program needs it whatever the profiler
 * does) and costs other programs one look at the executable's notes.
 */
#define _GNU_SOURCE
#include "../arch/go.h"
#include "internal.h"
#include "elf_symbols.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GO_STACK_SIZE (1u << 20)

/* The stub's data: hidden, reached PC-relative from the assembly. */
__attribute__((used, visibility("hidden"))) const uint64_t igprof_go_all_signals = ~(uint64_t) 0;
__attribute__((used, visibility("hidden"))) int igprof_go_stack_busy;
__attribute__((used, visibility("hidden"))) uintptr_t igprof_go_stack_top;

/* On the stub's stack, all signals blocked: the final dump, then the end
 * the Go runtime asked for. */
__attribute__((used, noreturn, visibility("hidden"))) void igprof_go_exit(int code)
{
  igprof_tls.guard = IGPROF_GUARD_BUSY;
  igprof_final_dump("Go runtime exit");
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}


/* ---------------------------------------------------------------- */
/* Is this a Go program, and where is runtime.exit?                  */
/* ---------------------------------------------------------------- */

struct go_exe {
  uintptr_t bias;
  int is_go;
  const ElfW(Phdr) *phdr;
  int phnum;
};

#define GO_ALIGN(n, a) (((n) + (a) - 1) & ~(size_t) ((a) - 1))

/* The Go linker's build-id note: owner "Go", type 4. */
static int has_go_note(const struct dl_phdr_info *info)
{
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    /* Name and description start at the segment's alignment (glibc's reading). */
    size_t align = ph->p_align == 8 ? 8 : 4;
    const char *p = (const char *) (info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_memsz;
    while (left >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *) p;
      size_t desc = GO_ALIGN(sizeof *n + n->n_namesz, align);
      size_t next = GO_ALIGN(desc + n->n_descsz, align);
      if (desc > left || next > left || next == 0) break;
      if (n->n_type == 4 && n->n_namesz >= 3 && memcmp(p + sizeof *n, "Go", 3) == 0) return 1;
      p += next;
      left -= next;
    }
  }
  return 0;
}

static int first_module(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  struct go_exe *e = arg;
  e->bias = info->dlpi_addr;
  e->phdr = info->dlpi_phdr;
  e->phnum = info->dlpi_phnum;
  e->is_go = has_go_note(info);
  return 1; /* the first module is the executable */
}

static int is_go_exit(uintptr_t address)
{
  return memcmp((const void *) address, go_arch.exit_code, go_arch.exit_code_size) == 0;
}

/* runtime.exit by its symbol (runtime.exit.abi0 since Go 1.17). */
static uintptr_t exit_by_symbol(const struct go_exe *e, size_t *size)
{
  struct elf_symbols es;
  struct elf_symbol sym;
  uintptr_t found = 0;
  if (!igprof_state.exe[0] || elf_symbols_open(&es, igprof_state.exe, e->bias) != 0) return 0;
  if (elf_symbols_find(&es, "runtime.exit.abi0", &sym) == 0 || elf_symbols_find(&es, "runtime.exit", &sym) == 0) {
    found = sym.address;
    *size = sym.size;
  }
  elf_symbols_close(&es);
  return found;
}

/* runtime.exit by its code, in the executable's code segments (a stripped
 * program): only if it is there exactly once. */
static uintptr_t exit_by_code(const struct go_exe *e, size_t *size)
{
  uintptr_t found = 0;
  int matches = 0;
  for (int i = 0; i < e->phnum; ++i) {
    const ElfW(Phdr) *ph = &e->phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    const unsigned char *p = (const unsigned char *) (e->bias + ph->p_vaddr);
    size_t left = ph->p_filesz;
    const unsigned char *hit;
    while ((hit = memmem(p, left, go_arch.exit_code, go_arch.exit_code_size))) {
      found = (uintptr_t) hit;
      ++matches;
      left -= (size_t) (hit + 1 - p);
      p = hit + 1;
    }
  }
  *size = go_arch.exit_code_size;
  return matches == 1 ? found : 0;
}

static int go_start(void)
{
  struct go_exe e = {0};
  dl_iterate_phdr(first_module, &e);
  if (!e.is_go) return 0;
  if (!go_arch.exit_stub) {
    igprof_warn("go: a Go program: its end cannot be hooked on this architecture, so no dump will be written");
    return 0;
  }
  size_t size = 0;
  uintptr_t exit_fn = exit_by_symbol(&e, &size);
  if (!exit_fn || !is_go_exit(exit_fn)) exit_fn = exit_by_code(&e, &size);
  if (!exit_fn) {
    igprof_warn("go: runtime.exit not found with the code this igprof knows (another Go version?): no "
                "dump will be written when the program ends");
    return 0;
  }
  /* The stack the dump runs on, with a guard page below. */
  size_t page = (size_t) sysconf(_SC_PAGESIZE);
  char *stack = mmap(NULL, GO_STACK_SIZE + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED) {
    igprof_warn("go: no memory for the exit stack: no dump will be written when the program ends");
    return 0;
  }
  mprotect(stack, page, PROT_NONE);
  igprof_go_stack_top = (uintptr_t) (stack + page + GO_STACK_SIZE) & ~(uintptr_t) 15;
  /* Not "required": the one line below says what the failure means. */
  if (!igprof_hook_at("go", "runtime.exit", (void *) exit_fn, size, (void *) go_arch.exit_stub, 0))
    igprof_warn("go: runtime.exit could not be hooked (-d says why): no dump will be written when the "
                "program ends");
  return 0;
}

static struct igprof_module go_module = {
  .name = "go",
  .start = go_start,
  .enabled = 1,
};
IGPROF_MODULE(go_module);
