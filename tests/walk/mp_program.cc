// A deterministic allocation workload for methods_agree.py: the same
// allocations from many distinct stacks — deep recursion, std::map and
// std::string growth, C++ exceptions (the exception object is malloc'ed while
// the stack holds __cxa_throw), qsort calling back into code that allocates,
// std::function and virtual calls. Built -O2 without frame pointers.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

volatile unsigned sink;

__attribute__((noinline)) void *leaf_alloc(int n) {
  void *p = std::malloc(static_cast<size_t>(16 + n % 64));
  sink += static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) & 1);
  return p;
}

__attribute__((noinline)) int recurse(int depth, std::vector<void *> &keep) {
  if (depth == 0) {
    keep.push_back(leaf_alloc(static_cast<int>(keep.size())));
    return 1;
  }
  volatile char pad[32];
  pad[depth % 32] = static_cast<char>(depth);
  return recurse(depth - 1, keep) + pad[depth % 32];
}

__attribute__((noinline)) void throw_and_catch(int n) {
  try {
    if (n % 2)
      throw std::runtime_error(std::string(static_cast<size_t>(20 + n % 50), 'x'));
    throw n;
  } catch (const std::exception &e) {
    sink += static_cast<unsigned>(std::string(e.what()).size());
  } catch (int) {
    sink += 1;
  }
}

int compare_and_allocate(const void *a, const void *b) {
  int x = *static_cast<const int *>(a), y = *static_cast<const int *>(b);
  if ((x + y) % 101 == 0)
    std::free(leaf_alloc(x));
  return (x > y) - (x < y);
}

struct Node {
  virtual ~Node() = default;
  virtual std::unique_ptr<Node> grow(int n) const = 0;
};
struct Leaf : Node {
  std::unique_ptr<Node> grow(int n) const override;
};
struct Branch : Node {
  std::vector<int> data;
  explicit Branch(int n) : data(static_cast<size_t>(n % 40 + 1), n) {}
  std::unique_ptr<Node> grow(int) const override { return std::make_unique<Leaf>(); }
};
std::unique_ptr<Node> Leaf::grow(int n) const { return std::make_unique<Branch>(n); }

} // namespace

int main() {
  std::vector<void *> keep;
  for (int i = 0; i < 400; i++)
    recurse(i % 60, keep);
  std::map<std::string, std::vector<int>> table;
  for (int i = 0; i < 3000; i++)
    table[std::to_string(i * 7919 % 3001)].push_back(i);
  for (int i = 0; i < 300; i++)
    throw_and_catch(i);
  std::vector<int> v(4000);
  for (int i = 0; i < 4000; i++)
    v[static_cast<size_t>(i)] = (i * 7919) % 4001;
  std::qsort(v.data(), v.size(), sizeof(int), compare_and_allocate);
  std::function<void(int)> f = [&](int d) {
    if (d > 0)
      f(d - 1);
    else
      keep.push_back(leaf_alloc(d));
  };
  for (int i = 0; i < 100; i++)
    f(i % 30);
  std::unique_ptr<Node> n = std::make_unique<Leaf>();
  for (int i = 0; i < 500; i++)
    n = n->grow(i);
  for (size_t i = 0; i < keep.size(); i += 2)
    std::free(keep[i]);
  std::printf("%zu %zu %u\n", keep.size(), table.size(), static_cast<unsigned>(sink & 0xff));
  return 0;
}
