/* The program's signal mask and the signals the profiler keeps deliverable
 * (signal_mask.c), as seen by signals.c, which owns the signals.
 */
#ifndef IGPROF_SIGNAL_MASK_H
#define IGPROF_SIGNAL_MASK_H

#include <signal.h>

/* Keep `sig` deliverable whatever mask the program sets (igprof_signal_own
 * with unblock), and unblock it in the calling thread now. */
void igprof_signal_mask_keep(int sig);

/* The program is setting the action of owned signal `sig` to `act`
 * (hook_sigaction, before the kernel action changes). */
void igprof_signal_mask_action(int sig, const struct sigaction *act);

/* Install the mask hooks if some signal must stay deliverable; from
 * igprof_signals_start. */
void igprof_signal_mask_start(void);

#endif
