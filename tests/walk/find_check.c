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
 *        walk_find_check --fuzz ROUNDS ELF — see fuzz_file. */
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

#define MAX_SEGS 16

struct module {
  const char *name;
  uintptr_t bias;
  const void *hdr;
  struct eh_frame_segment segs[MAX_SEGS];
  int nsegs;
};

static long total_rows, total_mismatches;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_recipe(const char *label, struct frame_recipe rc) {
  printf("    %s: kind %u flags %u cfa %d ra %d fp %d\n", label, rc.kind, rc.flags, rc.cfa_offset,
         rc.ra_offset, rc.fp_offset);
}

/* Compare every row; returns the number of rows checked. */
static long check_module(const struct module *m) {
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
      if (frame_recipe_pack(rc) != t.recipes[i]) {
        if (mismatches++ < 5) {
          printf("  mismatch in %s at offset %#lx (row %u starting at %#lx):\n", m->name,
                 (unsigned long)at[k], i, (unsigned long)first);
          print_recipe("table", frame_recipe_unpack(t.recipes[i]));
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

static const char *const wanted[] = {"(main program)", "libc.so.6", "ld-linux-x86-64.so.2",
                                     "libstdc++.so.6", "libgcc_s.so.1"};
#define N_WANTED (sizeof wanted / sizeof wanted[0])
static int seen[N_WANTED];

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static int visit_loaded(struct dl_phdr_info *info, size_t size, void *arg) {
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
                    size_t *area_size, uintptr_t *text_start, uintptr_t *text_end) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    printf("FAIL: cannot open %s\n", path);
    return 0;
  }
  Elf64_Ehdr eh;
  Elf64_Phdr ph[64];
  if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phnum > 64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) ||
      pread(fd, ph, eh.e_phnum * sizeof ph[0], (off_t)eh.e_phoff) !=
          (ssize_t)(eh.e_phnum * sizeof ph[0])) {
    printf("FAIL: %s is not a 64-bit ELF file\n", path);
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

static int check_file(const char *path) {
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
static int fuzz_file(const char *path, int rounds) {
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
      bad_kind += rc.kind > FRAME_CFA_FP || (st != EH_FRAME_OK && rc.kind != FRAME_NO_INFO);
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

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MIN_ROWS [ELF...]\n", argv[0]);
    return 2;
  }
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
