// C++ allocations through operator new/delete, containers and exceptions,
// with known sizes (x86_64 libstdc++); expectations in tests/profiler/e2e.py.
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline))

struct Widget {
  char payload[48];
};

static std::vector<Widget *> kept;

NOINLINE void make_widgets()
{
  for (int i = 0; i < 10; ++i) {
    Widget *w = new Widget();
    if (i < 4) kept.push_back(w);  // leaked: 4 x 48
    else delete w;
  }
}

NOINLINE void make_array()
{
  int *a = new int[250];  // 1000 bytes, freed
  a[0] = 1;
  delete[] a;
}

NOINLINE void fill_vector()
{
  std::vector<int> v;
  v.reserve(1000);  // one allocation of 4000 bytes
  for (int i = 0; i < 1000; ++i) v.push_back(i);
}

NOINLINE void fill_map()
{
  std::map<int, int> m;
  for (int i = 0; i < 10; ++i) m[i] = i;  // 10 nodes of 40 bytes
}

NOINLINE void thrower(int i)
{
  throw std::runtime_error(std::string(100 + i, 'x'));
}

NOINLINE void catch_exceptions()
{
  for (int i = 0; i < 5; ++i) {
    try {
      thrower(i);
    } catch (const std::exception &e) {
      if (e.what()[0] != 'x') std::puts("bad");
    }
  }
}

int main()
{
  make_widgets();
  make_array();
  fill_vector();
  fill_map();
  catch_exceptions();
  std::printf("kept %zu widgets\n", kept.size());
  return 0;
}
