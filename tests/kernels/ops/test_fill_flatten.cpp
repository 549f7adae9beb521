// fill of every dtype; flatten/unflatten into the FlatParameter layout with
// zeroed gaps and tail, casting on the way.
#include <boost/test/unit_test.hpp>
#include <functional>
#include <future>

#include "tests/kernels/kernel_test_util.h"
#include "tests/support/expect_throw.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/flatten.h"

using namespace zrt;
using namespace zrt::test;

BOOST_AUTO_TEST_SUITE(kernels_fill_flatten)

BOOST_AUTO_TEST_CASE(fill_every_dtype_and_size) {
  auto gen = fresh_generator();
  std::uniform_int_distribution<int> small(-100, 100);
  for (std::int64_t n : kSizes) {
    for (DType t : kAllDTypes) {
      const double value =
          t == DType::u8 ? small(gen) + 100 : small(gen) + (is_floating(t) ? 0.3 : 0.0);
      Tensor dst = odd_offset_view(n, t);
      poison(dst);
      kernels::fill(dst, value);
      const double want =
          is_floating(t) ? round_to(t == DType::f64 ? DType::f32 : t, value) : value;
      for (double v : dst.to_doubles())
        if (t == DType::f64 ? v != value : v != want)
          BOOST_FAIL(dtype_name(t) << " n=" << n << ": got " << v << " want " << value);
    }
  }
  Tensor z = random_tensor(4097, DType::bf16, gen);
  kernels::zero(z);
  for (double v : z.to_doubles()) BOOST_REQUIRE(same_value(v, 0.0));
}

// Note [Host reads of queued work]: a host read of a tensor a kernel still
// queued on a CPU stream names is refused, naming it; after the stream's
// synchronize it reads the kernel's values.
BOOST_AUTO_TEST_CASE(a_host_read_before_the_stream_ran_the_kernel_is_refused) {
  auto gen = fresh_generator();
  Tensor t = random_tensor(37, DType::f32, gen);
  t.set_name("loss");
  const std::vector<double> before = t.to_doubles();
  OwnedStream stream(Device::cpu());
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  run_on_cpu_stream(stream, "held", [released] { released.wait(); });  // the stream is busy
  kernels::fill(t, 2.5, stream);
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { t.to_doubles(); }, [&] { t.item(3); }, [&] { t.slice(5, 2).to_doubles(); }})
    test::expect_throw<InvalidState>(read, "loss");
  test::expect_throw<InvalidState>([&] { t.item(0); },
                                   "is named by 1 kernel(s) or copies queued on a CPU stream "
                                   "that have not run");
  go.set_value();
  stream.get().synchronize();
  for (double v : t.to_doubles()) BOOST_REQUIRE(v == 2.5);
  BOOST_TEST(before[0] != 2.5);
  kernels::fill(t, 1.0);  // the calling thread: nothing is queued
  BOOST_TEST(t.item(0) == 1.0);
}

BOOST_AUTO_TEST_CASE(fill_rejects_unrepresentable_integers) {
  BOOST_CHECK_THROW(kernels::fill(Tensor::empty({3}, DType::u8), 300.0), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fill(Tensor::empty({3}, DType::i32), 1.5), InvalidArgument);
  Tensor freed = Tensor::empty({3}, DType::f32);
  free_storage(freed);
  BOOST_CHECK_THROW(kernels::fill(freed, 1.0), InvalidState);
}

BOOST_AUTO_TEST_CASE(flatten_with_padding_and_unflatten) {
  auto gen = fresh_generator();
  for (DType flat_t : {DType::f32, DType::bf16}) {
    // Parts of odd sizes and mixed dtypes, each at an 8-element aligned offset.
    const std::vector<std::int64_t> sizes = {3, 1, 4097, 0, 17};
    std::vector<Tensor> parts;
    std::vector<std::int64_t> offsets;
    std::int64_t pos = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      parts.push_back(random_tensor(sizes[k], k % 2 ? DType::f32 : flat_t, gen));
      offsets.push_back(pos);
      pos = (pos + sizes[k] + 7) / 8 * 8;
    }
    const std::int64_t total = pos + 13;  // tail padding
    Tensor flat = odd_offset_view(total, flat_t);
    poison(flat);
    kernels::flatten_into(flat, parts, offsets);
    const std::vector<double> f = flat.to_doubles();
    std::vector<bool> covered(static_cast<std::size_t>(total), false);
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const std::vector<double> p = parts[k].to_doubles();
      for (std::int64_t i = 0; i < sizes[k]; ++i) {
        BOOST_REQUIRE(same_value(f[offsets[k] + i], round_to(flat_t, p[i])));
        covered[offsets[k] + i] = true;
      }
    }
    for (std::int64_t i = 0; i < total; ++i)
      if (!covered[i])
        BOOST_REQUIRE_MESSAGE(same_value(f[i], 0.0), "padding at " << i << " is " << f[i]);

    std::vector<Tensor> back;
    for (const Tensor& p : parts) {
      back.push_back(odd_offset_view(p.numel(), p.dtype()));
      poison(back.back());
    }
    kernels::unflatten_from(back, flat, offsets);
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const std::vector<double> p = parts[k].to_doubles(), b = back[k].to_doubles();
      for (std::int64_t i = 0; i < sizes[k]; ++i)
        BOOST_REQUIRE(same_value(b[i], round_to(flat_t, p[i])));
    }
  }
}

BOOST_AUTO_TEST_CASE(flatten_rejects_bad_layouts) {
  Tensor flat = Tensor::empty({16}, DType::f32);
  std::vector<Tensor> parts = {Tensor::empty({4}, DType::f32), Tensor::empty({4}, DType::f32)};
  const std::vector<std::int64_t> overlapping = {0, 3}, past_end = {0, 13}, negative = {-1, 8},
                                  too_few = {0};
  BOOST_CHECK_THROW(kernels::flatten_into(flat, parts, overlapping), InvalidArgument);
  BOOST_CHECK_THROW(kernels::flatten_into(flat, parts, past_end), InvalidArgument);
  BOOST_CHECK_THROW(kernels::flatten_into(flat, parts, negative), InvalidArgument);
  BOOST_CHECK_THROW(kernels::flatten_into(flat, parts, too_few), InvalidArgument);
  BOOST_CHECK_THROW(kernels::unflatten_from(parts, flat, overlapping), InvalidArgument);
  const std::vector<std::int64_t> ok = {0, 8};
  parts[1] = Tensor::empty({4}, DType::i32);
  BOOST_CHECK_THROW(kernels::flatten_into(flat, parts, ok), InvalidArgument);
  free_storage(flat);
  parts[1] = Tensor::empty({4}, DType::f32);
  BOOST_CHECK_THROW(kernels::flatten_into(flat, parts, ok), InvalidState);
}

BOOST_AUTO_TEST_SUITE_END()
