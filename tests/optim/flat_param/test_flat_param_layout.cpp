// optim::FlatParamLayout against hand-worked examples and against an element-by-element
// model of Note [Flat parameter layout] (and Note [Quantization blocks within one
// parameter]) for many shapes, group sizes, dtypes and quantization blocks.
#include <boost/test/unit_test.hpp>
#include <random>

#include "zrt/optim/flat_param/flat_param_layout.h"

using namespace zrt;

namespace {

std::vector<optim::ParamSpec> specs(const std::vector<Shape>& shapes) {
  std::vector<optim::ParamSpec> out;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    out.push_back({"p" + std::to_string(i), shapes[i]});
  return out;
}

// Elementwise model: owner[e] = (param index or -1, index inside the param).
struct Owner {
  int param;
  std::int64_t intra;
};
std::vector<Owner> elementwise_model(const std::vector<Shape>& shapes, std::int64_t align,
                                     int div) {
  std::vector<Owner> owner;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    while (owner.size() % align != 0) owner.push_back({-1, 0});
    for (std::int64_t k = 0; k < shape_numel(shapes[i]); ++k)
      owner.push_back({static_cast<int>(i), k});
  }
  while (owner.empty() || owner.size() % div != 0) owner.push_back({-1, 0});
  return owner;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flat_param_layout)

// Note [Padded rows of a parameter]: [3, 2] with 2 padded rows is 6
// elements of its own and 4 of padding right after it; the next parameter
// starts after both, aligned; shards cover the parameter's own elements only.
BOOST_AUTO_TEST_CASE(padded_rows) {
  std::vector<optim::ParamSpec> ps = {{"w", {3, 2}, 2}, {"b", {3}}};
  BOOST_TEST((ps[0].padded_shape() == Shape{5, 2}));
  BOOST_TEST(ps[0].padded_numel() == 10);
  BOOST_TEST((ps[1].padded_shape() == Shape{3}));
  optim::FlatParamLayout l(ps, DType::f32, 2);
  BOOST_TEST(l.param_offset(0) == 0);
  BOOST_TEST(l.param_offset(1) == 12);  // 6 + 4 padded + 2 alignment
  BOOST_TEST(l.numel_unpadded() == 9);
  BOOST_TEST(l.numel_padded() == 16);
  BOOST_TEST(l.segments().size() == 5u);  // w, its padded rows, alignment, b, tail
  const optim::FlatSegment& pad = l.segments()[1];
  BOOST_TEST((pad.is_padding && pad.offset == 6 && pad.numel == 4));
  const auto r0 = l.shard_infos(0, 2);  // [0, 8): w's 6 elements, no padded row counted
  BOOST_TEST((r0[0].in_shard && r0[0].numel_in_shard == 6 && !r0[1].in_shard));
  BOOST_CHECK_THROW((optim::FlatParamLayout({{"s", {}, 1}}, DType::f32, 1)), InvalidArgument);
  BOOST_CHECK_THROW((optim::FlatParamLayout({{"w", {3}, -1}}, DType::f32, 1)), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(hand_worked_f32) {
  optim::FlatParamLayout l(specs({{3}, {2, 2}, {5}}), DType::f32, 4);
  BOOST_TEST(l.aligned_numel() == 4);
  BOOST_TEST(l.param_offset(0) == 0);
  BOOST_TEST(l.param_offset(1) == 4);
  BOOST_TEST(l.param_offset(2) == 8);
  BOOST_TEST(l.numel_unpadded() == 12);
  BOOST_TEST(l.numel_padded() == 16);
  BOOST_TEST(l.segments().size() == 5u);  // p0, pad 1, p1, p2, pad 3
  BOOST_TEST(l.segments()[1].is_padding);
  BOOST_TEST(l.segments()[1].numel == 1);
  BOOST_TEST(l.segments()[4].numel == 3);

  auto r0 = l.shard_infos(0, 4);
  BOOST_TEST(r0[0].in_shard);
  BOOST_TEST(r0[0].offset_in_shard == 0);
  BOOST_TEST(r0[0].numel_in_shard == 3);
  BOOST_TEST(!r0[1].in_shard);
  BOOST_TEST(!r0[2].in_shard);
  auto r3 = l.shard_infos(3, 4);
  BOOST_TEST(r3[2].in_shard);
  BOOST_TEST(r3[2].offset_in_shard == 0);
  BOOST_TEST(r3[2].numel_in_shard == 1);
  BOOST_TEST(r3[2].intra_param_start == 4);
  BOOST_TEST(r3[2].intra_param_end == 5);
  // zero3 of size 2 inside zero1 of size 4: shard 1 is [8, 16).
  auto z1 = l.shard_infos(1, 2);
  BOOST_TEST(!z1[1].in_shard);
  BOOST_TEST(z1[2].numel_in_shard == 5);
}

BOOST_AUTO_TEST_CASE(hand_worked_bf16_aligns_to_8) {
  optim::FlatParamLayout l(specs({{3}, {2, 2}, {5}}), DType::bf16, 4);
  BOOST_TEST(l.aligned_numel() == 8);
  BOOST_TEST(l.param_offset(1) == 8);
  BOOST_TEST(l.param_offset(2) == 16);
  BOOST_TEST(l.numel_padded() == 24);
}

BOOST_AUTO_TEST_CASE(matches_elementwise_model) {
  std::mt19937 gen(1234);
  std::uniform_int_distribution<int> nparams(1, 6), dim(0, 9), ndim(0, 3);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<Shape> shapes;
    for (int i = nparams(gen); i > 0; --i) {
      Shape s;
      for (int d = ndim(gen); d > 0; --d) s.push_back(dim(gen));
      shapes.push_back(s);  // includes scalars ([]) and zero-size params
    }
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      for (int w1 = 1; w1 <= 8; ++w1) {
        const std::int64_t qb = trial % 2 ? 16 : 0;  // a quantization block, or none
        optim::FlatParamLayout l(specs(shapes), dt, w1, qb);
        BOOST_REQUIRE(l.quant_block() == qb);
        auto model = qb > 0 ? elementwise_model(shapes, qb, static_cast<int>(qb) * w1)
                            : elementwise_model(shapes, 16 / std::int64_t(dtype_size(dt)), w1);
        // With a block grid, zero1 shards start on it and every block holds one parameter at most.
        BOOST_REQUIRE((qb == 0 || model.size() / w1 % qb == 0));
        int block_param = -1;
        for (std::size_t e = 0; qb > 0 && e < model.size(); ++e) {
          if (e % qb == 0) block_param = -1;
          if (model[e].param < 0) continue;
          BOOST_REQUIRE((block_param < 0 || block_param == model[e].param));
          block_param = model[e].param;
        }
        BOOST_REQUIRE(l.numel_padded() == static_cast<std::int64_t>(model.size()));
        auto mask = l.padding_mask();
        for (std::size_t e = 0; e < model.size(); ++e)
          BOOST_REQUIRE(mask[e] == (model[e].param < 0));
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          auto it = std::find_if(model.begin(), model.end(),
                                 [&](const Owner& o) { return o.param == static_cast<int>(i); });
          if (it != model.end()) BOOST_REQUIRE(l.param_offset(i) == it - model.begin());
        }
        for (int w = 1; w <= w1; ++w) {
          if (w1 % w) continue;  // zero3 sizes divide the zero1 size
          const std::int64_t n = l.shard_numel(w);
          for (int r = 0; r < w; ++r) {
            auto infos = l.shard_infos(r, w);
            for (std::size_t i = 0; i < shapes.size(); ++i) {
              optim::ShardParamInfo expect;
              for (std::int64_t e = r * n; e < (r + 1) * n; ++e) {
                if (model[e].param != static_cast<int>(i)) continue;
                if (!expect.in_shard) {
                  expect.in_shard = true;
                  expect.offset_in_shard = e - r * n;
                  expect.intra_param_start = model[e].intra;
                }
                ++expect.numel_in_shard;
                expect.intra_param_end = model[e].intra + 1;
              }
              const auto& got = infos[i];
              BOOST_REQUIRE(got.in_shard == expect.in_shard);
              if (!got.in_shard) continue;
              BOOST_REQUIRE(got.offset_in_shard == expect.offset_in_shard);
              BOOST_REQUIRE(got.numel_in_shard == expect.numel_in_shard);
              BOOST_REQUIRE(got.intra_param_start == expect.intra_param_start);
              BOOST_REQUIRE(got.intra_param_end == expect.intra_param_end);
            }
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(parameters_smaller_than_the_world) {
  optim::FlatParamLayout l(specs({{1}, {2}}), DType::f32, 8);
  BOOST_TEST(l.numel_padded() == 8);  // p0 at 0, pad 3, p1 at 4..6, pad 2
  int holders = 0;
  for (int r = 0; r < 8; ++r) holders += l.shard_infos(r, 8)[1].in_shard;
  BOOST_TEST(holders == 2);
}

// Note [Quantization blocks within one parameter]: a 128-element LayerNorm
// weight and its bias no longer share a 256-element block, and each zero1
// shard starts on the grid.
BOOST_AUTO_TEST_CASE(quantization_blocks) {
  const std::vector<Shape> shapes = {{128}, {128}, {3, 37}, {5}};
  optim::FlatParamLayout plain(specs(shapes), DType::bf16, 3);
  BOOST_TEST(plain.param_offset(1) == 128);
  optim::FlatParamLayout l(specs(shapes), DType::bf16, 3, 256);
  BOOST_TEST(l.param_offset(0) == 0);
  BOOST_TEST(l.param_offset(1) == 256);
  BOOST_TEST(l.param_offset(2) == 512);
  BOOST_TEST(l.param_offset(3) == 768);
  BOOST_TEST(l.numel_padded() == 3 * 256 * 2);  // 773 elements, padded to 256 x 3 ranks
  BOOST_TEST(l.shard_numel(3) == 512);
}

BOOST_AUTO_TEST_CASE(bad_input) {
  BOOST_CHECK_THROW(optim::FlatParamLayout({}, DType::f32, 2), InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamLayout(specs({{2}}), DType::f32, 0), InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamLayout(specs({{2}}), DType::i32, 1), InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamLayout({{"a", {2}}, {"a", {3}}}, DType::f32, 1),
                    InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamLayout(specs({{2}}), DType::f32, 1, -4), InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamLayout(specs({{2}}), DType::bf16, 1, 12), InvalidArgument);
  optim::FlatParamLayout l(specs({{5}}), DType::f32, 4);
  BOOST_CHECK_THROW(l.shard_infos(0, 3), InvalidArgument);
  BOOST_CHECK_THROW(l.shard_infos(4, 4), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
