/* The hand-written i386 functions of hook.i386_api (i386_api.c says what
 * each case checks). A file of assembly only: the PC thunks are defined
 * here, as comdat sections like the compiler's, and a file with PIC C code
 * would define its own in the same object. */

#define FN(name, body)                                                                       \
  ".globl " #name "\n.type " #name ",@function\n.balign 16\n" #name ":\n" body ".size " #name \
  ", .-" #name "\n"
/* the address of local label 1 of the function, in .data, as `NAME_expect` */
#define EXPECT_LABEL(name)                                                                   \
  ".pushsection .data\n.globl " #name "_expect\n.balign 4\n" #name "_expect:\n  .long 1b\n"  \
  ".popsection\n"
/* A PC thunk as the compiler emits it: one copy per link (comdat). */
#define THUNK(reg)                                                                           \
  ".section .text.__x86.get_pc_thunk." #reg ",\"axG\",@progbits,__x86.get_pc_thunk." #reg     \
  ",comdat\n.globl __x86.get_pc_thunk." #reg "\n.hidden __x86.get_pc_thunk." #reg "\n"        \
  ".type __x86.get_pc_thunk." #reg ",@function\n__x86.get_pc_thunk." #reg ":\n"              \
  "  movl (%esp), %e" #reg "\n  ret\n.size __x86.get_pc_thunk." #reg ", .-__x86.get_pc_thunk." \
  #reg "\n.text\n"

/* clang-format off */
__asm__(THUNK(ax) THUNK(bx) THUNK(cx)
        ".text\n"
        FN(i386_ret, "  ret\n")
        FN(i386_three, "  xorl %eax, %eax\n  ret\n")
        /* x -> x in exactly 5 bytes: the patch covers the whole function */
        FN(i386_five, "  movl 4(%esp), %eax\n  ret\n")
        /* 10: the jne at +6 goes back to +2 */
        FN(i386_loop, "  xorl %eax, %eax\n1:\n  incl %eax\n  cmpl $10, %eax\n  jne 1b\n  ret\n")
        /* n -> 3n, 0 -> -1: jecxz at +4 (in the window), a loop back to +8 */
        FN(i386_jecxz, "  movl 4(%esp), %ecx\n  jecxz 2f\n  xorl %eax, %eax\n"
                       "1:\n  addl $3, %eax\n  loop 1b\n  ret\n2:\n  movl $-1, %eax\n  ret\n")
        /* n -> n - 1 (n != 1), 1 -> 7: a forward loop at +4 */
        FN(i386_loopfwd, "  movl 4(%esp), %ecx\n  loop 1f\n  movl $7, %eax\n  ret\n"
                         "1:\n  movl %ecx, %eax\n  ret\n")
        /* regparm(1), x in eax: -1, 100 or 1 by the sign; js and jz rel8 at +2, +4 */
        FN(i386_sign, "  testl %eax, %eax\n  js 1f\n  jz 2f\n  movl $1, %eax\n  ret\n"
                      "1:\n  movl $-1, %eax\n  ret\n2:\n  movl $100, %eax\n  ret\n")
        /* regparm(1): 0 -> 6, else 5; jz rel32 at +2 */
        FN(i386_jz32, "  testl %eax, %eax\n  .byte 0x0f, 0x84\n  .long 1f - . - 4\n"
                      "  movl $5, %eax\n  ret\n1:\n  movl $6, %eax\n  ret\n")
        /* endbr32 landing pads: room to keep it (13 bytes: x -> x + 7), and
         * not (8 bytes: 1) */
        FN(i386_cet_long, "  endbr32\n  movl 4(%esp), %eax\n  addl $7, %eax\n  nop\n  ret\n")
        FN(i386_cet_short, "  endbr32\n  xorl %eax, %eax\n  incl %eax\n  ret\n")
        /* The PC thunks: each returns the register the thunk loaded (the
         * address of its label 1, in NAME_expect), .cx plus x */
        FN(i386_pc_bx, "  pushl %ebx\n  call __x86.get_pc_thunk.bx\n1:\n  movl %ebx, %eax\n"
                       "  popl %ebx\n  ret\n" EXPECT_LABEL(i386_pc_bx))
        FN(i386_pc_ax, "  call __x86.get_pc_thunk.ax\n1:\n  ret\n" EXPECT_LABEL(i386_pc_ax))
        FN(i386_pc_cx, "  movl 4(%esp), %edx\n  call __x86.get_pc_thunk.cx\n1:\n"
                       "  leal (%ecx,%edx), %eax\n  ret\n" EXPECT_LABEL(i386_pc_cx))
        /* -fcf-protection code: endbr32 at the entry and in the thunk */
        FN(i386_cet_thunk_dx, "  endbr32\n  movl (%esp), %edx\n  ret\n")
        FN(i386_pc_cet, "  endbr32\n  call i386_cet_thunk_dx\n1:\n  movl %edx, %eax\n  ret\n"
                        EXPECT_LABEL(i386_pc_cet))
        FN(i386_pc_pop, "  call 1f\n1:\n  popl %eax\n  ret\n" EXPECT_LABEL(i386_pc_pop))
        /* x -> x + 4242, the word read through the GOT pointer, as -fPIC
         * code does */
        FN(i386_pc_got, "  pushl %ebx\n  call __x86.get_pc_thunk.bx\n"
                        "  addl $_GLOBAL_OFFSET_TABLE_, %ebx\n  movl i386_word@GOTOFF(%ebx), %eax\n"
                        "  addl 8(%esp), %eax\n  popl %ebx\n  ret\n")
        /* x -> 2x + 1: call rel32 ends the window (+4..+9) */
        FN(i386_call, "  movl 4(%esp), %eax\n  call i386_double\n1:\n  addl $1, %eax\n  ret\n"
                      EXPECT_LABEL(i386_call))
        /* eax -> 2 eax, recording its return address in i386_seen_ret */
        FN(i386_double, "  movl (%esp), %edx\n  call __x86.get_pc_thunk.cx\n"
                        "  addl $_GLOBAL_OFFSET_TABLE_, %ecx\n"
                        "  movl %edx, i386_seen_ret@GOTOFF(%ecx)\n  addl %eax, %eax\n  ret\n")
        /* x -> 3x + 2 in 10 bytes: hooked with near memory refused */
        FN(i386_far, "  movl 4(%esp), %eax\n  leal 2(%eax,%eax,2), %eax\n  nop\n  nop\n  ret\n")
        ".pushsection .data\n.balign 4\ni386_word:\n  .long 4242\n"
        ".globl i386_seen_ret\ni386_seen_ret:\n  .long 0\n.popsection\n");
/* clang-format on */
