// Every registered op (Note [One registration per op]) on its paths: built as
// test_op_registry (unit: the CPU paths, serial against threaded and the
// op-specific ones) and as test_op_registry_gpu (gpu: the CUDA kernels, simple
// and fast, against the CPU twin). The unit build also shows the harness fails
// an op that leaves an output element unwritten, misses a tolerance, writes
// its input, does not repeat itself or throws, and passes a loose enough
// tolerance.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <set>

#include "tests/kernels/op_registry.h"
#include "tests/support/test_seed.h"
#include "zrt/kernels/nn/residual_add.h"
#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/scale.h"

using namespace zrt;
using namespace zrt::test;

namespace {

#ifdef ZRT_OP_REGISTRY_GPU
constexpr bool kCuda = true;
#else
constexpr bool kCuda = false;
#endif

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpRegistration& r : all_registrations()) names.push_back(r.name);
  return names;
}

// Joined failures, for a message.
std::string joined(const std::vector<std::string>& failures) {
  std::string s;
  for (std::size_t i = 0; i < failures.size() && i < 20; ++i) s += "\n  " + failures[i];
  if (failures.size() > 20) s += "\n  ... " + std::to_string(failures.size() - 20) + " more";
  return s;
}

#ifndef ZRT_OP_REGISTRY_GPU  // the fault cases
bool any_contains(const std::vector<std::string>& failures, const std::string& what) {
  for (const std::string& f : failures)
    if (f.find(what) != std::string::npos) return true;
  return false;
}

// A registration of `name` cut to one small case in f32, its call replaced.
OpRegistration broken(const std::string& name,
                      std::function<void(OpRun&, const OpDims&, DType)> run) {
  OpRegistration r = find_registration(name);
  r.dims = {{1031}};
  r.dtypes = {DType::f32};
  r.run = std::move(run);
  return r;
}

#endif

}  // namespace

BOOST_AUTO_TEST_SUITE(op_registry)

BOOST_DATA_TEST_CASE(registered_op, boost::unit_test::data::make(op_names()), name) {
  const OpRegistration& r = find_registration(name);
  const std::uint64_t seed = test_seed(("op " + name).c_str());
  const std::vector<std::string> failures = check_op(r, seed, kCuda);
  BOOST_TEST(failures.empty(), name << ": " << failures.size() << " failed checks (seed " << seed
                                    << ")" << joined(failures));
}

#ifndef ZRT_OP_REGISTRY_GPU

BOOST_AUTO_TEST_CASE(registrations_are_complete_and_unique) {
  std::set<std::string> seen;
  for (const OpRegistration& r : all_registrations()) {
    BOOST_TEST_CONTEXT(r.name) {
      BOOST_TEST(seen.insert(r.name).second);
      BOOST_TEST(!r.dims.empty());
      BOOST_TEST(!r.dtypes.empty());
      BOOST_TEST(bool(r.make_inputs));
      BOOST_TEST(bool(r.run));
      BOOST_TEST(bool(r.cost));
    }
  }
  BOOST_TEST(seen.size() >= 20u);
}

BOOST_AUTO_TEST_CASE(an_unwritten_element_fails) {
  // The threaded path forgets the last element: its poison (NaN) shows.
  const OpRegistration r = broken("cast ->f32", [](OpRun& run, const OpDims& d, DType) {
    const Tensor dst = run.out("dst", {d[0]}, DType::f32);
    const std::int64_t n = run.path().name == "cpu serial" ? d[0] : d[0] - 1;
    kernels::cast(dst.slice(0, n), run.in(0).slice(0, n));
  });
  const std::vector<std::string> failures =
      check_op(r, test_seed("an_unwritten_element_fails"), false);
  BOOST_TEST(any_contains(failures,
                          "cpu threads vs cpu serial, output dst: bits differ first at "
                          "element 1030"),
             joined(failures));
}

BOOST_AUTO_TEST_CASE(a_tolerance_fails_an_error_above_it_only) {
  // The threaded path is off by a relative 1e-6: within the model ops' 1e-4,
  // not within 1e-7 and not bit for bit.
  OpRegistration r = broken("residual_add", [](OpRun& run, const OpDims& d, DType t) {
    const Tensor out = run.out("out", {d[0]}, t);
    kernels::residual_add(run.in(0), run.in(1), out);
    if (run.path().name != "cpu serial") kernels::scale_(out, 1 + 1e-6);
  });
  const std::uint64_t seed = test_seed("a_tolerance_fails_an_error_above_it_only");
  BOOST_TEST(check_op(r, seed, false).empty(), joined(check_op(r, seed, false)));
  for (const double tight : {1e-7, 0.0}) {
    r.tolerance = [tight](DType) { return OpTolerance{tight, tight}; };
    BOOST_TEST(any_contains(check_op(r, seed, false), "cpu threads vs cpu serial, output out"));
  }
}

BOOST_AUTO_TEST_CASE(an_infinity_matches_only_itself_within_a_tolerance) {
  // As a CUDA run is checked against the CPU (squared_norm's Inf cases): an
  // Inf equal to the reference's passes a tolerance; a finite value there fails.
  for (const bool lose_it : {false, true}) {
    OpRegistration r = broken("residual_add", [lose_it](OpRun& run, const OpDims& d, DType t) {
      Tensor out = run.out("out", {d[0]}, t);
      kernels::residual_add(run.in(0), run.in(1), out);
      if (lose_it && run.path().name != "cpu serial") out.set_item(3, 1.0);
    });
    const auto make = r.make_inputs;
    r.make_inputs = [make](const OpDims& d, DType t, std::mt19937_64& g) {
      std::vector<Tensor> in = make(d, t, g);
      in[0].set_item(3, INFINITY);
      return in;
    };
    r.tolerance = [](DType) { return OpTolerance{1e-4, 1e-4}; };
    const std::vector<std::string> failures =
        check_op(r, test_seed("an_infinity_matches_only_itself_within_a_tolerance"), false);
    if (lose_it)
      BOOST_TEST(any_contains(failures,
                              "cpu threads vs cpu serial, output out: max |difference| "
                              "inf"),
                 joined(failures));
    else
      BOOST_TEST(failures.empty(), joined(failures));
  }
}

BOOST_AUTO_TEST_CASE(writing_an_input_fails) {
  const OpRegistration r = broken("scale_", [](OpRun& run, const OpDims&, DType) {
    kernels::scale_(run.in(0), 0.5);
    run.record("nothing", Tensor::zeros({1}, DType::f32));
  });
  const std::vector<std::string> failures = check_op(r, test_seed("writing_an_input_fails"), false);
  BOOST_TEST(any_contains(failures, "cpu serial: input 0 was written"), joined(failures));
}

BOOST_AUTO_TEST_CASE(a_run_that_does_not_repeat_fails) {
  // The threaded path's result changes from call to call.
  OpRegistration r = broken("scale_", [](OpRun& run, const OpDims&, DType) {
    static int calls = 0;
    const Tensor x = run.inout("x", 0);
    kernels::scale_(x, run.path().name == "cpu serial" ? 0.5 : 0.5 + (++calls % 2) * 0x1p-20);
  });
  r.tolerance = [](DType) { return OpTolerance{1e-4, 1e-4}; };
  const std::vector<std::string> failures =
      check_op(r, test_seed("a_run_that_does_not_repeat_fails"), false);
  BOOST_TEST(any_contains(failures, "cpu threads run twice, output x: bits differ"),
             joined(failures));
}

BOOST_AUTO_TEST_CASE(a_throwing_path_fails) {
  const OpRegistration r = broken("scale_", [](OpRun& run, const OpDims&, DType) {
    kernels::scale_(run.inout("x", 0), 0.5);
    if (run.path().name == "cpu threads") ZRT_THROW(InvalidArgument, "no");
  });
  const std::vector<std::string> failures = check_op(r, test_seed("a_throwing_path_fails"), false);
  BOOST_TEST(any_contains(failures, "cpu threads: threw"), joined(failures));
}

#endif

BOOST_AUTO_TEST_SUITE_END()
