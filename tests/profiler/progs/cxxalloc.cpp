// Every C++ allocation operator (plain, array, nothrow, aligned, and every
// delete: sized, aligned, nothrow) with known sizes and counts, run with
// libstdc++'s operators and with those of jemalloc, tcmalloc and mimalloc
// (linked or preloaded). Each allocating function is noinline and calls one
// operator, so the dump's first frame outside the allocator names it; the
// figures are in tests/profiler/e2e.py (scenario cxx-alloc).
// Usage: cxxalloc [dlopen LIBRARY | threads | usable]
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <malloc.h>
#include <new>
#include <thread>
#include <vector>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;
static const std::align_val_t A64 = std::align_val_t(64);

NOINLINE void *alloc_new(size_t n) { return ::operator new(n); }
NOINLINE void *alloc_new_array(size_t n) { return ::operator new[](n); }
NOINLINE void *alloc_new_nothrow(size_t n) { return ::operator new(n, std::nothrow); }
NOINLINE void *alloc_new_array_nothrow(size_t n) { return ::operator new[](n, std::nothrow); }
NOINLINE void *alloc_new_aligned(size_t n) { return ::operator new(n, A64); }
NOINLINE void *alloc_new_array_aligned(size_t n) { return ::operator new[](n, A64); }
NOINLINE void *alloc_new_aligned_nothrow(size_t n) { return ::operator new(n, A64, std::nothrow); }
NOINLINE void *alloc_new_array_aligned_nothrow(size_t n) { return ::operator new[](n, A64, std::nothrow); }
NOINLINE void *alloc_malloc(size_t n) { return malloc(n); }

struct Object {
  char payload[48];
  ~Object() { sink = this; }
};
struct alignas(64) Line {
  char payload[128];
};

NOINLINE Object *make_object() { return new Object(); }
NOINLINE Line *make_line() { return new Line(); }

// Each block is released by one operator; one block per function is kept.
NOINLINE static void operators()
{
  void *p[4];
  for (auto &q : p) q = alloc_new(100);
  ::operator delete(p[0]);
  ::operator delete(p[1], 100);
  ::operator delete(p[2], std::nothrow);
  sink = p[3];

  for (auto &q : p) q = alloc_new_array(200);
  ::operator delete[](p[0]);
  ::operator delete[](p[1], 200);
  ::operator delete[](p[2], std::nothrow);
  sink = p[3];

  for (int i = 0; i < 2; ++i) p[i] = alloc_new_nothrow(300);
  free(p[0]); // a new'd block released with free: MEM_LIVE must follow
  sink = p[1];

  for (int i = 0; i < 2; ++i) p[i] = alloc_new_array_nothrow(400);
  ::operator delete[](p[0]);
  sink = p[1];

  for (auto &q : p) q = alloc_new_aligned(512);
  ::operator delete(p[0], A64);
  ::operator delete(p[1], 512, A64);
  ::operator delete(p[2], A64, std::nothrow);
  sink = p[3];

  for (auto &q : p) q = alloc_new_array_aligned(640);
  ::operator delete[](p[0], A64);
  ::operator delete[](p[1], 640, A64);
  ::operator delete[](p[2], A64, std::nothrow);
  sink = p[3];

  for (int i = 0; i < 2; ++i) p[i] = alloc_new_aligned_nothrow(768);
  ::operator delete(p[0], A64);
  sink = p[1];

  for (int i = 0; i < 2; ++i) p[i] = alloc_new_array_aligned_nothrow(896);
  ::operator delete[](p[0], A64);
  sink = p[1];

  for (int i = 0; i < 2; ++i) p[i] = alloc_malloc(1000);
  ::operator delete(p[0]); // a malloc'd block released with delete
  sink = p[1];
}

// new and delete expressions: sized delete for a complete type, aligned
// new and sized aligned delete for an over-aligned one.
NOINLINE static void expressions()
{
  Object *o[3];
  for (auto &x : o) x = make_object();
  delete o[0];
  delete o[1];
  sink = o[2];
  Line *l[2];
  for (auto &x : l) x = make_line();
  delete l[0];
  sink = l[1];
}

// Failures: nothing is counted, the exception reaches the program, errno
// is what the allocator left, and the allocations after them are counted.
NOINLINE static void failures()
{
  // more than any allocator gives: half the address space, or on 32-bit
  // targets (where a 2 GiB block can be had: qemu-user gives a 32-bit guest
  // all 4 GiB) all of it but one page
  volatile size_t huge = sizeof(size_t) == 8 ? static_cast<size_t>(-1) / 2 : static_cast<size_t>(-1) - 4095;
  int caught = 0;
  // mimalloc's operator new aborts where it should throw (it is built as C):
  // its throwing failure is not tried.
  bool throws = !dlsym(RTLD_DEFAULT, "mi_version");
  for (int i = 0; throws && i < 3; ++i) {
    try {
      sink = alloc_new(huge);
    } catch (const std::bad_alloc &) {
      ++caught;
    }
    try {
      sink = alloc_new_array_aligned(huge);
    } catch (const std::bad_alloc &) {
      ++caught;
    }
  }
  errno = 0;
  void *n = alloc_new_nothrow(huge);
  int e = errno;
  std::printf("bad_alloc caught %d times; nothrow new: %s errno=%d\n", caught, n ? "ptr" : "NULL", e);
}

NOINLINE void *after_failures(size_t n) { return ::operator new(n); }

// Four threads at once, each 2000 blocks of 64 + t bytes: every tenth
// kept, the others released by delete and free in turn; a failing new
// (and its exception through the replacement) every 250.
NOINLINE void *thread_new(size_t n) { return ::operator new(n); }

static void thread_main(int t, bool throws)
{
  std::vector<void *> kept;
  for (int i = 0; i < 2000; ++i) {
    void *p = thread_new(64 + t);
    if (i % 10 == 0) kept.push_back(p);
    else if (i % 2) ::operator delete(p);
    else free(p);
    if (throws && i % 250 == 0) {
      try {
        sink = thread_new(sizeof(size_t) == 8 ? static_cast<size_t>(-1) / 2 : static_cast<size_t>(-1) - 4095);
      } catch (const std::bad_alloc &) {
      }
    }
  }
  sink = kept.data();
  kept.clear();
  kept.shrink_to_fit();
}

static int threads()
{
  bool throws = !dlsym(RTLD_DEFAULT, "mi_version");
  std::vector<std::thread> all;
  for (int t = 0; t < 4; ++t) all.emplace_back(thread_main, t, throws);
  for (auto &t : all) t.join();
  std::printf("threads done\n");
  return 0;
}

// The allocator's usable size of a block from alloc_new(100), which -mo
// include counts; that block is released.
static int usable()
{
  void *p = alloc_new(100);
  std::printf("usable %zu\n", malloc_usable_size(p));
  ::operator delete(p);
  return 0;
}

static int plugin(const char *path)
{
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int (*test)() = h ? reinterpret_cast<int (*)()>(dlsym(h, "own_new_test")) : nullptr;
  if (!test) {
    std::printf("cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  std::printf("own_new_test %d\n", test());
  return 0;
}

int main(int argc, char **argv)
{
  if (argc > 1 && std::strcmp(argv[1], "threads") == 0) return threads();
  if (argc > 1 && std::strcmp(argv[1], "usable") == 0) return usable();
  operators();
  expressions();
  failures();
  for (int i = 0; i < 5; ++i) {
    void *p = after_failures(60);
    if (i % 2) ::operator delete(p);
    else sink = p;
  }
  if (argc > 2 && std::strcmp(argv[1], "dlopen") == 0) return plugin(argv[2]);
  std::printf("done\n");
  return 0;
}
