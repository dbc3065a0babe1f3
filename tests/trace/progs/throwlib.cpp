// A C++ library that throws and catches inside itself, for trace.throw-dlopen:
// loaded with dlopen by a C program, so libstdc++ arrives after start-up.
#include <stdexcept>

__attribute__((noinline)) static void lib_thrower(int x)
{
  if (x > 0) throw std::out_of_range("lib");
}

extern "C" int throw_and_catch(int x)
{
  try {
    lib_thrower(x);
  } catch (const std::out_of_range &) {
    return 1;
  }
  return 0;
}
