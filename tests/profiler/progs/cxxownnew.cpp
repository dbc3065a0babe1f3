// A library with C++ allocation operators of its own (a bump allocator over
// a static arena, never malloc), linked -Bsymbolic so that its own new and
// delete expressions reach them: loaded with dlopen by cxxalloc after
// start-up, its allocations must still be counted, once each.
#include <cstddef>
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

struct Thing {
  char payload[64];
};

static Thing *volatile sink;
static char *volatile sink_chars;

NOINLINE Thing *own_new_thing() { return new Thing(); }
NOINLINE char *own_new_chars(size_t n) { return new char[n]; }

// 8 Things of 64 bytes, 3 deleted: MEM_TOTAL (8, 512), MEM_LIVE (5, 320);
// 2 arrays of 100 bytes, 1 deleted: MEM_TOTAL (2, 200), MEM_LIVE (1, 100).
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
  return made;
}
