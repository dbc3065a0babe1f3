/* What eh_frame.c (the call-frame interpreter, eh_frame_find) and
 * eh_frame_table.c (eh_frame_compile: a whole module's rows, for statistics
 * and tests) share: the parsed CIE and FDE, the interpreter's state, and
 * the steps both run. Private to src/walk. */
#ifndef IGPROF_EH_FRAME_CFI_H
#define IGPROF_EH_FRAME_CFI_H

#include "eh_frame.h"

#include "../hook/eh_frame_hdr.h"

/* The module's readable segments: every read stays inside them. */
struct module_view {
  const struct eh_frame_segment *segs;
  int nsegs;
};

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
  /* Compiling: each row as the run finds it (eh_frame_table.c); NULL for
   * eh_frame_find and the CIE's initial instructions. */
  void (*row)(void *ctx, uint32_t start, struct frame_recipe recipe);
  void *row_ctx;
};

/* An FDE, parsed up to its instructions. */
struct fde {
  struct cie cie;
  uintptr_t pc_begin, pc_end;
  struct ehdr_reader insns; /* the FDE's call-frame instructions */
};

/* Parse the module's .eh_frame_hdr search table. */
enum eh_frame_status eh_frame_parse_hdr(const struct module_view *m, const void *hdr,
                                       struct ehdr_table *t);

/* Parse the FDE at `at` (its length field) and its CIE. */
enum eh_frame_status eh_frame_parse_fde(const struct module_view *m, uintptr_t at, struct fde *f);

/* Whether rows can describe the FDE's range: not empty, and addressable
 * by 32-bit offsets from the bias (else its code is left to libunwind). */
int eh_frame_fde_usable(const struct fde *f, uintptr_t bias);

/* Start a run of the FDE's program: the CIE's initial instructions. */
enum eh_frame_status eh_frame_cfi_start(struct cfi_run *run, const struct fde *f, uintptr_t bias);

/* Run one instruction stream; each row goes to run->row, if set. Stops
 * early once the location passes run->stop_after. Returns 0 on a malformed
 * stream. */
int eh_frame_run_insns(struct cfi_run *run, struct ehdr_reader *r, uintptr_t bias);

/* Move the run to `to`: the row of the state so far ends there. */
void eh_frame_advance(struct cfi_run *run, uintptr_t bias, uintptr_t to);

#endif
