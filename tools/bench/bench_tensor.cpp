// zrt-bench tensor [--ops N] [--reps R] [--json]
//
// The cost of Tensor as a handle (Note [Tensor is a small handle]):
// sizeof(Tensor), and nanoseconds per default construction, copy, view,
// slice and narrow of a named parameter-like tensor, each against copying
// the shared_ptr to its storage in the same run (the one reference count a
// view cannot avoid).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/tensor.h"

namespace zrt::bench {
namespace {

struct Options {
  std::int64_t ops = 1'000'000;
  int reps = 5;
  bool json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  OptionParser("tensor", "usage: zrt-bench tensor [--ops N] [--reps R] [--json]")
      .value("--ops", o.ops)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  ZRT_CHECK_ARG(o.ops > 0, "--ops must be positive");
  return o;
}

// Keeps the optimiser from dropping the work whose cost is measured.
template <class T>
void keep(T& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

}  // namespace

int bench_tensor(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Tensor weight = Tensor::empty({768, 2304}, DType::f32);
  weight.set_name("h.11.attn.c_attn.weight");
  const std::shared_ptr<Storage> storage = weight.storage_ptr();

  auto per_op_ns = [&](auto&& op) {
    double s = median_seconds(
        [&] {
          for (std::int64_t i = 0; i < o.ops; ++i) op(i);
        },
        2, o.reps);
    return s / static_cast<double>(o.ops) * 1e9;
  };
  const double baseline = per_op_ns([&](std::int64_t) {
    std::shared_ptr<Storage> p = storage;
    keep(p);
  });
  struct Case {
    const char* name;
    double ns;
  };
  const std::vector<Case> cases = {
      {"default Tensor()", per_op_ns([&](std::int64_t) {
         Tensor t;
         keep(t);
       })},
      {"copy", per_op_ns([&](std::int64_t) {
         Tensor t = weight;
         keep(t);
       })},
      {"view({-1, 768})", per_op_ns([&](std::int64_t) {
         Tensor t = weight.view({-1, 768});
         keep(t);
       })},
      {"slice(i, 768)", per_op_ns([&](std::int64_t i) {
         Tensor t = weight.slice(i % 1024, 768);
         keep(t);
       })},
      {"narrow(i, 3)", per_op_ns([&](std::int64_t i) {
         Tensor t = weight.narrow(i % 700, 3);
         keep(t);
       })},
  };

  if (!o.json)
    std::printf("sizeof(Tensor) = %zu bytes; baseline: copying a shared_ptr<Storage>, %.1f ns\n",
                sizeof(Tensor), baseline);
  Table table({"op", "ns", "vs_shared_ptr_copy"});
  table.add({"shared_ptr copy", Table::num(baseline, 1), Table::num(1.0, 2)});
  for (const auto& c : cases)
    table.add({c.name, Table::num(c.ns, 1), Table::num(c.ns / baseline, 2)});
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
