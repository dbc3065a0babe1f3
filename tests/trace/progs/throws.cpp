// C++ throws for trace.throw: four throws and a rethrow from known functions, all caught.
#include <cstdio>
#include <stdexcept>

namespace demo {
struct my_error {
  int code;
  ~my_error() { std::fputs("", stdout); }
};
}

__attribute__((noinline)) void thrower_function(int x)
{
  if (x > 0) throw std::runtime_error("boom");
}

namespace demo {
__attribute__((noinline)) void other_thrower(int x)
{
  if (x > 0) throw my_error{x};
}
}

__attribute__((noinline)) void middle(int x) { thrower_function(x); }

__attribute__((noinline)) void rethrower()
{
  try {
    thrower_function(1);
  } catch (const std::runtime_error &) {
    throw;
  }
}

int main()
{
  int caught = 0;
  for (int i = 0; i < 2; ++i) {
    try { middle(1); } catch (const std::exception &e) { ++caught; }
  }
  try { rethrower(); } catch (const std::exception &e) { ++caught; }
  try { demo::other_thrower(5); } catch (const demo::my_error &e) { caught += e.code; }
  std::printf("caught %d\n", caught);
  return 0;
}
