// The flash attention of Note [Flash attention on tensor cores], emulated on
// the host (its blocks in order, each warp's 32 lanes and their mma
// fragments by the PTX maps, shared memory poisoned with NaN), against the
// float64 row reference of attention_math.h on the same rounded inputs:
// out, lse and dqkv within 2e-2 of 1 + max |reference| for bf16 and f16
// (probabilities and dS rounded to the activation dtype before their
// products, outputs rounded on store), at T under a tile, odd T, T a tile
// multiple and past several tiles, every supported head dim, several heads
// and batch elements; tiles moved in 16-byte vectors and element by element
// give the same bits. Also the fragment maps: each covers its tile once;
// and the ldmatrix row addresses give the fragments the element-wise loads
// give.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/nn/attention_reference.h"
#include "zrt/kernels/nn/attention_math.h"
#include "zrt/kernels/nn/flash_attention_math.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

template <class T, int HD>
void check_flash(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::mt19937_64& gen) {
  const std::int64_t c = heads * HD;
  const AttentionDims d{batch, seq, c, heads, HD};
  std::uniform_real_distribution<double> dist(-2, 2);
  auto draw = [&](std::int64_t n) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = store<T>(float(dist(gen)));
    return v;
  };
  const std::vector<T> qkv = draw(batch * seq * 3 * c), dout = draw(batch * seq * c);
  std::vector<T> out(static_cast<std::size_t>(batch * seq * c), store<T>(NAN));
  std::vector<float> lse(static_cast<std::size_t>(batch * heads * seq), NAN);
  flash_attention_forward_host<T, HD>(d, qkv.data(), out.data(), lse.data(), true);
  std::vector<T> dqkv(qkv.size(), store<T>(NAN));
  flash_attention_backward_host<T, HD>(d, dout.data(), qkv.data(), out.data(), lse.data(),
                                       dqkv.data(), true);
  // Element by element (the GPU's way for misaligned activations): the same
  // tiles, so the same bits.
  std::vector<T> out_e(out.size(), store<T>(NAN)), dqkv_e(qkv.size(), store<T>(NAN));
  std::vector<float> lse_e(lse.size(), NAN);
  flash_attention_forward_host<T, HD>(d, qkv.data(), out_e.data(), lse_e.data(), false);
  flash_attention_backward_host<T, HD>(d, dout.data(), qkv.data(), out.data(), lse.data(),
                                       dqkv_e.data(), false);
  BOOST_TEST(std::memcmp(out.data(), out_e.data(), out.size() * sizeof(T)) == 0);
  BOOST_TEST(std::memcmp(lse.data(), lse_e.data(), lse.size() * sizeof(float)) == 0);
  BOOST_TEST(std::memcmp(dqkv.data(), dqkv_e.data(), dqkv.size() * sizeof(T)) == 0);

  auto wide = [](const auto& v) {
    std::vector<double> w(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) w[i] = double(to_f32(v[i]));
    return w;
  };
  const std::vector<double> q64 = wide(qkv), do64 = wide(dout);
  const test::AttentionReference ref = test::attention_reference(d, q64, do64);
  const double tol = 2e-2;
  zrt::test::check_close("out", ref.out, wide(out), tol);
  zrt::test::check_close("lse", ref.lse, std::vector<double>(lse.begin(), lse.end()), tol);
  zrt::test::check_close("dqkv", ref.dqkv, wide(dqkv), tol);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flash_attention)

BOOST_AUTO_TEST_CASE(fragment_maps_cover_each_tile_once) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        const FlashElem e = flash_a_element(lane, r, h);
        BOOST_TEST((e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 16));
        a.insert({e.row, e.col});
      }
    for (int r = 0; r < 2; ++r)
      for (int h = 0; h < 2; ++h) {
        const FlashElem e = flash_b_element(lane, r, h);
        BOOST_TEST((e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 8));
        b.insert({e.row, e.col});
      }
    for (int r = 0; r < 4; ++r) {
      const FlashElem e = flash_c_element(lane, r);
      BOOST_TEST((e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 8));
      c.insert({e.row, e.col});
    }
  }
  BOOST_TEST(a.size() == 256u);
  BOOST_TEST(b.size() == 128u);
  BOOST_TEST(c.size() == 128u);
  // Accumulator n-tiles 2kk and 2kk + 1 are the A fragment of k-slice kk.
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        const FlashElem ea = flash_a_element(lane, r, h);
        const FlashElem ec = flash_acc_element(lane, r >> 1, (r & 1) * 2 + h);
        BOOST_TEST(ea.row == ec.row);
        BOOST_TEST(ea.col == ec.col);
      }
}

// The ldmatrix row addresses, through the instruction's distribution (the
// host warp's ldmatrix_x4), give every lane the registers the element-wise
// fragment loads give it, at every offset of a padded tile whose elements
// are all distinct: A, B of a transposed tile (two n-tiles) and B of a tile
// itself (two n-tiles, .trans).
BOOST_AUTO_TEST_CASE(ldmatrix_rows_give_the_mma_fragments) {
  constexpr int kHd = 64, kLd = 72;  // flash_ld(64)
  BOOST_TEST(flash_ld(kHd) == kLd);
  std::vector<bf16> tile(64 * kLd);
  for (std::size_t i = 0; i < tile.size(); ++i) tile[i] = bf16{std::uint16_t(i)};
  const bf16* t = tile.data();
  int mismatches = 0;
  // At every (row or n, col or k) offset of the tile: the lanes' registers
  // from row_of's addresses against want(lane, offsets, registers).
  auto check = [&](auto trans, const auto& row_of, const auto& want) {
    for (int x0 = 0; x0 < 64; x0 += 16)
      for (int y0 = 0; y0 < kHd; y0 += 16) {
        std::uint32_t got[32][4], expected[32][4];
        FlashHostWarp::ldmatrix_x4<decltype(trans)::value, bf16>(
            [&](int l) { return row_of(x0, y0, l); }, [&](int l) { return got[l]; });
        for (int l = 0; l < 32; ++l) {
          want(x0, y0, l, expected[l]);
          for (int r = 0; r < 4; ++r) mismatches += got[l][r] != expected[l][r];
        }
      }
  };
  check(
      std::false_type{}, [&](int r0, int c0, int l) { return flash_ldm_a_row(t, kLd, r0, c0, l); },
      [&](int r0, int c0, int l, std::uint32_t* w) { flash_load_a(t, kLd, r0, c0, l, w); });
  check(
      std::false_type{}, [&](int n0, int k0, int l) { return flash_ldm_bt_row(t, kLd, n0, k0, l); },
      [&](int n0, int k0, int l, std::uint32_t* w) {
        flash_load_b_transposed(t, kLd, n0, k0, l, w);
        flash_load_b_transposed(t, kLd, n0 + 8, k0, l, w + 2);
      });
  check(
      std::true_type{}, [&](int k0, int n0, int l) { return flash_ldm_b_row(t, kLd, k0, n0, l); },
      [&](int k0, int n0, int l, std::uint32_t* w) {
        flash_load_b(t, kLd, k0, n0, l, w);
        flash_load_b(t, kLd, k0, n0 + 8, l, w + 2);
      });
  BOOST_TEST(mismatches == 0);
  // Each row address starts a 16-byte row of the tile.
  for (int l = 0; l < 32; ++l) {
    const auto at = [&](const bf16* p) { return (p - t) * 2 % 16; };
    BOOST_TEST(at(flash_ldm_a_row(t, kLd, 16, 32, l)) == 0);
    BOOST_TEST(at(flash_ldm_bt_row(t, kLd, 16, 32, l)) == 0);
    BOOST_TEST(at(flash_ldm_b_row(t, kLd, 16, 32, l)) == 0);
  }
}

BOOST_AUTO_TEST_CASE(host_emulation_matches_the_float64_reference) {
  auto gen = zrt::test::fresh_generator();
  struct Shape3 {
    std::int64_t batch, seq, heads;
  };
  for (const Shape3& s :
       {Shape3{1, 1, 1}, Shape3{2, 7, 2}, Shape3{1, 64, 1}, Shape3{1, 65, 3}, Shape3{2, 150, 2}}) {
    BOOST_TEST_CONTEXT("B " << s.batch << " T " << s.seq << " H " << s.heads) {
      BOOST_TEST_CONTEXT("bf16 hd 16") { check_flash<bf16, 16>(s.batch, s.seq, s.heads, gen); }
      BOOST_TEST_CONTEXT("f16 hd 32") { check_flash<f16, 32>(s.batch, s.seq, s.heads, gen); }
      BOOST_TEST_CONTEXT("bf16 hd 64") { check_flash<bf16, 64>(s.batch, s.seq, s.heads, gen); }
    }
  }
  BOOST_TEST_CONTEXT("bf16 hd 128, T 130") { check_flash<bf16, 128>(1, 130, 2, gen); }
  BOOST_TEST_CONTEXT("f16 hd 128, T 64") { check_flash<f16, 128>(1, 64, 1, gen); }
}

BOOST_AUTO_TEST_SUITE_END()
