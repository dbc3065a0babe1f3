/* AArch64 machine code of the Go module (go.h). */
#define _GNU_SOURCE
#include "go.h"

#include <sys/syscall.h>

/* runtime.exit on linux/arm64 (Go 1.x): MOVW code+0(FP), R0 (ABI0: the
 * argument above the link-register slot at 0(RSP)); MOVD $SYS_exit_group,
 * R8; SVC; RET. Little-endian instruction words, as in the file. */
static const unsigned char go_exit_code[] = {
    0xe0, 0x0b, 0x80, 0xb9, /* ldrsw x0, [sp, #8] */
    0xc8, 0x0b, 0x80, 0xd2, /* mov x8, #94 (exit_group) */
    0x01, 0x00, 0x00, 0xd4, /* svc #0 */
    0xc0, 0x03, 0x5f, 0xd6, /* ret */
};

#define GO_STR_(x) #x
#define GO_STR(x) GO_STR_(x)

/* The replacement of runtime.exit (go.h says what it does). Reached by the
 * hook's patch: a direct b, or br x16 from the far form, hence the bti c
 * landing pad (a hint, a no-op on cores without BTI). Nothing returns, so
 * no register needs saving; the lock is an exclusive-load/store loop, which
 * every ARMv8.0 core has. */
void igprof_go_exit_abi0(void);
__asm__(".pushsection .text\n"
        ".globl igprof_go_exit_abi0\n"
        ".hidden igprof_go_exit_abi0\n"
        ".type igprof_go_exit_abi0, %function\n"
        ".p2align 2\n"
        "igprof_go_exit_abi0:\n"
        "  hint #34\n"              /* bti c */
        "  ldrsw x19, [sp, #8]\n"   /* the exit code, as runtime.exit reads it */
        "  mov x0, #0\n"            /* SIG_BLOCK */
        "  adrp x1, igprof_go_all_signals\n"
        "  add x1, x1, :lo12:igprof_go_all_signals\n"
        "  mov x2, #0\n"
        "  mov x3, #8\n"
        "  mov x8, #" GO_STR(SYS_rt_sigprocmask) "\n"
        "  svc #0\n"
        "  adrp x20, igprof_go_stack_busy\n"
        "  add x20, x20, :lo12:igprof_go_stack_busy\n"
        "  mov w21, #1\n"
        "1:\n"
        "  ldaxr w9, [x20]\n"
        "  cbnz w9, 2f\n"
        "  stxr w10, w21, [x20]\n"
        "  cbnz w10, 1b\n"
        "  b 3f\n"
        "2:\n"
        "  clrex\n"
        "  mov x8, #" GO_STR(SYS_sched_yield) "\n"
        "  svc #0\n"
        "  b 1b\n"
        "3:\n"
        "  adrp x9, igprof_go_stack_top\n"
        "  ldr x9, [x9, :lo12:igprof_go_stack_top]\n"
        "  mov sp, x9\n"
        "  mov x29, #0\n" /* the outermost frame of that stack */
        "  mov x30, #0\n"
        "  mov w0, w19\n"
        "  bl igprof_go_exit\n"
        "  brk #0\n"
        ".size igprof_go_exit_abi0, .-igprof_go_exit_abi0\n"
        ".popsection\n");

const struct go_arch go_arch = {
    .exit_code = go_exit_code,
    .exit_code_size = sizeof go_exit_code,
    .exit_stub = igprof_go_exit_abi0,
};
