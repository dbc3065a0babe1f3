/* Functions compiled several times with different code-generation flags
 * (see CMakeLists.txt: -O2, -fstack-protector-all, -fcf-protection=full,
 * -pg, -pg -mfentry), so that the hook tests meet the prologues compilers
 * really emit: canary loads from fs:0x28, endbr64, call mcount / __fentry__
 * at the entry, early-exit branches. VARIANT suffixes every name. */
#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define NAME(n) CAT(n, VARIANT)

/* a local array: the stack protector guards it */
int NAME(pro_checksum)(const char *s)
{
  char buf[64];
  strncpy(buf, s, sizeof buf - 1);
  buf[sizeof buf - 1] = 0;
  unsigned h = 7;
  for (const char *p = buf; *p; p++)
    h = h * 31 + (unsigned char)*p;
  return (int)(h >> 1);
}

/* recursion: every level enters through the hook */
long NAME(pro_fib_entries);
long NAME(pro_fib)(int n)
{
  NAME(pro_fib_entries)++;
  return n < 2 ? n : NAME(pro_fib)(n - 1) + NAME(pro_fib)(n - 2);
}

/* an early exit right at the entry */
int NAME(pro_clamp_sum)(const int *v, int n)
{
  if (n <= 0)
    return -1;
  int s = 0;
  for (int i = 0; i < n; i++)
    s += v[i] > 100 ? 100 : v[i];
  return s;
}

/* not exported anywhere: only the executable's .symtab knows it */
static __attribute__((noinline, used)) int NAME(pro_hidden_mul)(int a, int b)
{
  __asm__ volatile("" ::: "memory");
  return a * b + 1;
}
int (*NAME(pro_hidden_ptr))(int, int) = NAME(pro_hidden_mul);
