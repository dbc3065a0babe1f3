#include "symbols.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* From the C++ runtime (libstdc++); the one reason the analyser links it. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

const char *demangle_name(const char *name)
{
  if (strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  char *out = __cxa_demangle(name, NULL, NULL, &status);
  return status == 0 && out ? out : name;
}

struct module {
  char *path;
  Dwfl *dwfl;
  Dwfl_Module *mod;
  GElf_Addr bias;          /* module address = ELF vaddr + bias */
  GElf_Addr load_base;     /* ELF vaddr the dump's offsets are relative to */
};

struct resolver {
  int with_lines, demangle;
  struct strpool paths;    /* path -> index into modules */
  struct module *modules;
  size_t cap;
  char *names[RESOLVE_MAX_FRAMES], *functions[RESOLVE_MAX_FRAMES];
  size_t name_cap[RESOLVE_MAX_FRAMES], function_cap[RESOLVE_MAX_FRAMES];
  char *versionless; size_t versionless_cap;
  char *sysroot; /* or NULL */
};

static char *debuginfo_path = NULL;   /* libdwfl default: ":.debug:/usr/lib/debug" */
static const Dwfl_Callbacks offline_callbacks = {
  .find_elf = dwfl_build_id_find_elf,
  .find_debuginfo = dwfl_standard_find_debuginfo,
  .section_address = dwfl_offline_section_address,
  .debuginfo_path = &debuginfo_path,
};

struct resolver *resolver_new(int with_lines, int demangle, const char *sysroot)
{
  struct resolver *r = xcalloc(1, sizeof(*r));
  r->with_lines = with_lines;
  r->demangle = demangle;
  if (sysroot && *sysroot) {
    r->sysroot = xstrdup(sysroot);
    /* separate debug files: beside the file, then the sysroot's, then ours */
    size_t n = strlen(sysroot) + 64;
    debuginfo_path = xcalloc(1, n);
    snprintf(debuginfo_path, n, ":.debug:%s/usr/lib/debug:/usr/lib/debug", sysroot);
  }
  strpool_init(&r->paths);
  return r;
}

void resolver_free(struct resolver *r)
{
  if (!r) return;
  for (size_t i = 0; i < r->paths.count; ++i)
    if (r->modules[i].dwfl) dwfl_end(r->modules[i].dwfl);
  for (size_t i = 0; i < RESOLVE_MAX_FRAMES; ++i) {
    free(r->names[i]);
    free(r->functions[i]);
  }
  for (size_t i = 0; i < r->paths.count; ++i) free(r->modules[i].path);
  free(r->versionless);
  free(r->sysroot);
  free(r->modules);
  strpool_free(&r->paths);
  free(r);
}

/* The dump's offsets are relative to where the loader mapped the first
 * PT_LOAD segment (dladdr's dli_fbase), i.e. its page-aligned vaddr. */
static GElf_Addr first_load_vaddr(Elf *elf)
{
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return 0;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int) i, &ph) && ph.p_type == PT_LOAD) return ph.p_vaddr & ~(GElf_Addr) 0xfff;
  }
  return 0;
}

static void module_open(struct module *m, const char *path, const char *sysroot)
{
  m->path = xstrdup(path);
  char *under = NULL;
  if (sysroot && path[0] == '/') {
    size_t n = strlen(sysroot) + strlen(path) + 1;
    under = xcalloc(1, n);
    snprintf(under, n, "%s%s", sysroot, path);
    if (access(under, R_OK) == 0) path = under;
  }
  if (access(path, R_OK) != 0) {
    free(under);
    return;
  }
  m->dwfl = dwfl_begin(&offline_callbacks);
  if (!m->dwfl) {
    free(under);
    return;
  }
  m->mod = dwfl_report_offline(m->dwfl, path, path, -1);
  dwfl_report_end(m->dwfl, NULL, NULL);
  Elf *elf = m->mod ? dwfl_module_getelf(m->mod, &m->bias) : NULL;
  if (!elf) {
    dwfl_end(m->dwfl);
    m->dwfl = NULL;
    m->mod = NULL;
    free(under);
    return;
  }
  m->load_base = first_load_vaddr(elf);
  free(under);
}

static struct module *resolver_module(struct resolver *r, const char *path)
{
  size_t before = r->paths.count;
  uint32_t id = strpool_intern(&r->paths, path, strlen(path));
  if (r->paths.count != before) {
    GROW(r->modules, r->cap, (size_t) id + 1);
    module_open(&r->modules[id], path, r->sysroot);
  }
  return &r->modules[id];
}

static char *copy_into(char **buf, size_t *cap, const char *s)
{
  size_t need = strlen(s) + 1;
  if (*cap < need) {
    *buf = xrealloc(*buf, need);
    *cap = need;
  }
  return memcpy(*buf, s, need);
}

/* Frame i: the function `name` at `file`:`line` (no file: no line). */
static void set_frame(struct resolver *r, size_t i, struct resolved_frame *f, const char *name, const char *file, int line)
{
  const char *shown = r->demangle ? demangle_name(name) : name;
  const char *base = file ? strrchr(file, '/') : NULL;
  base = base ? base + 1 : file;
  size_t need = strlen(shown) + (base ? strlen(base) + 32 : 0) + 1;
  if (r->name_cap[i] < need) {
    r->names[i] = xrealloc(r->names[i], need);
    r->name_cap[i] = need;
  }
  if (base && line > 0) snprintf(r->names[i], need, "%s at %s:%d", shown, base, line);
  else snprintf(r->names[i], need, "%s", shown);
  f->name = r->names[i];
  f->function = copy_into(&r->functions[i], &r->function_cap[i], shown);
  f->source = file;
  f->line = file ? line : 0;
  if (shown != name) free((char *) shown);
}

static const char *die_function_name(Dwarf_Die *die)
{
  Dwarf_Attribute attr;
  const char *name = NULL;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr)
      || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
    name = dwarf_formstring(&attr);
  if (!name && dwarf_attr_integrate(die, DW_AT_name, &attr)) name = dwarf_formstring(&attr);
  return name ? name : "<inlined>";
}

static const char *die_call_file(Dwarf_Die *cudie, Dwarf_Die *die, int *line)
{
  Dwarf_Attribute attr;
  Dwarf_Word file = 0, lineno = 0;
  Dwarf_Files *files;
  size_t nfiles;
  *line = 0;
  if (!dwarf_attr(die, DW_AT_call_file, &attr) || dwarf_formudata(&attr, &file) != 0) return NULL;
  if (dwarf_attr(die, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &lineno) == 0) *line = (int) lineno;
  if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0 || file >= nfiles) return NULL;
  return dwarf_filesrc(files, file, NULL, NULL);
}

/* Fill frames for an address inside function `symname`, outermost first:
 * the function itself, then each inlined call, innermost last. */
static size_t resolve_inlines(struct resolver *r, struct module *m, Dwarf_Addr addr,
                              const char *symname, struct resolved_frame *frames)
{
  Dwarf_Die *scopes = NULL, *inl[RESOLVE_MAX_FRAMES];
  Dwarf_Addr dbias = 0;
  Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, addr, &dbias);
  int ninl = 0, nscopes = cudie ? dwarf_getscopes(cudie, addr - dbias, &scopes) : 0;
  for (int i = 0; i < nscopes && ninl < RESOLVE_MAX_FRAMES - 1; ++i) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_inlined_subroutine) inl[ninl++] = &scopes[i];
    else if (tag == DW_TAG_subprogram) break;
  }
  /* inl[0] is the innermost inlined call. Its code line is the address's
   * line; each outer frame's line is the call site of the frame inside it. */
  const char *file = NULL;
  int line = 0;
  Dwfl_Line *src = dwfl_module_getsrc(m->mod, addr);
  if (src) file = dwfl_lineinfo(src, NULL, &line, NULL, NULL, NULL);
  size_t n = (size_t) ninl + 1;
  for (int k = 0; k < ninl; ++k) {
    size_t slot = n - 1 - (size_t) k;   /* innermost goes last */
    set_frame(r, slot, &frames[slot], die_function_name(inl[k]), file, line);
    file = die_call_file(cudie, inl[k], &line);
  }
  set_frame(r, 0, &frames[0], symname, file, line);
  free(scopes);
  return n;
}

size_t resolver_lookup(struct resolver *r, const char *path, uint64_t offset, struct resolved_frame *frames)
{
  struct module *m = resolver_module(r, path);
  if (!m->mod) return 0;
  Dwarf_Addr addr = offset + m->load_base + m->bias;
  GElf_Off symoff = 0;
  GElf_Sym sym;
  const char *name = dwfl_module_addrinfo(m->mod, addr, &symoff, &sym, NULL, NULL, NULL);
  if (!name || !*name) return 0;
  /* Honour symbol sizes: an address past the end of the nearest symbol
   * belongs to no symbol (IgProf's nearest-preceding lookup got this wrong). */
  if (sym.st_size ? symoff >= sym.st_size : symoff != 0) return 0;
  /* .dynsym names carry their symbol version ("memcpy@@GLIBC_2.14"); the
   * runtime's names do not, and one function must have one name. */
  const char *at = strchr(name, '@');
  if (at && at != name) {
    size_t n = (size_t) (at - name);
    GROW(r->versionless, r->versionless_cap, n + 1);
    memcpy(r->versionless, name, n);
    r->versionless[n] = 0;
    name = r->versionless;
  }
  if (r->with_lines) return resolve_inlines(r, m, addr, name, frames);
  set_frame(r, 0, &frames[0], name, NULL, 0);
  return 1;
}

int resolver_build_id(struct resolver *r, const char *path, char *buf, size_t cap)
{
  struct module *m = resolver_module(r, path);
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = m->mod ? dwfl_module_build_id(m->mod, &bits, &vaddr) : 0;
  if (n <= 0 || cap < (size_t) n * 2 + 1) return 0;
  for (int i = 0; i < n; ++i) snprintf(buf + 2 * i, 3, "%02x", bits[i]);
  return 1;
}
