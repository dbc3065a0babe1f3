/* eh_frame_find against eh_frame_compile: for every row of each module's
 * compiled table, the per-address derivation at the row's first and last
 * byte must give exactly the row's recipe (FRAME_NO_INFO and FRAME_COMPLEX
 * alike). Modules: the ones loaded here (the program, libc, ld.so,
 * libstdc++, libgcc_s) and, when given on the command line, ELF files that
 * this program maps itself, read-only, as a loader would (GCC's cc1: tens
 * of thousands of FDEs).
 *
 * usage: walk_find_check MIN_ROWS [ELF...] — fails on any mismatch, if a
 * loaded module above is missing, or if fewer than MIN_ROWS rows in all
 * were checked.
 *        walk_find_check --fuzz ROUNDS ELF — see fuzz_file (ELF: a path, or
 * the file name of a module loaded here).
 *        walk_find_check --synthetic — see synthetic. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eh_frame.h"
#include "walk_fast_cache.h"

#define MAX_SEGS 16

struct module {
  const char *name;
  uintptr_t bias;
  const void *hdr;
  struct eh_frame_segment segs[MAX_SEGS];
  int nsegs;
};

static long total_rows, total_mismatches;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_recipe(const char *label, struct frame_recipe rc)
{
  printf("    %s: kind %u flags %u cfa %d ra %d fp %d\n", label, rc.kind, rc.flags,
         (int)rc.cfa_offset, (int)rc.ra_offset, (int)rc.fp_offset);
}

/* Compare every row; returns the number of rows checked. */
static long check_module(const struct module *m)
{
  struct eh_frame_table t;
  double t0 = now();
  enum eh_frame_status st = eh_frame_compile(m->hdr, m->bias, m->segs, m->nsegs, &t);
  double t1 = now();
  if (st != EH_FRAME_OK) {
    printf("FAIL %s: compile: %s\n", m->name, eh_frame_status_str(st));
    total_mismatches++;
    return 0;
  }
  long mismatches = 0, finds = 0;
  double t2 = now();
  for (uint32_t i = 0; i < t.count; i++) {
    uintptr_t first = t.starts[i];
    uintptr_t last = i + 1 < t.count ? t.starts[i + 1] - 1 : first;
    uintptr_t at[2] = {first, last};
    for (int k = 0; k < 2; k++) {
      struct frame_recipe rc;
      (void)eh_frame_find(m->hdr, m->bias, m->segs, m->nsegs, m->bias + at[k], &rc);
      finds++;
      if (!frame_recipe_same(rc, t.recipes[i])) {
        if (mismatches++ < 5) {
          printf("  mismatch in %s at offset %#lx (row %u starting at %#lx):\n", m->name,
                 (unsigned long)at[k], i, (unsigned long)first);
          print_recipe("table", t.recipes[i]);
          print_recipe("find ", rc);
        }
      }
    }
  }
  double t3 = now();
  printf("%-44s fdes %6u rows %7u complex %4u bad %u: compile %.2f ms, find %.0f ns each, "
         "mismatches %ld\n",
         m->name, t.fde_count, t.count, t.complex_rows, t.bad_fdes, (t1 - t0) * 1e3,
         (t3 - t2) * 1e9 / (double)(finds ? finds : 1), mismatches);
  total_mismatches += mismatches;
  long rows = t.count;
  eh_frame_table_release(&t);
  return rows;
}

/* ---- modules of this process --------------------------------------------- */

#if defined(__x86_64__)
#define LOADER_NAME "ld-linux-x86-64.so.2"
#elif defined(__aarch64__)
#define LOADER_NAME "ld-linux-aarch64.so.1"
#elif defined(__i386__)
#define LOADER_NAME "ld-linux.so.2"
#endif
static const char *const wanted[] = {"(main program)", "libc.so.6", LOADER_NAME, "libstdc++.so.6",
                                     "libgcc_s.so.1"};
#define N_WANTED (sizeof wanted / sizeof wanted[0])
static int seen[N_WANTED];

static const char *base_name(const char *path)
{
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static int visit_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size, (void)arg;
  struct module m = {info->dlpi_name[0] ? info->dlpi_name : "(main program)", info->dlpi_addr,
                     NULL, {{0, 0}}, 0};
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_GNU_EH_FRAME)
      m.hdr = (const void *)start;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && m.nsegs < MAX_SEGS)
      m.segs[m.nsegs++] = (struct eh_frame_segment){start, start + ph->p_memsz};
  }
  if (!m.hdr)
    return 0;
  for (size_t k = 0; k < N_WANTED; k++)
    if (strcmp(base_name(m.name), wanted[k]) == 0)
      seen[k] = 1;
  total_rows += check_module(&m);
  return 0;
}

/* ---- an ELF file mapped here ------------------------------------------------ */

/* Map every PT_LOAD of `path` at one bias, as the loader would (no
 * relocation: .eh_frame_hdr holds only relative pointers); read-only, or
 * writable private copies for the fuzz test. Also gives the code range.
 * Returns 0 (with a message) on failure. */
static int map_file(const char *path, int writable, struct module *m, void **area,
                    size_t *area_size, uintptr_t *text_start, uintptr_t *text_end)
{
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    printf("FAIL: cannot open %s\n", path);
    return 0;
  }
  /* An ELF file of this program's class (ElfW: 64-bit or 32-bit). */
  ElfW(Ehdr) eh;
  ElfW(Phdr) ph[64];
  const int elf_class = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != elf_class || eh.e_phnum > 64 ||
      eh.e_phentsize != sizeof(ElfW(Phdr)) ||
      pread(fd, ph, eh.e_phnum * sizeof ph[0], (off_t)eh.e_phoff) !=
          (ssize_t)(eh.e_phnum * sizeof ph[0])) {
    printf("FAIL: %s is not a %zu-bit ELF file\n", path, sizeof(void *) * 8);
    close(fd);
    return 0;
  }
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < eh.e_phnum; i++)
    if (ph[i].p_type == PT_LOAD) {
      lo = ph[i].p_vaddr < lo ? ph[i].p_vaddr : lo;
      hi = ph[i].p_vaddr + ph[i].p_memsz > hi ? ph[i].p_vaddr + ph[i].p_memsz : hi;
    }
  lo &= ~(page - 1);
  *area = mmap(NULL, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (lo >= hi || *area == MAP_FAILED) {
    printf("FAIL: cannot reserve the address range of %s\n", path);
    close(fd);
    return 0;
  }
  *area_size = hi - lo;
  *m = (struct module){path, (uintptr_t)*area - lo, NULL, {{0, 0}}, 0};
  *text_start = UINTPTR_MAX;
  *text_end = 0;
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  for (int i = 0; i < eh.e_phnum; i++) {
    uintptr_t start = m->bias + ph[i].p_vaddr;
    if (ph[i].p_type == PT_GNU_EH_FRAME)
      m->hdr = (const void *)start;
    if (ph[i].p_type != PT_LOAD)
      continue;
    uintptr_t map_at = start & ~(page - 1), file_end = start + ph[i].p_filesz;
    off_t off = (off_t)(ph[i].p_offset - (start - map_at));
    if (ph[i].p_filesz &&
        mmap((void *)map_at, file_end - map_at, prot, MAP_PRIVATE | MAP_FIXED, fd, off) ==
            MAP_FAILED) {
      printf("FAIL: cannot map a segment of %s\n", path);
      close(fd);
      return 0;
    }
    uintptr_t zero_at = (file_end + page - 1) & ~(page - 1), mem_end = start + ph[i].p_memsz;
    if (mem_end > zero_at)
      mmap((void *)zero_at, mem_end - zero_at, prot, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1,
           0);
    if (m->nsegs < MAX_SEGS)
      m->segs[m->nsegs++] = (struct eh_frame_segment){start, mem_end};
    if (ph[i].p_flags & PF_X) {
      *text_start = start < *text_start ? start : *text_start;
      *text_end = mem_end > *text_end ? mem_end : *text_end;
    }
  }
  close(fd);
  if (!m->hdr) {
    printf("FAIL: %s has no PT_GNU_EH_FRAME\n", path);
    return 0;
  }
  return 1;
}

static int check_file(const char *path)
{
  struct module m;
  void *area;
  size_t size;
  uintptr_t text_start, text_end;
  if (!map_file(path, 0, &m, &area, &size, &text_start, &text_end))
    return 0;
  long rows = check_module(&m);
  total_rows += rows;
  munmap(area, size);
  return rows > 0;
}

/* ---- corrupted unwind data -------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void) { /* xorshift64: reproducible runs */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Corrupt a few bytes of .eh_frame_hdr / .eh_frame (everything from the
 * header to the end of its segment) in a private copy of `path`, then
 * derive recipes for random code addresses and compile the whole table;
 * restore, repeat. Nothing may fault (a fault kills the test); every
 * derivation must still return a recipe kind the walker knows. Fails if
 * the corruption never made a derivation fail (the parser was not
 * reached) or if no derivation gave an SP/FP recipe. */
/* The path of the loaded module whose file name is `name`. */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  const char **path = arg;
  if (strcmp(base_name(info->dlpi_name), *path) != 0)
    return 0;
  *path = info->dlpi_name;
  return 1;
}

static int fuzz_file(const char *path, int rounds)
{
  if (!strchr(path, '/') && !dl_iterate_phdr(find_loaded, &path)) {
    printf("FAIL: %s is not loaded\n", path);
    return 0;
  }
  struct module m;
  void *area;
  size_t size;
  uintptr_t text_start, text_end;
  if (!map_file(path, 1, &m, &area, &size, &text_start, &text_end))
    return 0;
  uintptr_t lo = (uintptr_t)m.hdr, hi = 0;
  for (int i = 0; i < m.nsegs; i++)
    if (lo >= m.segs[i].start && lo < m.segs[i].end)
      hi = m.segs[i].end;
  size_t len = hi - lo;
  uint8_t *pristine = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pristine == MAP_FAILED || len == 0 || text_end <= text_start) {
    printf("FAIL: fuzz set-up for %s\n", path);
    return 0;
  }
  memcpy(pristine, (void *)lo, len);
  long finds = 0, failed = 0, recipes = 0, bad_kind = 0, compiles_failed = 0;
  for (int r = 0; r < rounds; r++) {
    uint8_t *data = (uint8_t *)lo;
    int flips = 1 + (int)(rng() % 32);
    /* Mostly near the header (its fields, the search table, the first
     * CIEs and FDEs), sometimes anywhere, sometimes its fixed fields. */
    size_t span = rng() % 4 ? (len < 65536 ? len : 65536) : len;
    if (rng() % 8 == 0)
      span = 16;
    for (int k = 0; k < flips; k++)
      data[rng() % span] = (uint8_t)rng();
    for (int k = 0; k < 2000; k++) {
      struct frame_recipe rc;
      uintptr_t pc = text_start + rng() % (text_end - text_start);
      enum eh_frame_status st = eh_frame_find(m.hdr, m.bias, m.segs, m.nsegs, pc, &rc);
      finds++;
      failed += st != EH_FRAME_OK;
      recipes += rc.kind == FRAME_CFA_SP || rc.kind == FRAME_CFA_FP;
      bad_kind += rc.kind > FRAME_CFA_DEREF || (st != EH_FRAME_OK && rc.kind != FRAME_NO_INFO);
    }
    struct eh_frame_table t;
    if (eh_frame_compile(m.hdr, m.bias, m.segs, m.nsegs, &t) != EH_FRAME_OK)
      compiles_failed++;
    eh_frame_table_release(&t);
    memcpy(data, pristine, len);
  }
  printf("fuzz %s: %d rounds, %ld derivations: %ld failed, %ld SP/FP recipes, %ld bad results; "
         "%ld compiles failed\n",
         path, rounds, finds, failed, recipes, bad_kind, compiles_failed);
  munmap(pristine, len);
  munmap(area, size);
  int ok = failed > 0 && recipes > 0 && bad_kind == 0;
  if (!ok)
    printf("FAIL: fuzzing %s did not exercise the parser or gave bad results\n", path);
  return ok;
}

/* ---- a hand-made module ------------------------------------------------------- */

/* Unwind data written here byte by byte, so that the lookup rules meet the
 * cases real modules rarely have: FDEs nested in others, an FDE of empty
 * range and a malformed FDE inside another, code between and after FDEs. One buffer is the
 * whole module: .eh_frame_hdr at 0, .eh_frame at 256; the code it
 * describes (never read) lies at bias + 0x1000 and on. */
struct builder {
  uint8_t *buf;
  size_t at;
};

static void put(struct builder *b, const void *p, size_t n)
{
  memcpy(b->buf + b->at, p, n);
  b->at += n;
}
static void put_u8(struct builder *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(struct builder *b, uint32_t v) { put(b, &v, 4); }
static void put_s32(struct builder *b, int32_t v) { put(b, &v, 4); }

enum { CODE = 0x1000, EH_FRAME = 256 };

/* An FDE for [CODE + begin, CODE + begin + len) with `prog`; returns its
 * offset. pc_begin is pc-relative (sdata4), as the CIE's 'R' says. */
static size_t put_fde(struct builder *b, uintptr_t bias, size_t cie, uint32_t begin, uint32_t len,
                      const uint8_t *prog, size_t prog_len)
{
  size_t start = b->at, body = 4 + 4 + 4 + 1 + prog_len;
  size_t padded = (body + 3) & ~(size_t)3;
  put_u32(b, (uint32_t)padded);
  put_u32(b, (uint32_t)(b->at - cie)); /* back to the CIE, from this field */
  put_s32(b, (int32_t)((bias + CODE + begin) - (uintptr_t)(b->buf + b->at)));
  put_u32(b, len);
  put_u8(b, 0); /* augmentation data length */
  put(b, prog, prog_len);
  while (b->at < start + 4 + padded)
    put_u8(b, 0); /* DW_CFA_nop */
  return start;
}

static int expect_recipe(const struct module *m, uint32_t off, struct frame_recipe want)
{
  struct frame_recipe rc;
  (void)eh_frame_find(m->hdr, m->bias, m->segs, m->nsegs, m->bias + CODE + off, &rc);
  int ok = frame_recipe_same(rc, want);
  if (!ok) {
    printf("FAIL: code offset %#x:\n", off);
    print_recipe("want", want);
    print_recipe("got ", rc);
  }
  return ok;
}

/* The architecture's part of the hand-made module: its CIE and function
 * A's program (the prologue of a function with a frame pointer), the
 * recipes they give, and where. */
#if defined(__x86_64__)
/* CIE: "zR", code align 1, data align -8, RA column 16, FDE pointers
 * pcrel|sdata4; CFA = rsp + 8, RA at CFA - 8. */
static const uint8_t cie_body[] = {0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,
                                   0x0c, 7, 8, 0x90, 1, 0, 0};
/* A: push rbp at +0, mov rsp,rbp at +1, frame on rbp from +4. */
static const uint8_t prog_a[] = {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6};
static const struct frame_recipe at_entry = {8, 0, -8, FRAME_CFA_SP, 0};
enum {
  INSN = 1,         /* code alignment factor */
  SAVED_AT = 0x001, /* A, after push rbp */
  BAD_AT = 0x002,   /* the malformed FDE, inside A: advance 1, then no such instruction */
  IN_SAVED = 0x003, /* A, past the malformed FDE's advance */
  ON_FP_AT = 0x004, /* A, on rbp */
};
static const struct frame_recipe saved = {16, -16, -8, FRAME_CFA_SP, FRAME_FP_SAVED};
static const struct frame_recipe on_fp = {16, -16, -8, FRAME_CFA_FP, FRAME_FP_SAVED};
#elif defined(__i386__)
/* CIE: "zR", code align 1, data align -4, RA column 8 (eip), FDE pointers
 * pcrel|sdata4; CFA = esp + 4, RA at CFA - 4. */
static const uint8_t cie_body[] = {0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x7c, 8, 1, 0x1b,
                                   0x0c, 4, 4, 0x88, 1, 0, 0};
/* A: push ebp at +0, three bytes of mov esp,ebp (with a prefix) at +1,
 * frame on ebp from +4. */
static const uint8_t prog_a[] = {0x41, 0x0e, 8, 0x85, 2, 0x43, 0x0d, 5};
static const struct frame_recipe at_entry = {4, 0, -4, FRAME_CFA_SP, 0};
enum { INSN = 1, SAVED_AT = 0x001, BAD_AT = 0x002, IN_SAVED = 0x003, ON_FP_AT = 0x004 };
static const struct frame_recipe saved = {8, -8, -4, FRAME_CFA_SP, FRAME_FP_SAVED};
static const struct frame_recipe on_fp = {8, -8, -4, FRAME_CFA_FP, FRAME_FP_SAVED};
#elif defined(__aarch64__)
/* CIE: "zR", code align 4, data align -8, RA column 30 (x30), FDE pointers
 * pcrel|sdata4; CFA = sp + 0, the return address still in x30. */
static const uint8_t cie_body[] = {0, 0, 0, 0, 1, 'z', 'R', 0, 4, 0x78, 30, 1, 0x1b,
                                   0x0c, 31, 0, 0, 0, 0, 0};
/* A: stp x29, x30, [sp, #-16]! at +0, mov x29, sp at +0xc, frame on x29
 * from +0x10. */
static const uint8_t prog_a[] = {0x41, 0x0e, 16, 0x9d, 2, 0x9e, 1, 0x43, 0x0d, 29};
static const struct frame_recipe at_entry = {0, 0, 0, FRAME_CFA_SP, FRAME_RA_IN_LR};
enum { INSN = 4, SAVED_AT = 0x004, BAD_AT = 0x006, IN_SAVED = 0x00b, ON_FP_AT = 0x010 };
static const struct frame_recipe saved = {16, -16, -8, FRAME_CFA_SP, FRAME_FP_SAVED};
static const struct frame_recipe on_fp = {16, -16, -8, FRAME_CFA_FP, FRAME_FP_SAVED};
#endif
static const struct frame_recipe no_info = {0, 0, 0, FRAME_NO_INFO, 0};

/* A realigned frame (GCC's DRAP, main on i386): after the prologue the CFA
 * is the word at FP - 2 words (DW_CFA_def_cfa_expression: DW_OP_breg<fp>
 * -2w; DW_OP_deref) and the caller's FP is at FP (DW_CFA_expression fp:
 * DW_OP_breg<fp> 0): a FRAME_CFA_DEREF recipe, which the PC cache holds
 * whole; an expression of another shape stays FRAME_COMPLEX. */
static int synthetic_realigned(void)
{
#if FRAME_LINK_REGISTER
  return 1; /* the CIE below has the return address on the stack */
#else
  static uint8_t buf[1024] __attribute__((aligned(8)));
  const uint8_t w = (uint8_t)sizeof(uintptr_t), breg_fp = (uint8_t)(0x70 + frame_arch.dwarf_fp);
  struct builder b = {buf, EH_FRAME};
  uintptr_t bias = (uintptr_t)buf;
  size_t cie = b.at;
  put_u32(&b, sizeof cie_body);
  put(&b, cie_body, sizeof cie_body);
  const uint8_t prog[] = {0x41,                                   /* advance 1 */
                          0x0f, 3, breg_fp, (uint8_t)(0x80 - 2 * w), 0x06, /* *(fp - 2w) */
                          0x10, (uint8_t)frame_arch.dwarf_fp, 2, breg_fp, 0, /* fp at fp + 0 */
                          0x41,                                   /* advance 1 */
                          0x0f, 4, breg_fp, (uint8_t)(0x80 - 2 * w), 0x06, 0x06}; /* two derefs */
  size_t fde = put_fde(&b, bias, cie, 0x000, 0x010, prog, sizeof prog);
  put_u32(&b, 0);
  size_t end = b.at;
  struct builder h = {buf, 0};
  put_u8(&h, 1);
  put_u8(&h, 0x1b);
  put_u8(&h, 0x03);
  put_u8(&h, 0x3b);
  put_s32(&h, (int32_t)(EH_FRAME - h.at));
  put_u32(&h, 1);
  put_s32(&h, (int32_t)CODE);
  put_s32(&h, (int32_t)fde);
  struct module m = {"(hand-made, realigned)", bias, buf, {{(uintptr_t)buf, (uintptr_t)buf + end}}, 1};
  const struct frame_recipe realigned = {-2 * w, 0, at_entry.ra_offset, FRAME_CFA_DEREF,
                                         FRAME_FP_SAVED};
  const struct frame_recipe complex = {0, 0, 0, FRAME_COMPLEX, 0};
  int ok = expect_recipe(&m, 0x000, at_entry) & expect_recipe(&m, 0x001, realigned) &
           expect_recipe(&m, 0x002, complex);
  uint32_t bits;
  int fits = recipe_compress(realigned, &bits);
  struct frame_recipe back = recipe_expand(bits);
  ok &= fits && frame_recipe_same(back, realigned);
  printf("realigned frame: recipe %s, PC cache round trip %s\n", ok ? "ok" : "FAIL",
         fits && frame_recipe_same(back, realigned) ? "ok" : "FAIL");
  return ok;
#endif
}

static int synthetic(void)
{
  static uint8_t buf[4096] __attribute__((aligned(8)));
  struct builder b = {buf, EH_FRAME};
  uintptr_t bias = (uintptr_t)buf;
  size_t cie = b.at;
  put_u32(&b, sizeof cie_body);
  put(&b, cie_body, sizeof cie_body);
  static const uint8_t prog_leaf[] = {0};
  static const uint8_t prog_bad[] = {0x41, 0x20}; /* advance 1, then no such instruction */
  size_t fde_a = put_fde(&b, bias, cie, 0x000, 0x100, prog_a, sizeof prog_a);
  size_t fde_m = put_fde(&b, bias, cie, BAD_AT, 0x010, prog_bad, sizeof prog_bad); /* in A */
  size_t fde_z = put_fde(&b, bias, cie, 0x050, 0, prog_leaf, 1); /* empty range inside A */
  size_t fde_b = put_fde(&b, bias, cie, 0x080, 0x010, prog_leaf, 1); /* nested in A */
  size_t fde_c = put_fde(&b, bias, cie, 0x1000, 0x010, prog_leaf, 1); /* after a gap */
  put_u32(&b, 0); /* .eh_frame terminator */
  size_t end = b.at;
  /* .eh_frame_hdr: version 1, eh_frame_ptr pcrel|sdata4, count udata4,
   * table datarel|sdata4, sorted by initial location. */
  struct builder h = {buf, 0};
  put_u8(&h, 1);
  put_u8(&h, 0x1b);
  put_u8(&h, 0x03);
  put_u8(&h, 0x3b);
  put_s32(&h, (int32_t)(EH_FRAME - h.at));
  put_u32(&h, 5);
  const uint32_t begins[5] = {0x000, BAD_AT, 0x050, 0x080, 0x1000};
  const size_t fdes[5] = {fde_a, fde_m, fde_z, fde_b, fde_c};
  for (int i = 0; i < 5; i++) {
    put_s32(&h, (int32_t)(CODE + begins[i]));
    put_s32(&h, (int32_t)fdes[i]);
  }
  struct module m = {"(hand-made)", bias, buf, {{(uintptr_t)buf, (uintptr_t)buf + end}}, 1};

  int ok = 1;
  ok &= expect_recipe(&m, 0x000, at_entry);  /* A's entry */
  ok &= expect_recipe(&m, SAVED_AT, saved);  /* after the FP is saved */
  ok &= expect_recipe(&m, IN_SAVED, saved);  /* A, past the malformed FDE */
  ok &= expect_recipe(&m, ON_FP_AT, on_fp);  /* on the frame pointer */
  ok &= expect_recipe(&m, 0x060, on_fp);     /* A again, past the empty FDE */
  ok &= expect_recipe(&m, 0x080, at_entry);  /* B */
  ok &= expect_recipe(&m, 0x08f, at_entry);
  ok &= expect_recipe(&m, 0x090, no_info);   /* after B: B's end wins over A */
  ok &= expect_recipe(&m, 0x0ff, no_info);
  ok &= expect_recipe(&m, 0x800, no_info);   /* between FDEs */
  ok &= expect_recipe(&m, 0x1005, at_entry); /* C */
  ok &= expect_recipe(&m, 0x1010, no_info);  /* after the last FDE */
  struct frame_recipe rc;
  (void)eh_frame_find(m.hdr, m.bias, m.segs, m.nsegs, m.bias + CODE - 1, &rc);
  ok &= rc.kind == FRAME_NO_INFO; /* before the first */
  /* And every address from before the first FDE to after the last gives
   * what the compiled table gives, the malformed FDE's first instruction
   * apart: compiling drops that FDE whole, a derivation stops there before
   * the bad instruction and answers from what it read (the CIE's entry
   * state). */
  struct eh_frame_table t;
  enum eh_frame_status st = eh_frame_compile(m.hdr, m.bias, m.segs, m.nsegs, &t);
  long checked = 0, mismatches = 0;
  for (uintptr_t off = CODE - 16; st == EH_FRAME_OK && off < CODE + 0x1020; off++) {
    if (off - (CODE + BAD_AT) < INSN)
      continue;
    (void)eh_frame_find(m.hdr, m.bias, m.segs, m.nsegs, m.bias + off, &rc);
    checked++;
    if (!frame_recipe_same(rc, eh_frame_lookup(&t, off)))
      mismatches++;
  }
  ok &= expect_recipe(&m, BAD_AT, at_entry);
  ok &= frame_recipe_same(eh_frame_lookup(&t, CODE + BAD_AT), saved); /* A's row, kept whole */
  printf("hand-made module: status %s, %u rows, %u bad FDEs, %ld addresses compared, "
         "%ld mismatches\n",
         eh_frame_status_str(st), t.count, t.bad_fdes, checked, mismatches);
  ok &= st == EH_FRAME_OK && t.count == 7 && t.bad_fdes == 1 && checked == 0x1030 - INSN &&
        mismatches == 0;
  eh_frame_table_release(&t);
  /* A header that claims more entries than its segment holds is refused. */
  uint32_t count = 1000;
  memcpy(buf + 8, &count, 4);
  ok &= eh_frame_find(m.hdr, m.bias, m.segs, m.nsegs, m.bias + CODE, &rc) ==
            EH_FRAME_OUT_OF_BOUNDS && rc.kind == FRAME_NO_INFO;
  ok &= synthetic_realigned();
  printf("%s\n", ok ? "ok" : "FAIL");
  return ok;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s MIN_ROWS [ELF...]\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "--synthetic") == 0)
    return synthetic() ? 0 : 1;
  if (strcmp(argv[1], "--fuzz") == 0)
    return argc == 4 && fuzz_file(argv[3], atoi(argv[2])) ? 0 : 1;
  long min_rows = atol(argv[1]);
  int ok = 1;
  dl_iterate_phdr(visit_loaded, NULL);
  for (size_t k = 0; k < N_WANTED; k++)
    if (!seen[k]) {
      printf("FAIL: %s is not loaded or has no unwind table\n", wanted[k]);
      ok = 0;
    }
  for (int i = 2; i < argc; i++)
    ok &= check_file(argv[i]);
  printf("rows checked %ld (each at its first and last byte), mismatches %ld\n", total_rows,
         total_mismatches);
  if (total_rows < min_rows) {
    printf("FAIL: fewer than %ld rows checked\n", min_rows);
    ok = 0;
  }
  return ok && total_mismatches == 0 ? 0 : 1;
}
