// Data sets and the data order: hand-worked sequence starts and rows for
// several steps, ranks and micro-batches; file formats and their errors;
// the generated data sets.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/model_zoo/models/temp_dir.h"
#include "tests/support/expect_throw.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/data/data_files.h"
#include "zrt/model_zoo/data/micro_batch.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;

namespace {

Dataset counting_tokens(std::int64_t len) {  // token i = 100 + i
  Dataset d;
  d.tokens = Tensor::empty({len}, DType::i32);
  for (std::int64_t i = 0; i < len; ++i)
    d.tokens.data<std::int32_t>()[i] = static_cast<std::int32_t>(100 + i);
  d.vocab_size = static_cast<std::int64_t>(100 + len);
  d.source = "counting";
  return d;
}

std::vector<double> row(const Tensor& t, std::int64_t i) { return t.narrow(i, 1).to_doubles(); }

void write_llmc(const std::string& path, std::int32_t magic, std::int32_t version,
                std::int32_t count, const std::vector<std::uint16_t>& tokens) {
  std::vector<std::int32_t> header(256, 0);
  header[0] = magic, header[1] = version, header[2] = count;
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(tokens.data()),
          static_cast<std::streamsize>(2 * tokens.size()));
}

template <class F>
void check_arg_error(F f, const std::string& needle) {
  zrt::test::expect_throw<InvalidArgument>(f, needle);
}

}  // namespace

BOOST_AUTO_TEST_CASE(token_order_is_hand_worked) {
  // len 20, T 3: span = 20 - 3 = 17 windows; B = 4.
  const Dataset d = counting_tokens(20);
  // step 0: j·3 = 0, 3, 6, 9; step 1: (4 + j)·3 mod 17 = 12, 15, 1, 4; step 5: 60.. mod 17 = 9, 12, 15, 1.
  BOOST_TEST(sequence_start(0, 3, 4, 3, 20) == 9);
  BOOST_TEST(sequence_start(1, 0, 4, 3, 20) == 12);
  BOOST_TEST(sequence_start(1, 2, 4, 3, 20) == 1);
  BOOST_TEST(sequence_start(5, 3, 4, 3, 20) == 1);
  BOOST_TEST(sequence_start(1000000007, 1, 4, 3, 20) == ((1000000007ll * 4 + 1) * 3) % 17);
  // W 2, M 2: one sequence per micro-batch; rank 1 micro 0 holds j = 2.
  const Batch b = make_micro_batch(d, 1, {4, 3, 2, 2}, 1, 0);
  BOOST_TEST((b.inputs.shape() == Shape{1, 3}));
  BOOST_TEST((b.inputs.dtype() == DType::i32 && b.targets.dtype() == DType::i32));
  BOOST_TEST(b.inputs.to_doubles() == std::vector<double>({101, 102, 103}),
             boost::test_tools::per_element());
  BOOST_TEST(b.targets.to_doubles() == std::vector<double>({102, 103, 104}),
             boost::test_tools::per_element());
  BOOST_TEST(b.normaliser == 12.0);
  // W 1, M 2: micro 1 holds j = 2, 3 → starts 1 and 4 at step 1.
  const Batch m = make_micro_batch(d, 1, 4, 3, 1, 0, 2, 1);
  BOOST_TEST(row(m.inputs, 0) == std::vector<double>({101, 102, 103}),
             boost::test_tools::per_element());
  BOOST_TEST(row(m.inputs, 1) == std::vector<double>({104, 105, 106}),
             boost::test_tools::per_element());
  // Shortest legal data: len = T + 1, one window: every sequence starts at 0.
  const Batch s = make_micro_batch(counting_tokens(4), 7, {2, 3, 1, 1}, 0, 0);
  BOOST_TEST(row(s.targets, 1) == std::vector<double>({101, 102, 103}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_token_is_a_target_but_the_tail_a_shared_factor_leaves) {
  // A file of N·T + 1 tokens (llm.c's layout) is read whole by its first N
  // sequences: the last token is a target (the modulus was one short of the
  // window count, which left the whole last sequence unread).
  for (std::int64_t n : {2, 3, 7}) {
    const std::int64_t T = 16, len = n * T + 1;
    BOOST_TEST(sequence_start(0, n - 1, n, T, len) == (n - 1) * T);
    BOOST_TEST(tail_never_a_target(T, len) == 0);
  }
  // Any length: the tokens some window has as a target, over every start
  // the order makes, are [1, len - 1 - tail_never_a_target].
  std::mt19937_64 rng(zrt::test::test_seed("every_token_is_a_target"));
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t T = std::uniform_int_distribution<std::int64_t>(1, 24)(rng);
    const std::int64_t len = T + std::uniform_int_distribution<std::int64_t>(1, 80)(rng);
    std::vector<bool> target(static_cast<std::size_t>(len), false);
    for (std::int64_t k = 0; k < len - T; ++k) {
      const std::int64_t start = sequence_start(0, k, 1, T, len);
      BOOST_TEST_REQUIRE((start >= 0 && start + T < len));
      for (std::int64_t t = 1; t <= T; ++t) target[static_cast<std::size_t>(start + t)] = true;
    }
    const std::int64_t last = len - 1 - tail_never_a_target(T, len);
    for (std::int64_t i = 1; i < len; ++i)
      BOOST_TEST(target[static_cast<std::size_t>(i)] == (i <= last),
                 "T " << T << ", len " << len << ", token " << i);
  }
}

BOOST_AUTO_TEST_CASE(row_order_is_hand_worked) {
  Dataset d;
  d.kind = Dataset::Kind::rows;
  d.x = Tensor::empty({5, 3}, DType::f32);
  d.y = Tensor::empty({5}, DType::i64);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) d.x.set_item(i * 3 + j, 10 * i + j);
    d.y.set_item(i, 4 - i);
  }
  d.n_classes = 5;
  // N 5, B 4, step 1: rows (4 + j) mod 5 = 4, 0, 1, 2; rank 1 of 2 gets j = 2, 3 → rows 1, 2.
  const Batch b = make_micro_batch(d, 1, {4, 0, 2, 1}, 1, 0);
  BOOST_TEST((b.inputs.shape() == Shape{2, 3}));
  BOOST_TEST(row(b.inputs, 0) == std::vector<double>({10, 11, 12}),
             boost::test_tools::per_element());
  BOOST_TEST(row(b.inputs, 1) == std::vector<double>({20, 21, 22}),
             boost::test_tools::per_element());
  BOOST_TEST(b.targets.to_doubles() == std::vector<double>({3, 2}),
             boost::test_tools::per_element());
  BOOST_TEST((b.targets.dtype() == DType::i64));
  BOOST_TEST(b.normaliser == 4.0);
  const Batch r0 = make_micro_batch(d, 1, {4, 0, 2, 1}, 0, 0);
  BOOST_TEST(r0.targets.to_doubles() == std::vector<double>({0, 4}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_geometry_is_named) {
  const Dataset d = counting_tokens(20);
  check_arg_error([&] { make_micro_batch(d, 0, {6, 3, 2, 2}, 0, 0); }, "not divisible");
  // 20 tokens hold one window of T 19, none of T 20.
  check_arg_error(
      [&] {
        make_micro_batch(d, 0, {4, 20, 1, 1}, 0, 0);
      },
      "too long for data counting of 20 tokens (needs at least seq_len + 1)");
  check_arg_error([&] { make_micro_batch(d, 0, {4, 0, 1, 1}, 0, 0); }, "sequence length");
  check_arg_error([&] { make_micro_batch(d, 0, {4, 3, 2, 1}, 2, 0); }, "rank 2");
  check_arg_error([&] { make_micro_batch(d, 0, {4, 3, 2, 1}, 0, 1); }, "micro-batch 1");
  check_arg_error([&] { make_micro_batch(d, 0, {0, 3, 1, 1}, 0, 0); }, "positive");
}

BOOST_AUTO_TEST_CASE(llmc_token_files) {
  TempDir dir("data");
  const std::string ok = dir.file("ok.bin");
  write_llmc(ok, 20240520, 1, 4, {7, 65535, 0, 300});
  const Dataset d = load_dataset(ok);
  BOOST_TEST(d.tokens.to_doubles() == std::vector<double>({7, 65535, 0, 300}),
             boost::test_tools::per_element());
  BOOST_TEST(d.vocab_size == 65536);
  // Note [Host memory in the plan]: what it holds, from the header alone.
  BOOST_TEST(data_file_memory_bytes(ok) == d.nbytes());
  BOOST_TEST(d.nbytes() == 16u);
  write_llmc(dir.file("magic.bin"), 1234, 1, 4, {1, 2, 3, 4});
  check_arg_error([&] { load_llmc_tokens(dir.file("magic.bin")); }, "magic 1234");
  check_arg_error([&] { data_file_memory_bytes(dir.file("magic.bin")); }, "magic 1234");
  write_llmc(dir.file("version.bin"), 20240520, 2, 4, {1, 2, 3, 4});
  check_arg_error([&] { load_llmc_tokens(dir.file("version.bin")); }, "version 2");
  write_llmc(dir.file("short.bin"), 20240520, 1, 5, {1, 2, 3, 4});
  check_arg_error([&] { load_llmc_tokens(dir.file("short.bin")); }, "declares 5 tokens");
  check_arg_error([&] { data_file_memory_bytes(dir.file("short.bin")); }, "declares 5 tokens");
  std::ofstream(dir.file("empty.bin")).close();
  check_arg_error([&] { load_dataset(dir.file("empty.bin")); }, "empty");
  check_arg_error([&] { load_dataset(dir.file("missing.txt")); }, "missing");
  check_arg_error([&] { data_file_memory_bytes(dir.file("empty.bin")); }, "empty");
  check_arg_error([&] { data_file_memory_bytes(dir.file("missing.txt")); }, "missing");
  std::ofstream(dir.file("tiny.bin"), std::ios::binary) << "abc";
  check_arg_error([&] { load_llmc_tokens(dir.file("tiny.bin")); }, "truncated");
}

// Note [Data read in chunks]: files larger than a read chunk (1 MiB) come
// through whole, chunk boundaries and odd tails included.
BOOST_AUTO_TEST_CASE(files_larger_than_a_chunk_read_whole) {
  TempDir dir("data_chunks");
  const std::uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("seed " << seed);
  std::mt19937_64 gen(seed);
  std::string text((std::size_t{1} << 21) + 3, '\0');
  for (char& c : text) c = static_cast<char>(1 + gen() % 199);  // text: no NUL byte
  text[(std::size_t{1} << 20) + 1] = static_cast<char>(211);    // the largest, in the second chunk
  std::ofstream(dir.file("big.txt"), std::ios::binary) << text;
  const Dataset t = load_dataset(dir.file("big.txt"));
  BOOST_TEST_REQUIRE(t.tokens.numel() == static_cast<std::int64_t>(text.size()));
  const std::int32_t* got = t.tokens.data<std::int32_t>();
  for (std::size_t i = 0; i < text.size(); ++i)
    BOOST_TEST_REQUIRE(got[i] == static_cast<unsigned char>(text[i]));
  BOOST_TEST(t.vocab_size == 212);

  std::vector<std::uint16_t> tokens((std::size_t{1} << 19) + 7);
  for (std::uint16_t& v : tokens) v = static_cast<std::uint16_t>(gen());
  write_llmc(dir.file("big.bin"), 20240520, 1, static_cast<std::int32_t>(tokens.size()), tokens);
  const Dataset l = load_dataset(dir.file("big.bin"));
  BOOST_TEST_REQUIRE(l.tokens.numel() == static_cast<std::int64_t>(tokens.size()));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    BOOST_TEST_REQUIRE(l.tokens.data<std::int32_t>()[i] == tokens[i]);
  BOOST_TEST(l.vocab_size == *std::max_element(tokens.begin(), tokens.end()) + 1);
}

// Note [Data file formats]: a NUL byte, which no text holds, is refused in
// a text file: headerless uint16 tokens trained one token a byte before.
BOOST_AUTO_TEST_CASE(a_text_file_with_a_nul_byte_is_refused) {
  TempDir dir("data_nul");
  const std::vector<std::uint16_t> tokens = {300, 7, 42};
  std::ofstream(dir.file("tokens.dat"), std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), 6);
  check_arg_error([&] { load_dataset(dir.file("tokens.dat")); },
                  "tokens.dat holds a NUL byte (at byte 3), which no text does");
}

// Note [Data file formats]: .BIN is .bin; llm.c's magic makes any other
// name a token file too, so its header never trains as text.
BOOST_AUTO_TEST_CASE(llmc_files_by_any_name) {
  TempDir dir("data_names");
  for (const char* name : {"t.BIN", "tokens.dat", "tokens"}) {
    write_llmc(dir.file(name), 20240520, 1, 3, {9, 500, 2});
    const Dataset d = load_dataset(dir.file(name));
    BOOST_TEST(d.tokens.to_doubles() == std::vector<double>({9, 500, 2}),
               boost::test_tools::per_element());
    BOOST_TEST(data_file_memory_bytes(dir.file(name)) == d.nbytes());
  }
  write_llmc(dir.file("v2.dat"), 20240520, 2, 3, {9, 500, 2});
  check_arg_error([&] { load_dataset(dir.file("v2.dat")); }, "version 2");
  // Text whose bytes stay below 256 fits a model of as many tokens as it uses.
  std::ofstream(dir.file("a.txt"), std::ios::binary) << std::string(40, 'a');
  const Dataset a = load_dataset(dir.file("a.txt"));
  BOOST_TEST(a.vocab_size == 'a' + 1);
  ModelConfig gpt;
  gpt.vocab_size = 'a' + 1;
  BOOST_CHECK_NO_THROW(check_dataset_fits_model(a, gpt));
  gpt.vocab_size = 'a';
  check_arg_error([&] { check_dataset_fits_model(a, gpt); }, "tokens up to 97");
}

BOOST_AUTO_TEST_CASE(text_and_row_files) {
  TempDir dir("data_rows");
  {
    std::ofstream f(dir.file("t.txt"), std::ios::binary);
    f << "Hi\n" << '\xff';
  }
  const Dataset t = load_dataset(dir.file("t.txt"));
  BOOST_TEST(t.tokens.to_doubles() == std::vector<double>({72, 105, 10, 255}),
             boost::test_tools::per_element());
  BOOST_TEST(t.vocab_size == 256);
  BOOST_TEST(data_file_memory_bytes(dir.file("t.txt")) == t.nbytes());
  BOOST_TEST(t.nbytes() == 16u);

  const Dataset c = synthetic_cluster_dataset(3, 37, 5, 4);
  write_safetensors(dir.file("rows.safetensors"), {{"x", c.x}, {"y", c.y}});
  const Dataset r = load_dataset(dir.file("rows.safetensors"));
  BOOST_TEST((r.kind == Dataset::Kind::rows));
  BOOST_TEST(r.x.to_doubles() == c.x.to_doubles(), boost::test_tools::per_element());
  BOOST_TEST(r.y.to_doubles() == c.y.to_doubles(), boost::test_tools::per_element());
  BOOST_TEST(data_file_memory_bytes(dir.file("rows.safetensors")) == r.nbytes());
  BOOST_TEST(r.nbytes() == 37u * 5 * 4 + 37 * 8);
  ModelConfig mlp;
  mlp.kind = "mlp";
  mlp.d_in = 5;
  mlp.n_classes = 4;
  BOOST_CHECK_NO_THROW(check_dataset_fits_model(r, mlp));
  mlp.d_in = 6;
  check_arg_error([&] { check_dataset_fits_model(r, mlp); }, "d_in 5");
  ModelConfig gpt;
  check_arg_error([&] { check_dataset_fits_model(r, gpt); }, "gpt");
  gpt.vocab_size = 100;
  check_arg_error([&] { check_dataset_fits_model(t, gpt); }, "vocab_size");

  write_safetensors(dir.file("bad.safetensors"), {{"x", c.x}, {"y", c.x}});
  check_arg_error([&] { load_row_dataset(dir.file("bad.safetensors")); }, "y");
  // The plan's size check refuses what training would, from the header alone.
  check_arg_error([&] { data_file_memory_bytes(dir.file("bad.safetensors")); }, "must be i64 [37]");
  write_safetensors(dir.file("x-i64.safetensors"), {{"x", c.y}, {"y", c.y}});
  check_arg_error([&] { load_row_dataset(dir.file("x-i64.safetensors")); },
                  "must be f32 [N, d_in]");
  check_arg_error([&] { data_file_memory_bytes(dir.file("x-i64.safetensors")); },
                  "must be f32 [N, d_in]");
  write_safetensors(dir.file("none.safetensors"), {{"x", c.x}});
  check_arg_error([&] { load_row_dataset(dir.file("none.safetensors")); }, "'x' and 'y'");
  check_arg_error([&] { data_file_memory_bytes(dir.file("none.safetensors")); }, "'x' and 'y'");
  write_safetensors(dir.file("extra.safetensors"), {{"x", c.x}, {"y", c.y}, {"mask", c.y}});
  check_arg_error([&] { load_row_dataset(dir.file("extra.safetensors")); },
                  "tensors zrt does not read ('mask')");
  check_arg_error([&] { data_file_memory_bytes(dir.file("extra.safetensors")); },
                  "tensors zrt does not read ('mask')");

  // A rows file under another name whose header length is damaged past the
  // file's end is still a rows file, refused with the damage named (the
  // path once), not trained on as text.
  std::filesystem::copy_file(dir.file("rows.safetensors"), dir.file("rows.dat"));
  {
    std::fstream f(dir.file("rows.dat"), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(3);
    f.put('\x7f');  // a length of about 2 GB
  }
  for (auto* call : {+[](const std::string& p) { (void)load_dataset(p); },
                     +[](const std::string& p) { (void)data_file_memory_bytes(p); }}) {
    std::string said;
    try {
      call(dir.file("rows.dat"));
    } catch (const InvalidArgument& e) {
      said = e.what();
    }
    const std::string path = dir.file("rows.dat");
    BOOST_TEST(said.starts_with("data file " + path + ": "), said);
    BOOST_TEST(said.find(path, said.find(path) + 1) == std::string::npos, said);
  }
}

BOOST_AUTO_TEST_CASE(generated_data_sets) {
  const std::string a = synthetic_text(0), b = synthetic_text(0), c = synthetic_text(1);
  BOOST_TEST(a.size() >= 20u * 1024u);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  for (char ch : a) BOOST_TEST_REQUIRE(((ch >= ' ' && ch <= '~') || ch == '\n'));
  BOOST_TEST(a.find(". ") != std::string::npos);
  const Dataset t = synthetic_text_dataset(0);
  BOOST_TEST(t.tokens.numel() == static_cast<std::int64_t>(a.size()));

  const Dataset d = synthetic_cluster_dataset();
  BOOST_TEST((d.x.shape() == Shape{4096, 16}));
  BOOST_TEST(d.n_classes == 8);
  // Learnable: nearest class mean classifies most rows right, but not all.
  std::vector<double> mean(8 * 16, 0.0), count(8, 0.0);
  const float* x = d.x.data<float>();
  const std::int64_t* y = d.y.data<std::int64_t>();
  for (int i = 0; i < 4096; ++i) {
    BOOST_TEST_REQUIRE((y[i] >= 0 && y[i] < 8));
    count[y[i]] += 1;
    for (int j = 0; j < 16; ++j) mean[y[i] * 16 + j] += x[i * 16 + j];
  }
  for (int k = 0; k < 8; ++k) {
    BOOST_TEST(count[k] > 300);
    for (int j = 0; j < 16; ++j) mean[k * 16 + j] /= count[k];
  }
  int right = 0;
  for (int i = 0; i < 4096; ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int k = 0; k < 8; ++k) {
      double dist = 0;
      for (int j = 0; j < 16; ++j) dist += std::pow(x[i * 16 + j] - mean[k * 16 + j], 2);
      if (dist < best_d) best_d = dist, best = k;
    }
    right += best == y[i];
  }
  BOOST_TEST(right > 4096 * 0.7);
  const Dataset e = synthetic_cluster_dataset();
  BOOST_TEST(e.x.to_doubles() == d.x.to_doubles(), boost::test_tools::per_element());
}
