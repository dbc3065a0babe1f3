/* The Go module's machine code on ARM32 (go.h): not written, so a Go
 * program's runtime.exit is not hooked there and go.c says so in one line
 * (docs/porting.md). */
#include "go.h"

const struct go_arch go_arch = {.exit_code = NULL, .exit_code_size = 0, .exit_stub = NULL};
