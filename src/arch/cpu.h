/* Small per-architecture instructions the runtime uses inline. */
#ifndef IGPROF_ARCH_CPU_H
#define IGPROF_ARCH_CPU_H

/* The hint for a spin-wait loop: let the other hardware thread run. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

#endif
