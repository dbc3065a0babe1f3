/* A program whose files sit on the descriptor numbers a profiler might use
 * behind its back (libunwind's validation pipe was on 3/4 or 4/5).
 *
 * It prints its descriptors (number and kind) at start, closes every
 * descriptor above 2, opens INPUT (lands on 3) and OUTPUT (lands on 4),
 * dup2()s OUTPUT onto 5 as well, and copies INPUT to OUTPUT in small chunks,
 * alternately through fd 4 and fd 5. Around every chunk it allocates from C
 * frames, from C called by run-time machine code without unwind information
 * (jit_code.h, with and without a frame pointer: libunwind falls back to
 * frame-pointer stepping there and validates the addresses it reads), and
 * spins in such code so that profiling signals land in it. At the end it
 * prints its descriptors again and the byte count.
 *
 * usage: walk_fd_program INPUT OUTPUT SPIN
 *   SPIN: iterations of the JIT loop per chunk (0: none)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jit_code.h"

#define CHUNK 97 /* not a divisor of anything the driver writes */

static struct jit_code jit;
static volatile long sink;

static const char *kind_of(int fd)
{
  struct stat st;
  if (fstat(fd, &st) != 0)
    return "?";
  switch (st.st_mode & S_IFMT) {
  case S_IFREG: return "file";
  case S_IFIFO: return "pipe";
  case S_IFCHR: return "chr";
  case S_IFSOCK: return "socket";
  case S_IFDIR: return "dir";
  default: return "other";
  }
}

/* "fds: 0:chr 1:pipe ..." in ascending order, without the listing's own. */
static void list_fds(const char *when)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    perror("walk_fd_program: /proc/self/fd");
    exit(2);
  }
  char seen[1024] = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != dirfd(d) && fd >= 0 && fd < (int)sizeof seen)
      seen[fd] = 1;
  }
  closedir(d);
  printf("%s fds:", when);
  for (int fd = 0; fd < (int)sizeof seen; fd++)
    if (seen[fd])
      printf(" %d:%s", fd, kind_of(fd));
  printf("\n");
  fflush(stdout);
}

__attribute__((noinline)) static void allocate(long n)
{
  void *p = malloc(16 + (size_t)(n % 64));
  sink += (long)(uintptr_t)p & 1;
  free(p);
}

__attribute__((noinline)) static void allocate_deeper(long n)
{
  allocate(n);
  __asm__ volatile("" ::: "memory");
}

static void write_all(int fd, const char *buf, ssize_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, buf, (size_t)n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      perror("walk_fd_program: write");
      exit(2);
    }
    buf += w;
    n -= w;
  }
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: %s INPUT OUTPUT SPIN\n", argv[0]);
    return 2;
  }
  long spin = atol(argv[3]);
  if (!jit_code_make(&jit)) {
    perror("walk_fd_program: cannot make code");
    return 2;
  }
  list_fds("start");
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
    for (int fd = 3; fd < 1024; fd++)
      close(fd);
  }
  int in = open(argv[1], O_RDONLY);
  int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in != 3 || out != 4 || dup2(out, 5) != 5) {
    fprintf(stderr, "walk_fd_program: files on %d, %d, not 3, 4 (%s)\n", in, out,
            strerror(errno));
    return 2;
  }
  char buf[CHUNK];
  long total = 0, chunks = 0;
  for (;;) {
    allocate_deeper(chunks);
    jit_call(&jit, JIT_WITH_FP, allocate, chunks);
    ssize_t n = read(3, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      perror("walk_fd_program: read");
      return 2;
    }
    if (n == 0)
      break;
    jit_call(&jit, JIT_OUTER, allocate, chunks);
    jit_call(&jit, JIT_WITHOUT_FP, allocate, chunks);
    if (spin > 0) {
      jit_spin(&jit, JIT_SPIN_FP, spin);
      jit_spin(&jit, JIT_SPIN_WITHOUT_FP, spin);
    }
    write_all(chunks % 2 ? 5 : 4, buf, n);
    total += n;
    chunks++;
  }
  list_fds("end");
  close(3);
  close(4);
  close(5);
  printf("copied %ld bytes in %ld chunks\n", total, chunks);
  return 0;
}
