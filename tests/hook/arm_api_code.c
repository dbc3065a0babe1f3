/* The hand-written A32 and Thumb-2 functions of hook.arm_api (arm_api.c),
 * each twice: NAME_n for the near patch, NAME_f for the far one. Every one
 * puts a PC-relative form in the first 8 bytes (the far window). */
#define FN_AT(name, set, align, body)                                                        \
  ".globl " #name "\n.type " #name ",%function\n.balign 16\n" align set #name ":\n" body     \
  ".size " #name ", .-" #name "\n"
#define THUMB ".thumb\n.thumb_func\n"
#define ARM ".arm\n"
#define T(name, body) FN_AT(name##_n, THUMB, "", body) FN_AT(name##_f, THUMB, "", body)
#define A(name, body) FN_AT(name##_n, ARM, "", body) FN_AT(name##_f, ARM, "", body)

/* clang-format off */
__asm__(".syntax unified\n.text\n"
  /* x -> x + 21000: T16 ldr and T32 ldr.w literals */
  T(t_lit, "  ldr.n r1, 1f\n  ldr.w r2, 2f\n  adds r0, r0, r1\n  adds r0, r0, r2\n  bx lr\n"
           ".balign 4\n1: .word 1000\n2: .word 20000\n")
  /* x -> x + 4300: ldrd literal */
  T(t_ldrd, "  ldrd r2, r3, 1f\n  adds r0, r0, r2\n  adds r0, r0, r3\n  bx lr\n"
            ".balign 4\n1: .word 300\n  .word 4000\n")
  /* x -> x + 1.5: vldr literal */
  T(t_vldr, "  vldr d1, 1f\n  vadd.f64 d0, d0, d1\n  bx lr\n.balign 8\n1: .double 1.5\n")
  /* x -> x + 777 (adr) and x + 888 (adr.w) */
  T(t_adr, "  adr r1, 1f\n  ldr r1, [r1]\n  adds r0, r0, r1\n  bx lr\n.balign 4\n1: .word 777\n")
  T(t_adrw, "  adr.w r1, 1f\n  ldr r1, [r1]\n  adds r0, r0, r1\n  nop\n  bx lr\n"
            ".balign 4\n1: .word 888\n")
  /* x -> x + 4242: the PIC idiom, ldr of an offset then add rX, pc */
  T(t_pic, "  ldr.n r1, 1f\n2:\n  add r1, pc\n  ldr r1, [r1]\n  adds r0, r0, r1\n  bx lr\n"
           ".balign 4\n1: .word arm_data - (2b + 4)\n")
  /* -> the function's address + 4 (mov r1, pc) */
  T(t_movpc, "  mov r1, pc\n  mov r0, r1\n  nop\n  nop\n  bx lr\n")
  /* 0 -> 200, 7 -> 44, else 100 (cbz, b<cond> T16) */
  T(t_cbz, "  cbz r0, 1f\n  cmp r0, #7\n  beq 2f\n  movs r0, #100\n  bx lr\n"
           "1:\n  movs r0, #200\n  bx lr\n2:\n  movs r0, #44\n  bx lr\n")
  /* 0 -> 50, else 60 (cbnz) */
  T(t_cbnz, "  cbnz r0, 1f\n  movs r0, #50\n  nop\n  nop\n  bx lr\n1:\n  movs r0, #60\n  bx lr\n")
  /* x > 3 -> 20, else 10 (b<cond>.w) */
  T(t_bcondw, "  cmp r0, #3\n  bgt.w 1f\n  nop\n  nop\n  movs r0, #10\n  bx lr\n"
              "1:\n  movs r0, #20\n  bx lr\n")
  /* x < 10 -> x + 1, else x - 1 (an IT block inside the window) */
  T(t_it, "  cmp r0, #10\n  ite lt\n  addlt r0, r0, #1\n  subge r0, r0, #1\n  bx lr\n")
  /* x < 10 -> x + 10, else x (an IT block the window ends in) */
  T(t_itlong, "  cmp r0, #10\n  itttt lt\n  addlt r0, #1\n  addlt r0, #2\n  addlt r0, #3\n"
              "  addlt r0, #4\n  bx lr\n")
  /* 0 -> 555, else x (a literal load under IT) */
  T(t_itlit, "  cmp r0, #0\n  it eq\n  ldreq.n r0, 1f\n  bx lr\n  nop\n.balign 4\n1: .word 555\n")
  /* 5 -> 99, else x + 1 (a branch under IT) */
  T(t_itb, "  cmp r0, #5\n  it eq\n  beq 1f\n  adds r0, #1\n  bx lr\n1:\n  movs r0, #99\n  bx lr\n")
  /* x -> 2x + 1: bl inside the far window, and as its last instruction */
  T(t_bl, "  push {r4, lr}\n  bl arm_callee\n  adds r0, #1\n  pop {r4, pc}\n")
  T(t_bllast, "  push {r4, lr}\n  nop\n  bl arm_callee\n  adds r0, #1\n  pop {r4, pc}\n")
  /* x -> 2x + 1: blx to an A32 callee */
  T(t_blx, "  push {r4, lr}\n  blx arm_acallee\n  adds r0, #1\n  pop {r4, pc}\n")
  /* x -> x + 3, 4 bytes */
  T(t_tiny, "  adds r0, #3\n  bx lr\n")
  /* -> 31337: the literal inside the far window */
  T(t_litin, "  ldr.n r0, 1f\n  bx lr\n1: .word 31337\n")
  /* n -> n; the bne at +6 goes back to +2 */
  T(t_loop, "  movs r1, #0\n1:\n  adds r1, #1\n  cmp r1, r0\n  bne 1b\n  mov r0, r1\n  bx lr\n")
  /* x -> x + 5 through bx pc into A32 */
  T(t_bxpc, "  bx pc\n  nop\n.arm\n  add r0, r0, #5\n  bx lr\n.thumb\n")
  /* 0 -> 10, 1 -> 20: tbb [pc, r0] */
  T(t_tbb, "  tbb [pc, r0]\n1:\n  .byte (2f - 1b) / 2, (3f - 1b) / 2\n2:\n  movs r0, #10\n"
           "  bx lr\n3:\n  movs r0, #20\n  bx lr\n")
  /* x -> x + 21, entered at 2 mod 4: the far patch has 10 bytes */
  FN_AT(t_unal_n, THUMB, "  nop\n", "  adds r0, #1\n  adds r0, #2\n  adds r0, #3\n  adds r0, #4\n"
        "  adds r0, #5\n  adds r0, #6\n  bx lr\n")
  FN_AT(t_unal_f, THUMB, "  nop\n", "  adds r0, #1\n  adds r0, #2\n  adds r0, #3\n  adds r0, #4\n"
        "  adds r0, #5\n  adds r0, #6\n  bx lr\n")

  /* A32: x -> x + 3000 (ldr literal) */
  A(a_lit, "  ldr r1, 1f\n  add r0, r0, r1\n  bx lr\n1: .word 3000\n")
  /* x -> x + 4242: ldr of an offset, add r1, pc, r1 */
  A(a_pic, "  ldr r1, 1f\n2:\n  add r1, pc, r1\n  ldr r1, [r1]\n  add r0, r0, r1\n  bx lr\n"
           "1: .word arm_data - (2b + 8)\n")
  /* 0 -> 200, else 100 (b<cond>) */
  A(a_bcond, "  cmp r0, #0\n  beq 1f\n  mov r0, #100\n  bx lr\n1:\n  mov r0, #200\n  bx lr\n")
  /* x -> 2x + 1: bl ending the far window; blx to a Thumb callee */
  A(a_bl, "  push {r4, lr}\n  bl arm_acallee\n  add r0, r0, #1\n  pop {r4, pc}\n")
  A(a_blx, "  push {r4, lr}\n  blx arm_callee\n  add r0, r0, #1\n  pop {r4, pc}\n")
  /* x -> x + 55 (adr) */
  A(a_adr, "  adr r1, 1f\n  ldr r1, [r1]\n  add r0, r0, r1\n  bx lr\n1: .word 55\n")
  /* x -> x + 2.25 (vldr) */
  A(a_vldr, "  vldr d1, 1f\n  vadd.f64 d0, d0, d1\n  bx lr\n.balign 8\n1: .double 2.25\n")
  /* -> the function's address + 8 (mov r1, pc) */
  A(a_movpc, "  mov r1, pc\n  mov r0, r1\n  bx lr\n")
  /* 0 -> 606, else x (a conditional literal load) */
  A(a_condlit, "  cmp r0, #0\n  ldreq r0, 1f\n  bx lr\n1: .word 606\n")

  /* the callees: x -> 2x */
  FN_AT(arm_callee, THUMB, "", "  adds r0, r0, r0\n  bx lr\n")
  FN_AT(arm_acallee, ARM, "", "  add r0, r0, r0\n  bx lr\n")
  ".thumb\n.pushsection .data\n.balign 4\n.globl arm_data\narm_data:\n  .word 4242\n.popsection\n");
/* clang-format on */
