// Walk corpus, C++ part (-O2, inlining on): capture points inside
// destructors that run while an exception unwinds the stack (so the stack
// holds libgcc's unwinder and libstdc++'s personality routine), in catch
// blocks, after rethrows, in std::sort comparators and std::function
// targets that the compiler inlines around, and behind virtual calls; two
// threads and the 1 kHz sampler run throughout (samples land inside the
// unwinder, __cxa_throw and the allocator).
//
// usage: walk_corpus_cxx MIN_FRAMES MIN_SIGNAL_WALKS NAME
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "walk_check.h"

namespace {

void (*volatile hook_point)() = check_here;
volatile unsigned sink;

struct Guard {
  int id;
  explicit Guard(int i) : id(i) {}
  ~Guard() {
    if (id % 2 == 0)
      hook_point(); // runs inside _Unwind_RaiseException_Phase2 when unwinding
    sink += static_cast<unsigned>(id);
  }
};

struct corpus_error : std::runtime_error {
  int depth;
  corpus_error(const std::string &what, int d) : std::runtime_error(what), depth(d) {}
};

__attribute__((noinline)) int thrower(int depth) {
  Guard g(depth);
  if (depth == 0)
    throw corpus_error("bottom", depth);
  return thrower(depth - 1) + g.id;
}

__attribute__((noinline)) int rethrower(int depth) {
  try {
    return thrower(depth);
  } catch (const corpus_error &e) {
    hook_point();
    if (e.depth == 0)
      throw; // rethrow the same exception object
    return -1;
  }
}

__attribute__((noinline)) int catcher(int depth) {
  try {
    Guard g(depth + 100);
    return rethrower(depth);
  } catch (const std::exception &e) {
    hook_point();
    sink += static_cast<unsigned>(std::string(e.what()).size());
    return 0;
  }
}

struct Shape {
  virtual ~Shape() = default;
  virtual double area(int n) const = 0;
};
struct Square : Shape {
  double side;
  explicit Square(double s) : side(s) {}
  double area(int n) const override {
    if (n % 5 == 0)
      hook_point();
    return side * side;
  }
};
struct Circle : Shape {
  double r;
  explicit Circle(double x) : r(x) {}
  double area(int n) const override {
    if (n % 7 == 0)
      hook_point();
    return 3.14159 * r * r;
  }
};

template <typename F> __attribute__((always_inline)) inline double apply_twice(F f, int n) {
  return f(n) + f(n + 1);
}

__attribute__((noinline)) double virtual_and_inline(int rounds) {
  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = 0; i < 16; i++) {
    if (i % 2)
      shapes.push_back(std::make_unique<Square>(i));
    else
      shapes.push_back(std::make_unique<Circle>(i));
  }
  double total = 0;
  for (int r = 0; r < rounds; r++)
    for (auto &s : shapes)
      total += apply_twice([&](int n) { return s->area(n); }, r);
  return total;
}

__attribute__((noinline)) void sort_with_comparator(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; i++)
    v[static_cast<size_t>(i)] = static_cast<int>((static_cast<unsigned>(i) * 7919u) % 10007u);
  int calls = 0;
  std::sort(v.begin(), v.end(), [&calls](int a, int b) {
    if (++calls % 1009 == 0)
      hook_point();
    return a < b;
  });
}

__attribute__((noinline)) void through_function(int depth) {
  std::function<void(int)> f = [&f](int d) {
    if (d == 0) {
      hook_point();
      return;
    }
    f(d - 1);
  };
  f(depth);
}

__attribute__((noinline)) void workload(int round) {
  for (int i = 0; i < 20; i++)
    catcher(i % 9);
  sink += static_cast<unsigned>(virtual_and_inline(20));
  sort_with_comparator(20000);
  through_function(10 + round % 20);
}

volatile int stop_threads;

void *thread_main(void *) {
  check_thread_init();
  for (int round = 0; !stop_threads; round++)
    workload(round);
  return nullptr;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MIN_FRAMES MIN_SIGNAL_WALKS NAME\n", argv[0]);
    return 2;
  }
  long min_frames = std::atol(argv[1]), min_signal = std::atol(argv[2]);
  check_init();
  check_static_modules();
  sampler_start(1000);
  pthread_t thread;
  pthread_create(&thread, nullptr, thread_main, nullptr);
  for (int round = 0; round < 20 || sampler_more_rounds(min_signal, 2 * min_signal); round++)
    workload(round);
  stop_threads = 1;
  pthread_join(thread, nullptr);
  sampler_stop();
  return check_report(argv[3], min_frames, min_signal);
}
