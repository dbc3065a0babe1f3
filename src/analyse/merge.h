/* Renaming rules applied while the tree is built: -ml (one node per library),
 * -mr (PCRE2 substitutions) and -ma (rename by ancestry). */
#ifndef IGPROF_ANALYSE_MERGE_H
#define IGPROF_ANALYSE_MERGE_H

#include <stdint.h>

#include "profile.h"

struct merge_rules;

/* NULL when no rule is active. Exits with a message on a malformed rule. */
struct merge_rules *merge_rules_new(int merge_libraries, const char *regexp_spec,
                                    const char *ancestors_spec);
void merge_rules_free(struct merge_rules *m);

/* -ml/-mr: the symbol `sym` is reported as. */
uint32_t merge_map_symbol(struct merge_rules *m, struct symtab *st, uint32_t sym);
/* Whether a node whose (renamed) symbol equals its parent's joins the parent. */
int merge_collapses(const struct merge_rules *m);
/* -ma: given how many ancestor patterns the path above has matched
 * (*state), the symbol to use for `sym`; updates *state. */
uint32_t merge_ancestors_apply(struct merge_rules *m, struct symtab *st, uint32_t sym,
                               uint32_t *state);
int merge_has_ancestors(const struct merge_rules *m);

#endif
