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
  int mismatches = 0;
  auto expect = [&](const std::uint32_t(*got)[4], const std::uint32_t(*want)[4], int regs) {
    for (int l = 0; l < 32; ++l)
      for (int r = 0; r < regs; ++r) mismatches += got[l][r] != want[l][r];
  };
  for (int row0 = 0; row0 < 64; row0 += 16)
    for (int col0 = 0; col0 < kHd; col0 += 16) {
      std::uint32_t got[32][4], want[32][4];
      FlashHostWarp::ldmatrix_x4<false, bf16>(
          [&](int l) { return flash_ldm_a_row(tile.data(), kLd, row0, col0, l); },
          [&](int l) { return got[l]; });
      for (int l = 0; l < 32; ++l) flash_load_a(tile.data(), kLd, row0, col0, l, want[l]);
      expect(got, want, 4);
    }
  for (int n0 = 0; n0 < 64; n0 += 16)
    for (int k0 = 0; k0 < kHd; k0 += 16) {
      std::uint32_t got[32][4], want[32][4];
      FlashHostWarp::ldmatrix_x4<false, bf16>(
          [&](int l) { return flash_ldm_bt_row(tile.data(), kLd, n0, k0, l); },
          [&](int l) { return got[l]; });
      for (int l = 0; l < 32; ++l) {
        flash_load_b_transposed(tile.data(), kLd, n0, k0, l, want[l]);
        flash_load_b_transposed(tile.data(), kLd, n0 + 8, k0, l, want[l] + 2);
      }
      expect(got, want, 4);
    }
  for (int k0 = 0; k0 < 64; k0 += 16)
    for (int n0 = 0; n0 < kHd; n0 += 16) {
      std::uint32_t got[32][4], want[32][4];
      FlashHostWarp::ldmatrix_x4<true, bf16>(
          [&](int l) { return flash_ldm_b_row(tile.data(), kLd, k0, n0, l); },
          [&](int l) { return got[l]; });
      for (int l = 0; l < 32; ++l) {
        flash_load_b(tile.data(), kLd, k0, n0, l, want[l]);
        flash_load_b(tile.data(), kLd, k0, n0 + 8, l, want[l] + 2);
      }
      expect(got, want, 4);
    }
  BOOST_TEST(mismatches == 0);
  // Each row address starts a 16-byte row of the tile.
  for (int l = 0; l < 32; ++l) {
    const auto at = [&](const bf16* p) { return (p - tile.data()) * 2 % 16; };
    BOOST_TEST(at(flash_ldm_a_row(tile.data(), kLd, 16, 32, l)) == 0);
    BOOST_TEST(at(flash_ldm_bt_row(tile.data(), kLd, 16, 32, l)) == 0);
    BOOST_TEST(at(flash_ldm_b_row(tile.data(), kLd, 16, 32, l)) == 0);
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
