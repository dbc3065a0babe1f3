/* Shared launcher code (launch.h). */
#define _GNU_SOURCE
#include "launch.h"
#include "options.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The runtime's directory relative to the launchers' (CMake: from
 * CMAKE_INSTALL_BINDIR to CMAKE_INSTALL_LIBDIR/igprof, e.g. "../lib/igprof"
 * or "../lib/x86_64-linux-gnu/igprof"). */
#ifndef IGPROF_RUNTIME_FROM_BIN
#error "IGPROF_RUNTIME_FROM_BIN is set by src/launch/CMakeLists.txt"
#endif
#define LIBRARY_RELATIVE "/" IGPROF_RUNTIME_FROM_BIN "/libigprof.so"

const char *launch_tool = "igprof";

void launch_die(int status, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", launch_tool);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

void launch_append_token(char **text, size_t *len, const char *token, const char *arg)
{
  char quoted[8192];
  if (arg) igprof_options_quote(quoted, sizeof quoted, arg);
  size_t need = strlen(token) + (arg ? strlen(quoted) : 0) + 2;
  *text = realloc(*text, *len + need + 1);
  if (!*text) launch_die(LAUNCH_EXIT_ERROR, "out of memory");
  if (*len) (*text)[(*len)++] = ' ';
  const char *pct = strstr(token, "%s");
  if (pct && arg) {
    *len += (size_t) sprintf(*text + *len, "%.*s%s%s", (int) (pct - token), token, quoted, pct + 2);
  } else {
    *len += (size_t) sprintf(*text + *len, "%s", token);
  }
}

const struct launch_option *launch_find_option(const struct launch_option *table, size_t count,
                                               const char *arg)
{
  for (size_t i = 0; i < count; ++i)
    if ((table[i].short_opt && strcmp(arg, table[i].short_opt) == 0) ||
        (table[i].long_opt && strcmp(arg, table[i].long_opt) == 0))
      return &table[i];
  return NULL;
}

void launch_print_options(FILE *f, const struct launch_option *table, size_t count, int width)
{
  for (size_t i = 0; i < count; ++i) {
    const struct launch_option *o = &table[i];
    char left[64];
    snprintf(left, sizeof left, "%s%s%s%s%s", o->short_opt ? o->short_opt : "",
             o->short_opt && o->long_opt ? ", " : "", o->long_opt ? o->long_opt : "",
             o->arg_name ? " " : "", o->arg_name ? o->arg_name : "");
    fprintf(f, "  %-*s %s\n", width, left, o->help);
  }
  fprintf(f, "  %-*s %s\n", width, "-h, --help", "show this help");
  fprintf(f, "  %-*s %s\n\n", width, "--version", "show the version");
}

int launch_parse(int argc, char **argv, const struct launch_option *table, size_t count,
                 void (*usage)(FILE *), char **text, int *selected, const char *output_token,
                 const char **output)
{
  size_t len = *text ? strlen(*text) : 0;
  int i;
  for (i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) return i + 1;
    if (arg[0] != '-' || !arg[1]) break;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(arg, "--version") == 0) {
      printf("%s (igprof) %s\n", launch_tool, IGPROF_VERSION);
      exit(0);
    }
    const struct launch_option *o = launch_find_option(table, count, arg);
    if (!o) launch_die(LAUNCH_EXIT_ERROR, "unknown option '%s' (see %s --help)", arg, launch_tool);
    const char *value = NULL;
    if (o->arg_name) {
      if (i + 1 >= argc) launch_die(LAUNCH_EXIT_ERROR, "%s needs an argument (%s)", arg, o->expect);
      value = argv[++i];
      if (o->check && !o->check(value)) launch_die(LAUNCH_EXIT_ERROR, "%s: bad argument, expected %s", arg, o->expect);
    }
    if (output_token && strncmp(o->token, output_token, strlen(output_token)) == 0) *output = value;
    launch_append_token(text, &len, o->token, value);
    *selected += o->selects;
  }
  return i;
}

char *launch_resolve_program(const char *prog)
{
  struct stat st;
  if (strchr(prog, '/')) {
    if (stat(prog, &st) != 0) launch_die(127, "%s: %s", prog, strerror(errno));
    if (S_ISDIR(st.st_mode)) launch_die(126, "%s: %s", prog, "Is a directory");
    if (access(prog, X_OK) != 0) launch_die(126, "%s: %s", prog, strerror(errno));
    return strdup(prog);
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  char *denied = NULL;
  for (const char *p = path;; ) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t) (colon - p) : strlen(p);
    char *cand;
    if (asprintf(&cand, "%.*s%s%s", (int) n, p, n ? "/" : "", prog) < 0) launch_die(LAUNCH_EXIT_ERROR, "out of memory");
    if (stat(cand, &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (access(cand, X_OK) == 0) { free(denied); return cand; }
      if (!denied) denied = strdup(cand);
    }
    free(cand);
    if (!colon) break;
    p = colon + 1;
  }
  if (denied) launch_die(126, "%s: %s", denied, "Permission denied");
  launch_die(127, "%s: %s", prog, "command not found");
}

char *launch_library_path(void)
{
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) launch_die(LAUNCH_EXIT_ERROR, "cannot read /proc/self/exe");
  self[n] = 0;
  char *slash = strrchr(self, '/');
  *slash = 0;
  char *lib;
  if (asprintf(&lib, "%s%s", self, LIBRARY_RELATIVE) < 0) launch_die(LAUNCH_EXIT_ERROR, "out of memory");
  char *real = realpath(lib, NULL);
  if (!real) launch_die(LAUNCH_EXIT_ERROR, "cannot find the runtime library %s: %s", lib, strerror(errno));
  free(lib);
  return real;
}

void launch_preload(const char *lib)
{
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, lib)) return;
  char *joined;
  if (asprintf(&joined, "%s%s%s", pre && *pre ? pre : "", pre && *pre ? ":" : "", lib) < 0)
    launch_die(LAUNCH_EXIT_ERROR, "out of memory");
  setenv("LD_PRELOAD", joined, 1);
  free(joined);
}

/* The launcher becomes the program: exec, no child. The program keeps the
 * pid the user started (kill, timeout, a job-control shell and -S's
 * `kill -USR1 <pid>` reach it directly, each signal once), and its death or
 * exit status is reported by whoever waits for it exactly as without igprof. */
int launch_run(const char *program, int argc, char **argv)
{
  fflush(NULL);
  execv(program, argv);
  if (errno == ENOEXEC) {
    /* A script without #!: shells run it with sh. */
    char **args = calloc((size_t) argc + 2, sizeof *args);
    if (!args) launch_die(LAUNCH_EXIT_ERROR, "out of memory");
    args[0] = "sh";
    args[1] = (char *) program;
    for (int k = 1; k < argc; ++k) args[k + 1] = argv[k];
    execv("/bin/sh", args);
  }
  int err = errno;
  launch_die(err == ENOENT ? 127 : 126, "%s: %s", argv[0], strerror(err));
}

void launch_check_output_dir(const char *flag, const char *path)
{
  if (!path || !path[0] || path[0] == '|') return;
  char *dir = strdup(path);
  if (!dir) launch_die(LAUNCH_EXIT_ERROR, "out of memory");
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0; /* launch_absolute_paths made it absolute */
  const char *d = slash ? (dir[0] ? dir : "/") : ".";
  struct stat st;
  if (stat(d, &st) != 0) launch_die(LAUNCH_EXIT_ERROR, "%s %s: cannot write in %s: %s", flag, path, d, strerror(errno));
  if (!S_ISDIR(st.st_mode)) launch_die(LAUNCH_EXIT_ERROR, "%s %s: %s is not a directory", flag, path, d);
  if (access(d, W_OK | X_OK) != 0) launch_die(LAUNCH_EXIT_ERROR, "%s %s: cannot write in %s: %s", flag, path, d, strerror(errno));
  free(dir);
}

/* ---------------------------------------------------------------- */
/* Programs the runtime cannot be loaded into                        */
/* ---------------------------------------------------------------- */

#if defined(__x86_64__)
#define OWN_MACHINE EM_X86_64
#define OWN_CLASS ELFCLASS64
#define OWN_ARCH "x86_64"
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#define OWN_CLASS ELFCLASS64
#define OWN_ARCH "arm64"
#elif defined(__i386__)
#define OWN_MACHINE EM_386
#define OWN_CLASS ELFCLASS32
#define OWN_ARCH "i386"
#elif defined(__arm__)
#define OWN_MACHINE EM_ARM
#define OWN_CLASS ELFCLASS32
#define OWN_ARCH "armhf"
#endif

/* Does the PT_NOTE segment at [off, off+size) hold Go's build-id note? */
static int has_go_note(int fd, uint64_t off, uint64_t size)
{
  unsigned char buf[4096];
  if (size > sizeof buf) size = sizeof buf;
  if (pread(fd, buf, size, (off_t) off) != (ssize_t) size) return 0;
  for (uint64_t p = 0; p + 12 <= size;) {
    uint32_t namesz, descsz;
    memcpy(&namesz, buf + p, 4);
    memcpy(&descsz, buf + p + 4, 4);
    uint64_t name = p + 12;
    if (namesz == 3 && name + 3 <= size && memcmp(buf + name, "Go", 3) == 0) return 1;
    p = name + ((namesz + 3u) & ~3u) + ((descsz + 3u) & ~3u);
  }
  return 0;
}

/* Facts about an ELF executable: whether it asks for a dynamic loader
 * (PT_INTERP: only then is LD_PRELOAD honoured) and whether it is Go. */
struct elf_facts {
  int is_elf, elf_class, machine, has_interp, is_go;
};

static void read_elf_facts(int fd, struct elf_facts *f)
{
  unsigned char ident[EI_NIDENT];
  memset(f, 0, sizeof *f);
  if (pread(fd, ident, sizeof ident, 0) != (ssize_t) sizeof ident || memcmp(ident, ELFMAG, SELFMAG) != 0)
    return;
  f->is_elf = 1;
  f->elf_class = ident[EI_CLASS];
  uint64_t phoff;
  unsigned phnum, phentsize;
  if (f->elf_class == ELFCLASS64) {
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh) return;
    f->machine = eh.e_machine;
    phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
  } else {
    Elf32_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh) return;
    f->machine = eh.e_machine;
    phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
  }
  for (unsigned k = 0; k < phnum && k < 256; ++k) {
    uint64_t type, off, size;
    if (f->elf_class == ELFCLASS64) {
      Elf64_Phdr ph;
      if (phentsize < sizeof ph || pread(fd, &ph, sizeof ph, (off_t) (phoff + (uint64_t) k * phentsize)) != (ssize_t) sizeof ph) return;
      type = ph.p_type, off = ph.p_offset, size = ph.p_filesz;
    } else {
      Elf32_Phdr ph;
      if (phentsize < sizeof ph || pread(fd, &ph, sizeof ph, (off_t) (phoff + (uint64_t) k * phentsize)) != (ssize_t) sizeof ph) return;
      type = ph.p_type, off = ph.p_offset, size = ph.p_filesz;
    }
    if (type == PT_INTERP) f->has_interp = 1;
    if (type == PT_NOTE && has_go_note(fd, off, size)) f->is_go = 1;
  }
}

void launch_check_program(const char *program)
{
  int fd = open(program, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return; /* exec reports it */
  struct elf_facts f;
  read_elf_facts(fd, &f);
  if (!f.is_elf) {
    /* "#!interpreter": the interpreter is what the runtime is loaded into. */
    char line[PATH_MAX + 3];
    ssize_t n = pread(fd, line, sizeof line - 1, 0);
    close(fd);
    if (n > 2 && line[0] == '#' && line[1] == '!') {
      line[n] = 0;
      char *p = line + 2;
      while (*p == ' ' || *p == '\t') ++p;
      size_t len = strcspn(p, " \t\n");
      p[len] = 0;
      if (p[0] == '/' && strcmp(p, program) != 0) launch_check_program(p);
    }
    return;
  }
  close(fd);
#ifdef OWN_MACHINE
  if (f.elf_class != OWN_CLASS || f.machine != OWN_MACHINE) {
    fprintf(stderr, "%s: warning: %s is not an " OWN_ARCH " program: the profiler cannot be loaded "
                    "into it, nothing of it is profiled\n", launch_tool, program);
    return;
  }
#endif
  if (!f.has_interp)
    fprintf(stderr, "%s: warning: %s is statically linked%s: the profiler cannot be loaded into it "
                    "(LD_PRELOAD needs the dynamic loader): nothing of it is profiled, only the "
                    "dynamically linked programs it starts\n", launch_tool, program,
            f.is_go ? " (a Go program built without cgo)" : "");
}

void launch_absolute_paths(int argc, char **argv, const struct launch_option *table, size_t count,
                           const char *token)
{
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-' || strcmp(argv[i], "--") == 0) return;
    const struct launch_option *o = launch_find_option(table, count, argv[i]);
    if (!o || !o->arg_name || i + 1 >= argc) continue;
    ++i;
    if (strcmp(o->token, token) != 0 || !argv[i][0] || argv[i][0] == '/' || argv[i][0] == '|') continue;
    char *cwd = getcwd(NULL, 0), *full;
    if (!cwd || asprintf(&full, "%s/%s", cwd, argv[i]) < 0) launch_die(LAUNCH_EXIT_ERROR, "%s %s: %m", argv[i - 1], argv[i]);
    argv[i] = full;
    free(cwd);
  }
}
