// A C++ library that throws and catches; loaded with dlopen by a C program
// (unwindscope.c), so libstdc++ and libgcc_s arrive after libigprof.so.
#include <cstdio>
#include <stdexcept>

extern "C" int cxxplugin_run(int n)
{
  int caught = 0;
  for (int i = 0; i < n; ++i) {
    try {
      throw std::runtime_error("plugin");
    } catch (const std::exception &) {
      ++caught;
    }
  }
  return caught;
}
