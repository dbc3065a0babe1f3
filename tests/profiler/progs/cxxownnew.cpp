// A library with C++ allocation operators of its own (a bump allocator over
// a static arena, never malloc; its aligned ones over aligned_alloc and
// free), linked -Bsymbolic so that its own new and delete expressions reach
// them: loaded with dlopen by cxxalloc after start-up, its allocations must
// still be counted, once each (the aligned ones not again in aligned_alloc).
#include <cstddef>
#include <cstdlib>
#include <new>

#define NOINLINE __attribute__((noinline))

alignas(64) static char arena[1 << 20];
static size_t used;

void *operator new(size_t n)
{
  n = (n + 15) & ~static_cast<size_t>(15);
  if (used + n > sizeof arena) throw std::bad_alloc();
  void *p = arena + used;
  used += n;
  return p;
}

void *operator new[](size_t n) { return ::operator new(n); }
void operator delete(void *) noexcept {}
void operator delete(void *, size_t) noexcept {}
void operator delete[](void *) noexcept {}
void operator delete[](void *, size_t) noexcept {}

void *operator new(size_t n, std::align_val_t a)
{
  void *p = aligned_alloc(static_cast<size_t>(a), n);
  if (!p) throw std::bad_alloc();
  return p;
}

void operator delete(void *p, std::align_val_t) noexcept { free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { free(p); }

struct Thing {
  char payload[64];
};

struct alignas(64) Wide {
  char payload[128];
};

static Thing *volatile sink;
static Wide *volatile sink_wide;
static char *volatile sink_chars;

NOINLINE Thing *own_new_thing() { return new Thing(); }
NOINLINE char *own_new_chars(size_t n) { return new char[n]; }
NOINLINE Wide *own_new_wide() { return new Wide(); }

// 8 Things of 64 bytes, 3 deleted: MEM_TOTAL (8, 512), MEM_LIVE (5, 320);
// 2 arrays of 100 bytes, 1 deleted: MEM_TOTAL (2, 200), MEM_LIVE (1, 100);
// 3 Wides of 128 bytes (aligned new), 1 deleted: MEM_TOTAL (3, 384), MEM_LIVE (2, 256).
extern "C" int own_new_test()
{
  int made = 0;
  for (int i = 0; i < 8; ++i, ++made) {
    Thing *t = own_new_thing();
    if (i < 3) delete t;
    else sink = t;
  }
  for (int i = 0; i < 2; ++i, ++made) {
    char *c = own_new_chars(100);
    if (i == 0) delete[] c;
    else sink_chars = c;
  }
  for (int i = 0; i < 3; ++i, ++made) {
    Wide *w = own_new_wide();
    if (i == 0) delete w;
    else sink_wide = w;
  }
  return made;
}
