#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "zrt/runtime/tensor.h"

using namespace zrt;

namespace {
std::vector<double> random_values(std::size_t n, unsigned seed, double scale = 100.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(tensor)

BOOST_AUTO_TEST_CASE(default_tensor_is_initialised) {
  Tensor t;
  BOOST_TEST(t.numel() == 0);
  BOOST_TEST(t.dtype() == DType::f32);
  BOOST_TEST(t.device() == Device::cpu());
}

BOOST_AUTO_TEST_CASE(metadata_and_alignment) {
  Tensor t = Tensor::empty({3, 5, 7}, DType::bf16);
  BOOST_TEST(t.numel() == 105);
  BOOST_TEST(t.nbytes() == 210u);
  BOOST_TEST(t.shape() == (Shape{3, 5, 7}));
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64 == 0u);
  BOOST_TEST(t.size(-1) == 7);
  BOOST_CHECK_THROW(t.size(3), InvalidArgument);
}

// Note [Tensor is a small handle]: no storage for a default tensor, views
// share the name instead of copying it, shapes sit inline up to max_dims.
BOOST_AUTO_TEST_CASE(default_tensor_and_views_are_small_handles) {
  Tensor d;
  BOOST_TEST(d.storage_ptr() == nullptr);
  BOOST_TEST(d.shape() == (Shape{0}));
  BOOST_TEST(d.numel() == 0);
  BOOST_TEST(d.is_freed());
  BOOST_TEST(d.data_ptr() == nullptr);
  BOOST_TEST(!d.shares_storage(Tensor()));
  BOOST_CHECK_THROW(d.storage(), InvalidState);
  BOOST_TEST(d.view({0, 3}).numel() == 0);
  BOOST_TEST(d.clone().numel() == 0);
  free_storage(d);  // nothing to free

  Tensor t = Tensor::empty({4, 6}, DType::f32);
  t.set_name("h.3.attn.c_attn.weight, a name longer than any small-string buffer");
  Tensor v = t.view({6, 4}).narrow(1, 2).slice(3, 5);
  BOOST_TEST(&v.name() == &t.name());
  BOOST_TEST(v.shares_storage(t));
  BOOST_TEST(v.offset() == 7);

  Shape s{1, 2, 3, 4, 5, 6};
  BOOST_TEST(static_cast<int>(s.size()) == Shape::max_dims);
  BOOST_CHECK_THROW(s.push_back(7), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::empty({1, 1, 1, 1, 1, 1, 1}, DType::f32), InvalidArgument);
  BOOST_TEST(Shape(std::vector<std::int64_t>{2, 3}) == (Shape{2, 3}));
  BOOST_TEST(shape_str(Shape{}) == "[]");
}

BOOST_AUTO_TEST_CASE(from_host_copies_host_memory) {
  const std::vector<std::int32_t> values{3, -1, 4, 1, -5, 9};
  Tensor t = Tensor::from_host(values.data(), {2, 3}, DType::i32);
  BOOST_TEST(t.shape() == (Shape{2, 3}));
  BOOST_TEST(t.data<std::int32_t>() != values.data());
  for (std::size_t i = 0; i < values.size(); ++i)
    BOOST_TEST(t.item(static_cast<std::int64_t>(i)) == values[i]);
  BOOST_TEST(Tensor::from_host(nullptr, {0}, DType::f32).numel() == 0);
  BOOST_CHECK_THROW(Tensor::from_host(nullptr, {2}, DType::f32), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(bad_shapes_are_typed_errors) {
  BOOST_CHECK_THROW(Tensor::empty({2, -1}, DType::f32), InvalidArgument);
  const std::int64_t big = std::int64_t{1} << 40;
  BOOST_CHECK_THROW(Tensor::empty({big, big}, DType::f32), InvalidArgument);
  Tensor t = Tensor::zeros({4, 3}, DType::f32);
  BOOST_CHECK_THROW(t.view({5, 3}), InvalidArgument);
  BOOST_CHECK_THROW(t.view({-1, -1}), InvalidArgument);
  BOOST_CHECK_THROW(t.view({-1, 5}), InvalidArgument);
  BOOST_CHECK_THROW(t.slice(10, 3), InvalidArgument);
  BOOST_CHECK_THROW(t.slice(-1, 1), InvalidArgument);
  BOOST_CHECK_THROW(t.narrow(3, 2), InvalidArgument);
  BOOST_CHECK_THROW(t.data<double>(), InvalidArgument);  // dtype mismatch
  BOOST_CHECK_THROW(t.copy_(Tensor::zeros({5}, DType::f32)), InvalidArgument);
  BOOST_CHECK_THROW(Device::parse("gpu0"), InvalidArgument);
  BOOST_CHECK_THROW(Device::parse("cuda:x"), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(views_share_storage) {
  auto vals = random_values(12, 1);
  Tensor t = Tensor::from_doubles(vals, DType::f64, Device::cpu(), {4, 3});
  Tensor rows = t.narrow(1, 2);
  BOOST_TEST(rows.shape() == (Shape{2, 3}));
  BOOST_TEST(rows.offset() == 3);
  BOOST_TEST(rows.item(0) == vals[3]);
  Tensor v = t.view({-1, 6});
  BOOST_TEST(v.shape() == (Shape{2, 6}));
  rows.set_item(5, 42.0);
  BOOST_TEST(t.item(8) == 42.0);
  BOOST_TEST(v.item(8) == 42.0);
  Tensor s = t.slice(7, 4);
  BOOST_TEST(s.item(1) == 42.0);
  BOOST_TEST(s.shares_storage(t));
}

BOOST_AUTO_TEST_CASE(copy_round_trips_every_dtype) {
  // Integers in [-100, 100] are exact in every dtype but u8; u8 gets [0, 200].
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> dist(-100, 100);
  std::vector<double> vals(1031);
  for (auto& x : vals) x = dist(gen);
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      std::vector<double> v = vals;
      if (a == DType::u8 || b == DType::u8)
        for (auto& x : v) x += 100;
      Tensor ta = Tensor::from_doubles(v, a);
      Tensor tb = Tensor::empty({static_cast<std::int64_t>(v.size())}, b);
      tb.fill_(b == DType::u8 ? 255 : -1);
      tb.copy_(ta);
      BOOST_TEST(tb.to_doubles() == v, dtype_name(a) << " -> " << dtype_name(b));
    }
  }
}

// An integer tensor takes whole numbers in its range from the caller; a
// cast from floats drops the fraction (toward zero), and refuses what has
// no integer (NaN, an infinity, a value out of range) instead of leaving it
// to an undefined cast (which gave INT_MIN, or 44 for 300 in u8). A cast
// between integer types refuses what the target cannot hold.
BOOST_AUTO_TEST_CASE(integer_tensors_take_only_values_they_hold) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [values, dtype] :
       std::vector<std::pair<std::vector<double>, DType>>{{{nan}, DType::i32},
                                                          {{1e20}, DType::i32},
                                                          {{1e30}, DType::i64},
                                                          {{300}, DType::u8},
                                                          {{-1}, DType::u8},
                                                          {{2.5}, DType::i32},
                                                          {{1.7}, DType::i64}})
    BOOST_CHECK_THROW(Tensor::from_doubles(values, dtype), InvalidArgument);
  Tensor ids = Tensor::zeros({2}, DType::i32);
  BOOST_CHECK_THROW(ids.fill_(2.5), InvalidArgument);
  BOOST_CHECK_THROW(ids.fill_(nan), InvalidArgument);
  BOOST_CHECK_THROW(ids.set_item(0, 2.5), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::full({2}, 2.5, DType::i32), InvalidArgument);
  BOOST_TEST(ids.to_doubles() == (std::vector<double>{0, 0}));
  BOOST_TEST(Tensor::from_doubles({2.7, -2.7, 255.9}, DType::f32).to(DType::i32).to_doubles() ==
             (std::vector<double>{2, -2, 255}));
  BOOST_CHECK_THROW(Tensor::from_doubles({1, nan}, DType::f32).to(DType::i32), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::from_doubles({256}, DType::bf16).to(DType::u8), InvalidArgument);
  BOOST_TEST(Tensor::from_doubles({-2147483648.0, 2147483647.0}, DType::i32).to_doubles() ==
             (std::vector<double>{-2147483648.0, 2147483647.0}));
  // The ends of i64 are powers of two: -2^63 is held, 2^63 is not.
  BOOST_TEST(Tensor::from_doubles({-std::ldexp(1.0, 63)}, DType::i64).to_doubles() ==
             (std::vector<double>{-std::ldexp(1.0, 63)}));
  BOOST_CHECK_THROW(Tensor::from_doubles({std::ldexp(1.0, 63)}, DType::i64), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::from_doubles({300}, DType::i64).to(DType::u8), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::from_doubles({-1}, DType::i32).to(DType::u8), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::from_doubles({4294967296.0}, DType::i64).to(DType::i32),
                    InvalidArgument);
  BOOST_TEST(Tensor::from_doubles({-7, 2147483647}, DType::i64).to(DType::i32).to_doubles() ==
             (std::vector<double>{-7, 2147483647}));
  BOOST_TEST(Tensor::from_doubles({0, 255}, DType::i64).to(DType::u8).to_doubles() ==
             (std::vector<double>{0, 255}));
}

// A view past the end of its storage is refused where it is made, not at
// its first use.
BOOST_AUTO_TEST_CASE(from_storage_stays_inside_its_storage) {
  const Tensor t = Tensor::zeros({10}, DType::f32);
  BOOST_TEST(Tensor::from_storage(t.storage_ptr(), {2, 3}, DType::f32, 4).numel() == 6);
  BOOST_CHECK_THROW(Tensor::from_storage(t.storage_ptr(), {2, 3}, DType::f32, 5), InvalidArgument);
  BOOST_CHECK_THROW(Tensor::from_storage(t.storage_ptr(), {6}, DType::f64, 0), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(casts_round_to_nearest_even) {
  // Halfway cases: 1 + 2^-8 ties to 1 (even); 1 + 3*2^-8 ties up to 1 + 2^-6.
  Tensor f = Tensor::from_doubles(
      {1.0 + std::ldexp(1, -8), 1.0 + 3 * std::ldexp(1, -8), 65520.0,
       std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()},
      DType::f32);
  Tensor b = f.to(DType::bf16);
  BOOST_TEST(b.item(0) == 1.0);
  BOOST_TEST(b.item(1) == 1.0 + std::ldexp(1, -6));
  BOOST_TEST(std::isnan(b.item(3)));
  BOOST_TEST(b.item(4) == -std::numeric_limits<double>::infinity());
  Tensor h = f.to(DType::f16);
  BOOST_TEST(std::isinf(h.item(2)));  // 65520 overflows f16 (max 65504)
  BOOST_TEST(std::isnan(h.item(3)));
}

BOOST_AUTO_TEST_CASE(fill_and_clone) {
  for (DType t : kAllDTypes) {
    Tensor x = Tensor::full({3, 3}, 5.0, t);
    Tensor y = x.clone();
    x.fill_(1.0);
    for (double v : y.to_doubles()) BOOST_TEST(v == 5.0);
    for (double v : x.to_doubles()) BOOST_TEST(v == 1.0);
  }
}

BOOST_AUTO_TEST_CASE(dtype_and_device_names) {
  for (DType t : kAllDTypes) BOOST_TEST((parse_dtype(dtype_name(t)) == t));
  BOOST_TEST((parse_dtype("bfloat16") == DType::bf16));
  BOOST_TEST(!parse_dtype("f8").has_value());
  BOOST_TEST((Device::parse("cuda:3") == Device::cuda(3)));
  BOOST_TEST(Device::parse("cpu").str() == "cpu");
}

BOOST_AUTO_TEST_CASE(cuda_tensors_need_cuda) {
  if (cuda_available()) return;
  BOOST_CHECK_THROW(Tensor::empty({3}, DType::f32, Device::cuda(0)), Error);
}

BOOST_AUTO_TEST_SUITE_END()
