/* igprof's application API: ask the profiler for a dump, switch sampling on
 * and off.
 *
 * Header only. Each call looks the function up in the running process
 * (dlsym on the default scope) the first time, so a program built with this
 * header needs no link-time dependency on igprof and runs the same without
 * it: then igprof_active() is 0, igprof_dump_now() returns -1,
 * igprof_disable() returns 0 and igprof_enable() does nothing. Under
 * `igprof` the calls reach libigprof.so (see igprof(1) and running.md,
 * cpu-profiling.md in igprof's documentation).
 *
 * Build: `pkg-config --cflags --libs igprof`, or in CMake
 * `find_package(igprof)` and link `igprof::api`. */
#ifndef IGPROF_IGPROF_H
#define IGPROF_IGPROF_H

#include <dlfcn.h>

#ifdef __cplusplus
extern "C" {
#endif

/* glibc declares RTLD_DEFAULT only with _GNU_SOURCE; it is the null handle. */
#ifdef RTLD_DEFAULT
#define IGPROF_API_SCOPE_ RTLD_DEFAULT
#else
#define IGPROF_API_SCOPE_ ((void *) 0)
#endif

/* The runtime's function `name`, looked up once per call site's cache. The
 * cache holds the address, or (void *) 1 once a lookup found nothing (the
 * runtime is loaded before main and never later). */
static inline void *igprof_api_lookup_(void **cache, const char *name)
{
  void *fn = __atomic_load_n(cache, __ATOMIC_RELAXED);
  if (!fn) {
    fn = dlsym(IGPROF_API_SCOPE_, name);
    if (!fn) fn = (void *) 1;
    __atomic_store_n(cache, fn, __ATOMIC_RELAXED);
  }
  return fn == (void *) 1 ? (void *) 0 : fn;
}

/* 1 when the program runs under igprof (libigprof.so is loaded), else 0. */
static inline int igprof_active(void)
{
  static void *cache;
  return igprof_api_lookup_(&cache, "igprof_dump_now") != (void *) 0;
}

/* Write a checkpoint dump now: to `file` (%p is the pid), or with NULL to
 * the next checkpoint name (<dump name>.<n>). 0 on success, -1 when not
 * profiling or when the dump failed. */
static inline int igprof_dump_now(const char *file)
{
  static void *cache;
  int (*fn)(const char *) = (int (*)(const char *)) igprof_api_lookup_(&cache, "igprof_dump_now");
  return fn ? fn(file) : -1;
}

/* Sampling (-pp, -pr, -pu) on for the whole process. */
static inline void igprof_enable(void)
{
  static void *cache;
  void (*fn)(void) = (void (*)(void)) igprof_api_lookup_(&cache, "igprof_enable");
  if (fn) fn();
}

/* Sampling off for the whole process; 1 if it was on, else 0. */
static inline int igprof_disable(void)
{
  static void *cache;
  int (*fn)(void) = (int (*)(void)) igprof_api_lookup_(&cache, "igprof_disable");
  return fn ? fn() : 0;
}

#ifdef __cplusplus
}
#endif

#endif
