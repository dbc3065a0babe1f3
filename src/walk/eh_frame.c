/* .eh_frame → frame recipes (see eh_frame.h for the contract).
 *
 * The call-frame program of each FDE is interpreted with only the state the
 * recipe language can hold: the CFA rule and the rules of the frame pointer
 * and the return-address column. Rules of other registers are parsed and
 * dropped; a CFA defined by an expression, or FP/RA rules other than "saved
 * at CFA+n" (and, where the return-address column is the link register,
 * "still in it"), make the row FRAME_COMPLEX so the walker asks libunwind.
 *
 * On AArch64, 0x2d is DW_CFA_AARCH64_negate_ra_state: the return address is
 * signed (paciasp) from there on, or no longer (autiasp). Where it is saved
 * or kept stays as the other rules say, and the walker strips the signature
 * of every return address it reads (frame_code_address), so the state
 * changes no recipe. Elsewhere 0x2d is SPARC's DW_CFA_GNU_window_save,
 * which no recipe can describe.
 */
#define _GNU_SOURCE
#include "eh_frame.h"

#include "../common/page_alloc.h"
#include "../hook/eh_frame_hdr.h"

#include <sys/mman.h>

/* DWARF call-frame instructions (DWARF 4 §6.4.2, plus GNU extensions). */
enum {
  CFA_advance_loc = 0x40, CFA_offset = 0x80, CFA_restore = 0xc0,
  CFA_nop = 0x00, CFA_set_loc = 0x01, CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03,
  CFA_advance_loc4 = 0x04, CFA_offset_extended = 0x05, CFA_restore_extended = 0x06,
  CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09,
  CFA_remember_state = 0x0a, CFA_restore_state = 0x0b, CFA_def_cfa = 0x0c,
  CFA_def_cfa_register = 0x0d, CFA_def_cfa_offset = 0x0e, CFA_def_cfa_expression = 0x0f,
  CFA_expression = 0x10, CFA_offset_extended_sf = 0x11, CFA_def_cfa_sf = 0x12,
  CFA_def_cfa_offset_sf = 0x13, CFA_val_offset = 0x14, CFA_val_offset_sf = 0x15,
  CFA_val_expression = 0x16, CFA_GNU_window_save = 0x2d, /* = AArch64 negate_ra_state */
  CFA_GNU_args_size = 0x2e,
  CFA_GNU_negative_offset_extended = 0x2f,
};

const char *eh_frame_status_str(enum eh_frame_status status)
{
  switch (status) {
  case EH_FRAME_OK: return "ok";
  case EH_FRAME_NO_TABLE: return ".eh_frame_hdr has no search table";
  case EH_FRAME_BAD_HEADER: return "unsupported .eh_frame_hdr version or encoding";
  case EH_FRAME_OUT_OF_BOUNDS: return "unwind data points outside the module's segments";
  case EH_FRAME_BAD_CIE: return "malformed CIE";
  case EH_FRAME_BAD_FDE: return "malformed FDE or call-frame instruction";
  case EH_FRAME_NO_MEMORY: return "out of memory (mmap failed)";
  }
  return "unknown status";
}

/* ---- bounded reader ------------------------------------------------------ */

/* The cursor and pointer encodings are the shared .eh_frame_hdr reader's
 * (src/hook/eh_frame_hdr.h); here, typed fixed reads on it. */
#define READ_FIXED(name, type)                                                                 \
  static type name(struct ehdr_reader *r) {                                                    \
    type v = 0;                                                                                \
    if (ehdr_has(r, sizeof v)) {                                                               \
      memcpy(&v, r->p, sizeof v);                                                              \
      r->p += sizeof v;                                                                        \
    }                                                                                          \
    return v;                                                                                  \
  }
READ_FIXED(read_u8, uint8_t)
READ_FIXED(read_u16, uint16_t)
READ_FIXED(read_u32, uint32_t)
READ_FIXED(read_u64, uint64_t)

/* ---- segment bounds ------------------------------------------------------ */

struct module_view {
  const struct eh_frame_segment *segs;
  int nsegs;
};

/* A reader over [p, segment end) if p lies in a readable segment. */
static struct ehdr_reader reader_at(const struct module_view *m, uintptr_t p)
{
  for (int i = 0; i < m->nsegs; i++)
    if (p >= m->segs[i].start && p < m->segs[i].end)
      return (struct ehdr_reader){(const uint8_t *)p, (const uint8_t *)m->segs[i].end, 0};
  return (struct ehdr_reader){NULL, NULL, 1};
}

/* ---- row builder ---------------------------------------------------------- */

struct row {
  uint32_t start;
  struct frame_recipe recipe;
};

struct row_builder {
  struct row *rows;
  size_t count, capacity; /* capacity in rows; the buffer is mmap'd */
  int failed;
};

static int builder_grow(struct row_builder *b)
{
  size_t cap = b->capacity ? b->capacity * 2 : 4096;
  struct row *rows = igprof_pages_alloc(cap * sizeof *rows);
  if (!rows) {
    b->failed = 1;
    return 0;
  }
  if (b->rows) {
    memcpy(rows, b->rows, b->count * sizeof *rows);
    igprof_pages_free(b->rows, b->capacity * sizeof *rows);
  }
  b->rows = rows;
  b->capacity = cap;
  return 1;
}

/* Append (start, recipe). A row at the same start replaces the previous one
 * (a zero-length range); a row equal to its predecessor is redundant; an FDE
 * overlapping the previous one wins from its start. */
static void builder_add(struct row_builder *b, uint32_t start, struct frame_recipe rc)
{
  while (b->count && b->rows[b->count - 1].start >= start)
    b->count--;
  if (b->count && frame_recipe_same(b->rows[b->count - 1].recipe, rc))
    return;
  if (b->count == b->capacity && !builder_grow(b))
    return;
  b->rows[b->count++] = (struct row){start, rc};
}

/* ---- CFI interpreter ------------------------------------------------------ */

/* RULE_AT_FP: saved at FP + offset, the one DWARF expression a rule may
 * have here (DW_OP_breg<fp> offset: a realigned frame's FP, frame.h's
 * FRAME_CFA_DEREF). */
enum rule_kind { RULE_SAME = 0, RULE_UNDEFINED, RULE_OFFSET, RULE_OTHER, RULE_AT_FP };

struct rule {
  uint8_t kind;
  int64_t offset; /* RULE_OFFSET: saved at CFA + offset; RULE_AT_FP: at FP + offset */
};

/* cfa_is_expression: CFA_OTHER_EXPRESSION (not for recipes), or
 * CFA_AT_FP_DEREF: the CFA is the word at FP + cfa_deref_offset
 * (DW_OP_breg<fp> offset; DW_OP_deref). */
enum { CFA_RULE = 0, CFA_OTHER_EXPRESSION = 1, CFA_AT_FP_DEREF = 2 };

struct cfi_state {
  int cfa_is_expression;
  uint64_t cfa_reg;
  int64_t cfa_offset;
  int64_t cfa_deref_offset;
  struct rule fp, ra;
};

#define CFI_STACK_DEPTH 8

struct cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  uint8_t fde_enc;
  int has_z, signal_frame;
  const uint8_t *insns, *insns_end;
};

struct cfi_run {
  const struct cie *cie;
  struct cfi_state state, initial;
  struct cfi_state stack[CFI_STACK_DEPTH];
  int depth, overflow;
  uintptr_t loc;
  /* eh_frame_find: the state is wanted at this address; the run stops at
   * the first advance past it (compiling runs to the end: UINTPTR_MAX). */
  uintptr_t stop_after;
  int stopped;
};

static struct frame_recipe recipe_of(const struct cfi_run *run)
{
  const struct cfi_state *s = &run->state;
  struct frame_recipe rc = {0, 0, 0, FRAME_COMPLEX, 0};
  if (run->cie->signal_frame)
    rc.flags = FRAME_SIGNAL;
  if (run->overflow || run->cie->signal_frame)
    return rc;
  if (s->ra.kind == RULE_UNDEFINED) {
    rc.kind = FRAME_OUTERMOST;
    return rc;
  }
  if (s->cfa_is_expression == CFA_AT_FP_DEREF) {
    /* A realigned frame: the return address saved relative to the CFA,
     * the FP at FP + offset or unchanged. */
    if (s->ra.kind != RULE_OFFSET || s->ra.offset < INT32_MIN || s->ra.offset > INT32_MAX ||
        s->cfa_deref_offset < INT32_MIN || s->cfa_deref_offset > INT32_MAX ||
        (s->fp.kind != RULE_SAME &&
         (s->fp.kind != RULE_AT_FP || s->fp.offset < INT32_MIN || s->fp.offset > INT32_MAX)))
      return rc;
    if (s->fp.kind == RULE_AT_FP) {
      rc.flags = FRAME_FP_SAVED;
      rc.fp_offset = (int32_t)s->fp.offset;
    }
    rc.kind = FRAME_CFA_DEREF;
    rc.cfa_offset = (int32_t)s->cfa_deref_offset;
    rc.ra_offset = (int32_t)s->ra.offset;
    return rc;
  }
  if (s->cfa_is_expression || s->cfa_offset < INT32_MIN || s->cfa_offset > INT32_MAX)
    return rc;
  int ra_in_lr = FRAME_LINK_REGISTER && s->ra.kind == RULE_SAME;
  if (!ra_in_lr &&
      (s->ra.kind != RULE_OFFSET || s->ra.offset < INT32_MIN || s->ra.offset > INT32_MAX))
    return rc;
  if (s->fp.kind == RULE_OFFSET) {
    if (s->fp.offset < INT32_MIN || s->fp.offset > INT32_MAX)
      return rc;
    rc.flags = FRAME_FP_SAVED;
    rc.fp_offset = (int32_t)s->fp.offset;
  } else if (s->fp.kind != RULE_SAME) {
    return rc;
  }
  if (s->cfa_reg == frame_arch.dwarf_sp)
    rc.kind = FRAME_CFA_SP;
  else if (s->cfa_reg == frame_arch.dwarf_fp)
    rc.kind = FRAME_CFA_FP;
  else
    return rc;
  rc.cfa_offset = (int32_t)s->cfa_offset;
  if (ra_in_lr)
    rc.flags |= FRAME_RA_IN_LR;
  else
    rc.ra_offset = (int32_t)s->ra.offset;
  return rc;
}

static struct rule *rule_for(struct cfi_state *s, const struct cie *cie, uint64_t reg)
{
  if (reg == frame_arch.dwarf_fp)
    return &s->fp;
  if (reg == cie->ra_reg)
    return &s->ra;
  return NULL; /* a register the walker does not track */
}

static void set_rule(struct cfi_run *run, uint64_t reg, uint8_t kind, int64_t offset)
{
  struct rule *r = rule_for(&run->state, run->cie, reg);
  if (r)
    *r = (struct rule){kind, offset};
}

static void restore_rule(struct cfi_run *run, uint64_t reg)
{
  struct rule *r = rule_for(&run->state, run->cie, reg);
  if (r)
    *r = *rule_for(&run->initial, run->cie, reg);
}

/* Move to a new location: the row for the old state starts at run->loc.
 * A move past stop_after leaves the state as it is at stop_after. */
static void advance(struct cfi_run *run, struct row_builder *b, uintptr_t bias, uintptr_t to,
                    int emit)
{
  if (to > run->stop_after) {
    run->stopped = 1;
    return;
  }
  if (emit && to > run->loc)
    builder_add(b, (uint32_t)(run->loc - bias), recipe_of(run));
  run->loc = to;
}

/* Whether the DWARF expression of `len` bytes at r->p (not consumed) is
 * exactly DW_OP_breg<fp> offset, followed by DW_OP_deref when `deref`:
 * then *offset is the offset. */
static int fp_relative(const struct ehdr_reader *r, uint64_t len, int deref, int64_t *offset)
{
  enum { OP_deref = 0x06, OP_breg0 = 0x70 };
  if (len < 2 || frame_arch.dwarf_fp > 31 || r->p[0] != OP_breg0 + frame_arch.dwarf_fp)
    return 0;
  struct ehdr_reader e = *r;
  e.end = r->p + len;
  e.p++;
  *offset = ehdr_read_sleb(&e);
  if (deref && !e.bad && e.p < e.end && *e.p == OP_deref)
    e.p++;
  else if (deref)
    return 0;
  return !e.bad && e.p == e.end;
}

/* Run one instruction stream. With emit == 0 (the CIE's initial
 * instructions, or eh_frame_find) no rows are produced. Stops early once
 * the location passes run->stop_after. Returns 0 on a malformed stream. */
static int run_insns(struct cfi_run *run, struct ehdr_reader *r, struct row_builder *b,
                     uintptr_t bias, int emit)
{
  const struct cie *cie = run->cie;
  struct cfi_state *s = &run->state;
  while (!r->bad && !run->stopped && r->p < r->end) {
    uint8_t op = read_u8(r), low = op & 0x3f;
    uint64_t reg, delta;
    int64_t off;
    switch (op & 0xc0) {
    case CFA_advance_loc:
      advance(run, b, bias, run->loc + low * cie->code_align, emit);
      continue;
    case CFA_offset:
      off = (int64_t)ehdr_read_uleb(r) * cie->data_align;
      set_rule(run, low, RULE_OFFSET, off);
      continue;
    case CFA_restore:
      restore_rule(run, low);
      continue;
    }
    switch (op) {
    case CFA_nop: break;
    case CFA_set_loc: {
      uintptr_t to = ehdr_read_encoded(r, cie->fde_enc, 0);
      if (to < run->loc)
        return 0;
      advance(run, b, bias, to, emit);
      break;
    }
    case CFA_advance_loc1: delta = read_u8(r); goto adv;
    case CFA_advance_loc2: delta = read_u16(r); goto adv;
    case CFA_advance_loc4: delta = read_u32(r);
    adv:
      advance(run, b, bias, run->loc + delta * cie->code_align, emit);
      break;
    case CFA_offset_extended:
      reg = ehdr_read_uleb(r);
      set_rule(run, reg, RULE_OFFSET, (int64_t)ehdr_read_uleb(r) * cie->data_align);
      break;
    case CFA_offset_extended_sf:
      reg = ehdr_read_uleb(r);
      set_rule(run, reg, RULE_OFFSET, ehdr_read_sleb(r) * cie->data_align);
      break;
    case CFA_GNU_negative_offset_extended:
      reg = ehdr_read_uleb(r);
      set_rule(run, reg, RULE_OFFSET, -(int64_t)ehdr_read_uleb(r) * cie->data_align);
      break;
    case CFA_restore_extended: restore_rule(run, ehdr_read_uleb(r)); break;
    case CFA_undefined: set_rule(run, ehdr_read_uleb(r), RULE_UNDEFINED, 0); break;
    case CFA_same_value: set_rule(run, ehdr_read_uleb(r), RULE_SAME, 0); break;
    case CFA_register:
      reg = ehdr_read_uleb(r);
      (void)ehdr_read_uleb(r);
      set_rule(run, reg, RULE_OTHER, 0);
      break;
    case CFA_val_offset:
      reg = ehdr_read_uleb(r);
      (void)ehdr_read_uleb(r);
      set_rule(run, reg, RULE_OTHER, 0);
      break;
    case CFA_val_offset_sf:
      reg = ehdr_read_uleb(r);
      (void)ehdr_read_sleb(r);
      set_rule(run, reg, RULE_OTHER, 0);
      break;
    case CFA_expression:
    case CFA_val_expression: {
      reg = ehdr_read_uleb(r);
      uint64_t len = ehdr_read_uleb(r);
      if (!ehdr_has(r, len))
        return 0;
      int64_t at;
      if (op == CFA_expression && fp_relative(r, len, 0, &at))
        set_rule(run, reg, RULE_AT_FP, at);
      else
        set_rule(run, reg, RULE_OTHER, 0);
      r->p += len;
      break;
    }
    case CFA_remember_state:
      if (run->depth < CFI_STACK_DEPTH)
        run->stack[run->depth] = *s;
      else
        run->overflow = 1;
      run->depth++;
      break;
    case CFA_restore_state:
      if (run->depth == 0)
        return 0;
      run->depth--;
      if (run->depth < CFI_STACK_DEPTH)
        *s = run->stack[run->depth];
      break;
    case CFA_def_cfa:
      s->cfa_reg = ehdr_read_uleb(r);
      s->cfa_offset = (int64_t)ehdr_read_uleb(r);
      s->cfa_is_expression = 0;
      break;
    case CFA_def_cfa_sf:
      s->cfa_reg = ehdr_read_uleb(r);
      s->cfa_offset = ehdr_read_sleb(r) * cie->data_align;
      s->cfa_is_expression = 0;
      break;
    case CFA_def_cfa_register:
      s->cfa_reg = ehdr_read_uleb(r);
      s->cfa_is_expression = 0;
      break;
    case CFA_def_cfa_offset: s->cfa_offset = (int64_t)ehdr_read_uleb(r); break;
    case CFA_def_cfa_offset_sf: s->cfa_offset = ehdr_read_sleb(r) * cie->data_align; break;
    case CFA_def_cfa_expression: {
      uint64_t len = ehdr_read_uleb(r);
      if (!ehdr_has(r, len))
        return 0;
      s->cfa_is_expression =
          fp_relative(r, len, 1, &s->cfa_deref_offset) ? CFA_AT_FP_DEREF : CFA_OTHER_EXPRESSION;
      r->p += len;
      break;
    }
    case CFA_GNU_args_size: (void)ehdr_read_uleb(r); break;
    case CFA_GNU_window_save:
      if (!FRAME_NEGATE_RA_STATE)
        s->ra.kind = RULE_OTHER; /* SPARC's register windows */
      break;
    default: return 0;
    }
  }
  return !r->bad;
}

/* ---- CIE / FDE ------------------------------------------------------------ */

/* Parse the CIE at `p` (its length field). */
static enum eh_frame_status parse_cie(const struct module_view *m, uintptr_t p, struct cie *cie)
{
  struct ehdr_reader r = reader_at(m, p);
  uint64_t len = read_u32(&r);
  if (len == 0xffffffffu)
    len = read_u64(&r);
  if (r.bad || !ehdr_has(&r, len))
    return EH_FRAME_BAD_CIE;
  const uint8_t *end = r.p + len;
  r.end = end;
  if (read_u32(&r) != 0)
    return EH_FRAME_BAD_CIE; /* CIE id is 0 in .eh_frame */
  uint8_t version = read_u8(&r);
  if (version != 1 && version != 3 && version != 4)
    return EH_FRAME_BAD_CIE;
  char aug[16];
  size_t n = 0;
  for (;;) {
    uint8_t c = read_u8(&r);
    if (r.bad || n == sizeof aug)
      return EH_FRAME_BAD_CIE;
    aug[n++] = (char)c;
    if (!c)
      break;
  }
  if (version == 4) {
    (void)read_u8(&r); /* address size */
    (void)read_u8(&r); /* segment selector size */
  }
  *cie = (struct cie){0};
  cie->code_align = ehdr_read_uleb(&r);
  cie->data_align = ehdr_read_sleb(&r);
  cie->ra_reg = version == 1 ? read_u8(&r) : ehdr_read_uleb(&r);
  cie->fde_enc = PE_absptr;
  if (aug[0] == 'z') {
    cie->has_z = 1;
    uint64_t aug_len = ehdr_read_uleb(&r);
    if (!ehdr_has(&r, aug_len))
      return EH_FRAME_BAD_CIE;
    const uint8_t *aug_end = r.p + aug_len;
    int known = 1;
    for (size_t i = 1; aug[i] && known; i++) {
      switch (aug[i]) {
      case 'L': (void)read_u8(&r); break;
      case 'R': cie->fde_enc = read_u8(&r); break;
      case 'P': {
        uint8_t enc = read_u8(&r);
        (void)ehdr_read_encoded(&r, enc & 0x7f, 0);
        break;
      }
      case 'S': cie->signal_frame = 1; break;
      case 'B': case 'G': break; /* AArch64 BTI / MTE markers carry no data */
      default: known = 0; break; /* the length lets us skip what we cannot read */
      }
    }
    r.p = aug_end;
  } else if (aug[0] != 0) {
    return EH_FRAME_BAD_CIE; /* pre-'z' augmentations ("eh") are not produced any more */
  }
  if (r.bad || cie->code_align == 0)
    return EH_FRAME_BAD_CIE;
  cie->insns = r.p;
  cie->insns_end = end;
  return EH_FRAME_OK;
}

/* An FDE, parsed up to its instructions. */
struct fde {
  struct cie cie;
  uintptr_t pc_begin, pc_end;
  struct ehdr_reader insns; /* the FDE's call-frame instructions */
};

/* Parse the FDE at `at` (its length field) and its CIE. */
static enum eh_frame_status parse_fde(const struct module_view *m, uintptr_t at, struct fde *f)
{
  struct ehdr_reader r = reader_at(m, at);
  uint64_t len = read_u32(&r);
  if (len == 0xffffffffu)
    len = read_u64(&r);
  if (r.bad || len < 4 || !ehdr_has(&r, len))
    return EH_FRAME_BAD_FDE;
  r.end = r.p + len;
  uintptr_t id_at = (uintptr_t)r.p;
  uint32_t cie_off = read_u32(&r);
  if (cie_off == 0 || cie_off > id_at)
    return EH_FRAME_BAD_FDE; /* 0 would make this a CIE */
  enum eh_frame_status st = parse_cie(m, id_at - cie_off, &f->cie);
  if (st != EH_FRAME_OK)
    return st;
  f->pc_begin = ehdr_read_encoded(&r, f->cie.fde_enc, 0);
  uintptr_t pc_range = ehdr_read_encoded(&r, f->cie.fde_enc & 0x0f, 0);
  if (f->cie.has_z) {
    uint64_t aug_len = ehdr_read_uleb(&r);
    if (!ehdr_has(&r, aug_len))
      return EH_FRAME_BAD_FDE;
    r.p += aug_len;
  }
  if (r.bad)
    return EH_FRAME_BAD_FDE;
  f->pc_end = f->pc_begin + pc_range;
  f->insns = r;
  return EH_FRAME_OK;
}

/* Whether rows can describe the FDE's range: not empty, and addressable
 * by 32-bit offsets from the bias (else its code is left to libunwind). */
static int fde_usable(const struct fde *f, uintptr_t bias)
{
  return f->pc_end > f->pc_begin && f->pc_begin >= bias && f->pc_end - bias <= UINT32_MAX;
}

/* Start a run of the FDE's program: the CIE's initial instructions. */
static enum eh_frame_status cfi_start(struct cfi_run *run, const struct fde *f, uintptr_t bias)
{
  *run = (struct cfi_run){.cie = &f->cie, .loc = f->pc_begin, .stop_after = UINTPTR_MAX};
  run->state.cfa_reg = frame_arch.dwarf_sp;
  struct ehdr_reader ir = {f->cie.insns, f->cie.insns_end, 0};
  if (!run_insns(run, &ir, NULL, bias, 0) || run->loc != f->pc_begin)
    return EH_FRAME_BAD_CIE;
  run->initial = run->state;
  run->depth = 0;
  return EH_FRAME_OK;
}

/* Compile the FDE at `fde` into rows. */
static enum eh_frame_status compile_fde(const struct module_view *m, uintptr_t fde,
                                        uintptr_t bias, struct row_builder *b)
{
  struct fde f;
  struct cfi_run run;
  enum eh_frame_status st = parse_fde(m, fde, &f);
  if (st != EH_FRAME_OK || !fde_usable(&f, bias))
    return st;
  if ((st = cfi_start(&run, &f, bias)) != EH_FRAME_OK)
    return st;
  /* A dry run first: a malformed program must leave no rows behind, and
   * the rows of an earlier FDE that this one overlaps, which the builder
   * drops as rows are added, could not be put back. */
  struct cfi_run dry = run;
  struct ehdr_reader insns = f.insns;
  if (!run_insns(&dry, &insns, NULL, bias, 0))
    return EH_FRAME_BAD_FDE;
  if (!run_insns(&run, &f.insns, b, bias, 1))
    return EH_FRAME_BAD_FDE;
  if (run.loc < f.pc_end)
    advance(&run, b, bias, f.pc_end, 1);
  struct frame_recipe none = {0, 0, 0, FRAME_NO_INFO, 0};
  builder_add(b, (uint32_t)(f.pc_end - bias), none);
  return EH_FRAME_OK;
}

/* ---- .eh_frame_hdr -------------------------------------------------------- */

static enum eh_frame_status parse_hdr(const struct module_view *m, const void *hdr,
                                      struct ehdr_table *t)
{
  struct ehdr_reader r = reader_at(m, (uintptr_t)hdr);
  if (r.bad)
    return EH_FRAME_OUT_OF_BOUNDS;
  switch (ehdr_open(hdr, r.end, t)) {
  case EHDR_OK: return EH_FRAME_OK;
  case EHDR_TRUNCATED: return EH_FRAME_OUT_OF_BOUNDS;
  case EHDR_NO_TABLE: return EH_FRAME_NO_TABLE;
  case EHDR_BAD_VERSION:
  case EHDR_BAD_COUNT: break;
  }
  return EH_FRAME_BAD_HEADER;
}

/* ---- module -------------------------------------------------------------- */

static enum eh_frame_status finish_table(struct row_builder *b, struct eh_frame_table *out)
{
  size_t n = b->count;
  size_t starts_bytes = (n * sizeof(uint32_t) + 7) & ~(size_t)7;
  size_t bytes = starts_bytes + n * sizeof(struct frame_recipe);
  if (n == 0)
    return EH_FRAME_OK;
  uint8_t *map = igprof_pages_alloc(bytes);
  if (!map)
    return EH_FRAME_NO_MEMORY;
  uint32_t *starts = (uint32_t *)map;
  struct frame_recipe *recipes = (struct frame_recipe *)(map + starts_bytes);
  for (size_t i = 0; i < n; i++) {
    starts[i] = b->rows[i].start;
    recipes[i] = b->rows[i].recipe;
    if (recipes[i].kind == FRAME_COMPLEX)
      out->complex_rows++;
  }
  mprotect(map, bytes, PROT_READ); /* immutable from here on */
  out->count = (uint32_t)n;
  out->starts = starts;
  out->recipes = recipes;
  out->map = map;
  out->map_size = bytes;
  return EH_FRAME_OK;
}

enum eh_frame_status eh_frame_compile(const void *hdr, uintptr_t bias,
                                      const struct eh_frame_segment *segs, int nsegs,
                                      struct eh_frame_table *out)
{
  struct module_view m = {segs, nsegs};
  *out = (struct eh_frame_table){0};
  struct ehdr_table t;
  enum eh_frame_status st = parse_hdr(&m, hdr, &t);
  if (st != EH_FRAME_OK)
    return st;
  struct ehdr_reader r = t.entries;
  uintptr_t datarel = (uintptr_t)hdr;
  uint8_t table_enc = t.enc;
  uint64_t count = t.count;
  struct row_builder b = {0};
  uint64_t done = 0;
  for (uint64_t i = 0; i < count && st == EH_FRAME_OK && !b.failed; i++) {
    (void)ehdr_read_encoded(&r, table_enc, datarel); /* initial location */
    uintptr_t fde = ehdr_read_encoded(&r, table_enc, datarel);
    if (r.bad) {
      st = EH_FRAME_OUT_OF_BOUNDS;
      break;
    }
    /* One unreadable FDE leaves its range to libunwind; the rest still count. */
    size_t rows_before = b.count;
    if (compile_fde(&m, fde, bias, &b) == EH_FRAME_OK)
      done++;
    else if (++out->bad_fdes, b.count > rows_before)
      b.count = rows_before;
  }
  if (b.failed)
    st = EH_FRAME_NO_MEMORY;
  if (st == EH_FRAME_OK)
    st = finish_table(&b, out);
  out->fde_count = st == EH_FRAME_OK ? (uint32_t)done : 0;
  if (b.rows)
    igprof_pages_free(b.rows, b.capacity * sizeof *b.rows);
  if (st != EH_FRAME_OK)
    eh_frame_table_release(out);
  return st;
}

void eh_frame_table_release(struct eh_frame_table *table)
{
  if (table->map)
    igprof_pages_free(table->map, table->map_size);
  *table = (struct eh_frame_table){0};
}

/* ---- one address ------------------------------------------------------------ */

/* The recipe compilation would give `pc`, by the same rules: the FDE is the
 * last one of the search table whose initial location is <= pc (a later
 * FDE wins where FDEs overlap), and pc must lie in its range. Reads only
 * what that lookup needs: O(log FDEs) table entries, one FDE, its CIE. */
enum eh_frame_status eh_frame_find(const void *hdr, uintptr_t bias,
                                   const struct eh_frame_segment *segs, int nsegs, uintptr_t pc,
                                   struct frame_recipe *out)
{
  struct module_view m = {segs, nsegs};
  *out = (struct frame_recipe){0, 0, 0, FRAME_NO_INFO, 0};
  struct ehdr_table t;
  enum eh_frame_status st = parse_hdr(&m, hdr, &t);
  if (st != EH_FRAME_OK)
    return st;
  if (ehdr_field_size(t.enc) == 0)
    return EH_FRAME_BAD_HEADER;
  if (!ehdr_searchable(&t))
    return EH_FRAME_OUT_OF_BOUNDS; /* the whole table must lie in its segment */
  if (t.count == 0)
    return EH_FRAME_OK;
  /* The last entry with location <= pc. */
  uint64_t lo = ehdr_below(&t, pc);
  /* An FDE that gives no rows (an empty range, one that rows cannot
   * address, a malformed one) does not end the one before it in a
   * compiled table either: then the entries before it decide, a few at
   * most. */
  struct fde f;
  struct cfi_run run;
  for (int back = 0;; back++, lo--) {
    uintptr_t first, fde_at;
    if (ehdr_entry(&t, lo, &first, &fde_at) != 0)
      return EH_FRAME_BAD_HEADER;
    if (first > pc)
      return st; /* before the first FDE */
    st = parse_fde(&m, fde_at, &f);
    if (st == EH_FRAME_OK && fde_usable(&f, bias) &&
        (st = cfi_start(&run, &f, bias)) == EH_FRAME_OK) {
      /* Past its range, its end row decides, if it has rows at all: its
       * whole program must be well formed (rare: code between FDEs). */
      int inside = pc >= f.pc_begin && pc < f.pc_end;
      if (inside)
        run.stop_after = pc;
      if (run_insns(&run, &f.insns, NULL, bias, 0)) {
        if (inside)
          *out = recipe_of(&run);
        return EH_FRAME_OK;
      }
      st = EH_FRAME_BAD_FDE;
    }
    if (lo == 0 || back == 8)
      return st;
  }
}
