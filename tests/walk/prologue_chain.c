/* A call chain compiled without unwind tables (-fno-unwind-tables
 * -fno-asynchronous-unwind-tables, as Debian builds most of its armhf
 * code): the linker gives every function here an EXIDX_CANTUNWIND index
 * entry, so only a reading of their prologues steps them
 * (src/arch/arm_prologue.c). One function for each prologue shape; each
 * uses its callee's result after the call, so no call is a tail call.
 * From the outside in:
 *   prologue_chain -> pc_varargs (spills r1-r3 before its push)
 *   -> pc_push (push only) -> pc_sub (push + sub sp) -> pc_big (a frame of
 *   6000 bytes: sub.w/subw sp) -> pc_plt (calls qsort through the PLT;
 *   libc calls back) -> pc_cmp -> pc_vpush (saves d8: vpush) -> pc_fp (r7
 *   frame pointer) -> pc_inner -> chain_leaf (through a register: blx),
 *   the harness's capture or pc_spin, a leaf spinning until told to stop.
 * prologue_test.c checks the walks against this list. */
#include <stdarg.h>
#include <stdlib.h>

#define KEEP __attribute__((noinline, noclone, used))

void (*volatile chain_leaf)(void);
volatile int chain_sink, chain_stop, chain_descend;
volatile unsigned long chain_spins;
/* Iterations of busy work each function does before its call (signal
 * walks then find every function of the chain interrupted in its body). */
volatile unsigned long chain_work;
static volatile unsigned long worked;

#define WORK()                                                                                   \
  do {                                                                                           \
    for (unsigned long w_ = 0; w_ < chain_work; w_++)                                            \
      worked++;                                                                                  \
  } while (0)

KEEP void pc_spin(void)
{
  while (!chain_stop)
    chain_spins++;
}

KEEP int pc_inner(int x)
{
  WORK();
  chain_leaf();
  return x + chain_sink;
}

KEEP __attribute__((optimize("no-omit-frame-pointer"))) int pc_fp(int x)
{
  volatile int a[4];
  a[x & 3] = x;
  WORK();
  int r = pc_inner(a[(x + 1) & 3]);
  return r + a[x & 3];
}

KEEP double pc_vpush(double d, int x)
{
  double k = d * 3.5 + chain_sink;
  WORK();
  int r = pc_fp(x);
  return k * r + d;
}

KEEP int pc_cmp(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  if (chain_descend) {
    chain_descend = 0;
    WORK();
    chain_sink += (int)pc_vpush(1.5, x);
  }
  return (x > y) - (x < y);
}

KEEP int pc_plt(int x)
{
  int v[2] = {x + 1, x};
  WORK();
  qsort(v, 2, sizeof v[0], pc_cmp);
  return v[0] + chain_sink;
}

KEEP int pc_big(int x)
{
  volatile char buf[6000];
  buf[x % 6000] = (char)x;
  WORK();
  int r = pc_plt(x);
  return r + buf[(x + 1) % 6000];
}

KEEP int pc_sub(int x)
{
  volatile int buf[10];
  buf[x % 10] = x;
  WORK();
  int r = pc_big(x);
  return r + buf[(x + 3) % 10];
}

KEEP int pc_push(int x)
{
  WORK();
  int r = pc_sub(x + 1);
  return r * 3 + chain_sink;
}

KEEP int pc_varargs(int n, ...)
{
  va_list ap;
  va_start(ap, n);
  int x = 0;
  for (int i = 0; i < n; i++)
    x += va_arg(ap, int);
  va_end(ap);
  WORK();
  int r = pc_push(x);
  return r + n;
}

KEEP int prologue_chain(int x)
{
  chain_descend = 1;
  return pc_varargs(3, x, x + 1, x + 2) + 1;
}
