// Note [Device id checks] on the host: a flag's words decoded and turned into
// the typed error, its argument checks, and the CPU ops unchanged by a flag
// (the same outputs bit for bit with good ids, the host check's
// InvalidArgument with a bad one; the flag stays zero, as the CPU twins never
// write it). The device side is in test_nn_kernels_gpu.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/embedding.h"
#include "zrt/kernels/nn/id_check.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

// The words record_bad_id leaves after recording (position, id) once.
Tensor flag_of(std::int64_t count, std::int64_t position, std::int32_t id, unsigned sources) {
  const std::uint64_t key = (std::uint64_t(0x7fffffff - position) << 32) | std::uint32_t(id);
  std::vector<std::int64_t> w{count, static_cast<std::int64_t>(key), std::int64_t(sources)};
  return Tensor::from_host(w.data(), {kIdFlagWords}, DType::i64);
}

bool says(const InvalidArgument& e, const std::string& part) {
  return std::string(e.what()).find(part) != std::string::npos;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  return x == y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(decode_flag_words) {
  const Tensor f = flag_of(4, 17, -3, unsigned(IdSource::token) | unsigned(IdSource::target));
  const BadIds b = decode_id_flag(f.data<std::int64_t>());
  BOOST_TEST(b.count == 4);
  BOOST_TEST(b.position == 17);
  BOOST_TEST(b.id == -3);
  BOOST_TEST(b.sources == 3u);
  const Tensor zero = Tensor::zeros({kIdFlagWords}, DType::i64);
  BOOST_TEST(decode_id_flag(zero.data<std::int64_t>()).count == 0);
}

// Every rank's flag, rank after rank, as the engine gathers them.
Tensor flags_of(const std::vector<Tensor>& per_rank) {
  std::vector<std::int64_t> w;
  for (const Tensor& f : per_rank)
    w.insert(w.end(), f.data<std::int64_t>(), f.data<std::int64_t>() + kIdFlagWords);
  return Tensor::from_host(w.data(), {static_cast<std::int64_t>(w.size())}, DType::i64);
}

// Counts add, kinds unite, and the first bad id is the smallest position
// over the ranks, with its rank: what no single reduction op gives.
BOOST_AUTO_TEST_CASE(flags_of_several_ranks_combine) {
  const Tensor none = Tensor::zeros({kIdFlagWords}, DType::i64);
  const Tensor all = flags_of({none, flag_of(2, 9, 61, unsigned(IdSource::token)), none,
                               flag_of(3, 4, -7, unsigned(IdSource::target)),
                               flag_of(1, 4, 99, unsigned(IdSource::token))});
  const BadIds b = combine_id_flags(all.data<std::int64_t>(), 5);
  BOOST_TEST(b.count == 6);
  BOOST_TEST(b.sources == 3u);
  BOOST_TEST(b.position == 4);
  BOOST_TEST(b.id == -7);
  BOOST_TEST(b.rank == 3);  // the lowest rank of the two at position 4
  BOOST_CHECK_EXCEPTION(throw_if_bad_ids(all, 50), InvalidArgument, [](const InvalidArgument& e) {
    return says(e, "6 failed checks in token ids and targets") && says(e, "id -7 at position 4") &&
           says(e, "on rank 3");
  });
  BOOST_CHECK_NO_THROW(throw_if_bad_ids(flags_of({none, none, none}), 50));
  BOOST_TEST(combine_id_flags(flags_of({none, none}).data<std::int64_t>(), 2).count == 0);
}

BOOST_AUTO_TEST_CASE(error_from_flag) {
  BOOST_CHECK_NO_THROW(throw_if_bad_ids(Tensor::zeros({kIdFlagWords}, DType::i64), 50));
  BOOST_CHECK_EXCEPTION(throw_if_bad_ids(flag_of(2, 3, 77, unsigned(IdSource::token)), 50),
                        InvalidArgument, [](const InvalidArgument& e) {
                          return says(e, "token id out of range [0, 50)") && says(e, "id 77") &&
                                 says(e, "position 3") && says(e, "token ids") &&
                                 says(e, "2 failed");
                        });
  BOOST_CHECK_EXCEPTION(throw_if_bad_ids(flag_of(1, 0, 50, unsigned(IdSource::target)), 50),
                        InvalidArgument,
                        [](const InvalidArgument& e) { return says(e, "in targets"); });
  // Not host i64 flags of kIdFlagWords words each.
  BOOST_CHECK_THROW(throw_if_bad_ids(Tensor::zeros({2}, DType::i64), 50), InvalidArgument);
  BOOST_CHECK_THROW(throw_if_bad_ids(Tensor::zeros({kIdFlagWords + 1}, DType::i64), 50),
                    InvalidArgument);
  BOOST_CHECK_THROW(throw_if_bad_ids(Tensor::zeros({0}, DType::i64), 50), InvalidArgument);
  BOOST_CHECK_THROW(throw_if_bad_ids(Tensor::zeros({kIdFlagWords}, DType::i32), 50),
                    InvalidArgument);
}

BOOST_AUTO_TEST_CASE(flag_arguments) {
  const Tensor flag = new_id_flag(Device::cpu());
  BOOST_TEST(flag.dtype() == DType::i64);
  BOOST_TEST(flag.numel() == kIdFlagWords);
  BOOST_TEST(flag.to_doubles() == std::vector<double>(kIdFlagWords, 0.0));
  Tensor ids = Tensor::from_doubles({1, 0, 2}, DType::i32, Device::cpu(), {1, 3});
  Tensor wte = Tensor::full({3, 2}, 1.0, DType::f32), out = Tensor::empty({1, 3, 2}, DType::f32);
  const Tensor bad_flag = Tensor::zeros({kIdFlagWords}, DType::i32);
  BOOST_CHECK_EXCEPTION(embedding_forward(ids, wte, nullptr, out, {}, &bad_flag), InvalidArgument,
                        [](const InvalidArgument& e) { return says(e, "id flag"); });
  // Positions for fewer tokens than a sequence holds: the message says whose length.
  const Tensor wpe = Tensor::full({2, 2}, 1.0, DType::f32);
  BOOST_CHECK_EXCEPTION(embedding_forward(ids, wte, &wpe, out), InvalidArgument,
                        [](const InvalidArgument& e) {
                          return says(e, "with P >= 3, the sequence length of ") &&
                                 says(e,
                                      "(a position table of P rows holds sequences of up to P "
                                      "tokens)");
                        });
}

BOOST_AUTO_TEST_CASE(cpu_embedding_with_flag) {
  // ids with repeats, V = 7 > the ids' range; the flag changes nothing on the CPU.
  Tensor ids = Tensor::from_doubles({4, 1, 1, 0, 6, 1, 2, 4, 4}, DType::i64, Device::cpu(), {3, 3});
  Tensor wte =
      Tensor::from_doubles(std::vector<double>(35, 0.0), DType::f32, Device::cpu(), {7, 5});
  Tensor wpe =
      Tensor::from_doubles(std::vector<double>(20, 0.0), DType::f32, Device::cpu(), {4, 5});
  float* pw = wte.data<float>();
  for (int i = 0; i < 35; ++i) pw[i] = 0.25f * float(i) - 3.0f;
  float* pp = wpe.data<float>();
  for (int i = 0; i < 20; ++i) pp[i] = 0.5f - 0.125f * float(i);
  Tensor dout = Tensor::empty({3, 3, 5}, DType::f32);
  for (int i = 0; i < 45; ++i) dout.data<float>()[i] = 0.1f * float(i % 7) - 0.3f;
  const Tensor flag = new_id_flag(Device::cpu());
  Tensor out0 = Tensor::empty({3, 3, 5}, DType::f32), out1 = Tensor::empty({3, 3, 5}, DType::f32);
  embedding_forward(ids, wte, &wpe, out0);
  embedding_forward(ids, wte, &wpe, out1, {}, &flag);
  BOOST_TEST(same_bits(out0, out1));
  Tensor g0 = Tensor::empty({7, 5}, DType::f32), g1 = Tensor::empty({7, 5}, DType::f32);
  Tensor p0 = Tensor::empty({4, 5}, DType::f32), p1 = Tensor::empty({4, 5}, DType::f32);
  embedding_backward(ids, dout, g0, &p0, false);
  embedding_backward(ids, dout, g1, &p1, false, {}, &flag);
  BOOST_TEST(same_bits(g0, g1));
  BOOST_TEST(same_bits(p0, p1));
  BOOST_TEST(flag.to_doubles() == std::vector<double>(kIdFlagWords, 0.0));
  // A bad id still throws the host check's error on the CPU, flag or not.
  Tensor bad = Tensor::from_doubles({4, 1, 7, 0, 6, 1, 2, 4, 4}, DType::i64, Device::cpu(), {3, 3});
  for (const Tensor* f : {static_cast<const Tensor*>(nullptr), &flag}) {
    BOOST_CHECK_EXCEPTION(embedding_forward(bad, wte, &wpe, out1, {}, f), InvalidArgument,
                          [](const InvalidArgument& e) { return says(e, "id 7 at position 2"); });
    BOOST_CHECK_EXCEPTION(embedding_backward(bad, dout, g1, &p1, true, {}, f), InvalidArgument,
                          [](const InvalidArgument& e) { return says(e, "id 7 at position 2"); });
  }
  BOOST_TEST(flag.to_doubles() == std::vector<double>(kIdFlagWords, 0.0));
}

BOOST_AUTO_TEST_CASE(cpu_cross_entropy_with_flag) {
  const std::int64_t rows = 5, vocab = 6;
  std::vector<double> lv(static_cast<std::size_t>(rows * vocab));
  for (std::size_t i = 0; i < lv.size(); ++i) lv[i] = 0.37 * double(i % 11) - 1.1;
  Tensor logits = Tensor::from_doubles(lv, DType::f32, Device::cpu(), {rows, vocab});
  Tensor targets = Tensor::from_doubles({0, 5, -1, 3, 2}, DType::i32);
  const Tensor flag = new_id_flag(Device::cpu());
  auto run = [&](const Tensor& t, const Tensor* f) {
    Tensor losses = Tensor::empty({rows}, DType::f32), lse = Tensor::empty({rows}, DType::f32);
    Tensor loss = Tensor::empty({1}, DType::f32),
           dlogits = Tensor::empty({rows, vocab}, DType::f32);
    cross_entropy_forward(logits, t, 4.0, losses, lse, loss, {}, f);
    cross_entropy_backward(logits, t, lse, 1.0, 4.0, dlogits, {}, f);
    return std::make_pair(loss, dlogits);
  };
  auto [l0, d0] = run(targets, nullptr);
  auto [l1, d1] = run(targets, &flag);
  BOOST_TEST(same_bits(l0, l1));
  BOOST_TEST(same_bits(d0, d1));
  Tensor bad = Tensor::from_doubles({0, 6, -1, 3, 2}, DType::i32);
  BOOST_CHECK_EXCEPTION(run(bad, &flag), InvalidArgument,
                        [](const InvalidArgument& e) { return says(e, "id 6 at position 1"); });
  BOOST_TEST(flag.to_doubles() == std::vector<double>(kIdFlagWords, 0.0));
}
