/* x86_64 machine code of the Go module (go.h). */
#define _GNU_SOURCE
#include "go.h"

#include <sys/syscall.h>

/* runtime.exit on linux/amd64 (Go 1.x): MOVL code+0(FP), DI; MOVL
 * $SYS_exit_group, AX; SYSCALL; RET. */
static const unsigned char go_exit_code[] = {0x8b, 0x7c, 0x24, 0x08, 0xb8, 0xe7, 0x00,
                                             0x00, 0x00, 0x0f, 0x05, 0xc3};

#define GO_STR_(x) #x
#define GO_STR(x) GO_STR_(x)

/* The replacement of runtime.exit (go.h says what it does). */
void igprof_go_exit_abi0(void);
__asm__(".pushsection .text\n"
        ".globl igprof_go_exit_abi0\n"
        ".hidden igprof_go_exit_abi0\n"
        ".type igprof_go_exit_abi0, @function\n"
        "igprof_go_exit_abi0:\n"
        "  movl 8(%rsp), %r12d\n" /* the exit code: ABI0 passes it on the stack */
        "  movl $" GO_STR(SYS_rt_sigprocmask) ", %eax\n"
        "  xorl %edi, %edi\n" /* SIG_BLOCK */
        "  leaq igprof_go_all_signals(%rip), %rsi\n"
        "  xorl %edx, %edx\n"
        "  movl $8, %r10d\n"
        "  syscall\n"
        "1:\n"
        "  movl $1, %eax\n"
        "  xchgl %eax, igprof_go_stack_busy(%rip)\n"
        "  testl %eax, %eax\n"
        "  jz 2f\n"
        "  movl $" GO_STR(SYS_sched_yield) ", %eax\n"
        "  syscall\n"
        "  jmp 1b\n"
        "2:\n"
        "  movq igprof_go_stack_top(%rip), %rsp\n"
        "  xorl %ebp, %ebp\n" /* the outermost frame of that stack */
        "  movl %r12d, %edi\n"
        "  call igprof_go_exit\n"
        "  ud2\n"
        ".size igprof_go_exit_abi0, .-igprof_go_exit_abi0\n"
        ".popsection\n");

const struct go_arch go_arch = {
    .exit_code = go_exit_code,
    .exit_code_size = sizeof go_exit_code,
    .exit_stub = igprof_go_exit_abi0,
};
