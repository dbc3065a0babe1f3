#define _GNU_SOURCE
#include "proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

static uintptr_t parse_hex(const char **s)
{
  uintptr_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    if (c >= '0' && c <= '9')
      v = v << 4 | (uintptr_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v << 4 | (uintptr_t)(c - 'a' + 10);
    else
      return v;
  }
}

/* One line: "start-end perms offset dev inode   path". */
static int parse_line(char *line, struct maps_entry *e)
{
  const char *s = line;
  e->start = parse_hex(&s);
  if (*s++ != '-')
    return -1;
  e->end = parse_hex(&s);
  if (*s++ != ' ' || strlen(s) < 4)
    return -1;
  e->prot = (s[0] == 'r' ? PROT_READ : 0) | (s[1] == 'w' ? PROT_WRITE : 0) |
            (s[2] == 'x' ? PROT_EXEC : 0);
  /* skip perms, offset, dev, inode; the path (if any) follows more spaces */
  for (int field = 0; field < 4; field++) {
    while (*s && *s != ' ')
      s++;
    while (*s == ' ')
      s++;
  }
  e->path = s;
  return 0;
}

static int open_maps(void)
{
  int fd;
  do
    fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  return fd;
}

int proc_maps_for_each(int (*fn)(const struct maps_entry *entry, void *arg), void *arg)
{
  int fd = open_maps();
  if (fd < 0)
    return -1;
  char buf[8192];
  size_t have = 0;
  int result = 0, skipping = 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n < 0)
        result = -1;
      break;
    }
    have += (size_t)n;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
      *nl = 0;
      struct maps_entry e;
      if (!skipping && parse_line(line, &e) == 0 && (result = fn(&e, arg)) != 0)
        goto done;
      skipping = 0;
      line = nl + 1;
    }
    have -= (size_t)(line - buf);
    memmove(buf, line, have);
    if (have == sizeof buf - 1) {
      /* A line longer than the buffer (a very long path): report it with the
       * path cut, then skip the rest of it. */
      struct maps_entry e;
      if (parse_line(buf, &e) == 0 && (result = fn(&e, arg)) != 0)
        goto done;
      have = 0;
      skipping = 1;
    }
  }
done:
  close(fd);
  return result;
}

struct protection_query {
  uintptr_t addr;
  int prot;
  char *path;
  size_t path_cap;
  uintptr_t start, end;
};

static int find_protection(const struct maps_entry *e, void *arg)
{
  struct protection_query *q = arg;
  if (q->addr >= e->start && q->addr < e->end) {
    q->prot = e->prot;
    q->start = e->start;
    q->end = e->end;
    if (q->path_cap) {
      size_t n = strlen(e->path);
      if (n >= q->path_cap)
        n = q->path_cap - 1;
      memcpy(q->path, e->path, n);
      q->path[n] = 0;
    }
    return 1;
  }
  return 0;
}

/* Linux 6.11's PROCMAP_QUERY ioctl on /proc/self/maps answers for one
 * address. The text file makes the kernel format every mapping up to the one
 * asked for (a path lookup each); the query costs about as much as one line.
 * Older kernel headers do not have it, so the UAPI layout is spelled out. */
struct procmap_query {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start, vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major, dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04

/* 1: query when the kernel has it; 0: never (set by tests, or after the
 * kernel refused it once). */
static int use_query = 1;

int proc_maps_use_query(int use)
{
  int was = use_query;
  use_query = use;
  return was;
}

/* The protection of addr's mapping through PROCMAP_QUERY, -1 if addr is not
 * mapped, -2 if the kernel cannot answer this way. */
static int query_protection(uintptr_t addr, char *path, size_t path_cap, uintptr_t *start,
                            uintptr_t *end)
{
  int fd = open_maps();
  if (fd < 0)
    return -2;
  char name[4096];
  struct procmap_query q;
  memset(&q, 0, sizeof q);
  q.size = sizeof q;
  q.query_addr = addr;
  q.vma_name_addr = (uintptr_t)name;
  q.vma_name_size = sizeof name;
  int r = ioctl(fd, PROCMAP_QUERY, &q);
  int e = errno;
  close(fd);
  if (r != 0) {
    if (e == ENOENT)
      return -1;
    if (e == ENOTTY || e == EINVAL)
      use_query = 0; /* no such ioctl here: do not ask again */
    return -2;       /* ENAMETOOLONG and the like: the text file tells */
  }
  if (q.vma_start > addr || addr >= q.vma_end)
    return -1;
  *start = (uintptr_t)q.vma_start;
  *end = (uintptr_t)q.vma_end;
  if (path_cap) {
    size_t n = q.vma_name_size ? strnlen(name, q.vma_name_size) : 0;
    if (n >= path_cap)
      n = path_cap - 1;
    memcpy(path, name, n);
    path[n] = 0;
  }
  return (q.vma_flags & PROCMAP_QUERY_VMA_READABLE ? PROT_READ : 0) |
         (q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE ? PROT_WRITE : 0) |
         (q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE ? PROT_EXEC : 0);
}

int proc_maps_region(uintptr_t addr, uintptr_t *start, uintptr_t *end, char *path, size_t path_cap)
{
  struct protection_query q = {addr, -1, path, path_cap, 0, 0};
  if (path_cap)
    path[0] = 0;
  if (use_query) {
    int prot = query_protection(addr, path, path_cap, start, end);
    if (prot != -2)
      return prot;
  }
  proc_maps_for_each(find_protection, &q);
  *start = q.start;
  *end = q.end;
  return q.prot;
}

int proc_maps_protection(uintptr_t addr, char *path, size_t path_cap)
{
  uintptr_t start, end;
  return proc_maps_region(addr, &start, &end, path, path_cap);
}
