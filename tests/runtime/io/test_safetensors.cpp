// safetensors: round trips of every dtype (odd and empty shapes, metadata),
// the f32 default for floating tensors, byte layout, typed errors for bad
// files, atomic writes, streamed writes (model parameter loading: tests/model_zoo/io/).
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "tests/support/test_seed.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/io/safetensors_writer.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;

namespace {

// A file with the given JSON header and `data_bytes` bytes of data.
std::vector<std::uint8_t> file_with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<std::uint8_t> b(8 + header.size() + data_bytes, 0x5a);
  const std::uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

void check_checkpoint_error(const std::vector<std::uint8_t>& bytes, const std::string& needle) {
  try {
    parse_safetensors(bytes, "case.safetensors");
    BOOST_ERROR("expected a CheckpointError naming '" << needle << "'");
  } catch (const CheckpointError& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos,
               "'" << e.what() << "' does not name '" << needle << "'");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_every_dtype) {
  std::mt19937 gen(1);
  TempDir dir("st");
  std::map<std::string, Tensor> t;
  for (DType d : kAllDTypes) {
    const double lo = is_floating(d) ? -3.0 : 0.0, hi = is_floating(d) ? 3.0 : 200.0;
    Tensor x = random_tensor({3, 2 * 8 + 7}, DType::f64, gen, lo, hi);
    Tensor y = Tensor::empty(x.shape(), d);
    y.copy_(is_floating(d) ? x : x.to(DType::i64));  // integers: truncated values
    t[std::string("t_") + dtype_name(d)] = y;
  }
  t["empty"] = Tensor::empty({0, 3}, DType::f32);
  t["scalar1"] = Tensor::full({1}, 2.5, DType::f32);
  const std::string path = dir.file("a.safetensors");
  write_safetensors(path, t, {{"format", "pt"}, {"step", "12"}}, {.keep_float_dtypes = true});
  const SafetensorsFile f = read_safetensors(path);
  BOOST_TEST(f.metadata.at("step") == "12");
  BOOST_REQUIRE_EQUAL(f.tensors.size(), t.size());
  for (const auto& [k, v] : t) {
    const Tensor& r = f.tensors.at(k);
    BOOST_TEST((r.dtype() == v.dtype()), k);
    BOOST_TEST((r.shape() == v.shape()), k);
    BOOST_TEST(max_abs_diff(r, v) == 0.0, k);
  }
  // Data starts 8-byte aligned after the header.
  std::ifstream in(path, std::ios::binary);
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  BOOST_TEST(n % 8 == 0u);
}

BOOST_AUTO_TEST_CASE(floating_tensors_default_to_f32) {
  std::mt19937 gen(2);
  Tensor b = random_tensor({9}, DType::bf16, gen);
  Tensor i = Tensor::from_doubles({1, -2, 3}, DType::i64);
  const auto f = parse_safetensors(serialize_safetensors({{"b", b}, {"i", i}}));
  BOOST_TEST((f.tensors.at("b").dtype() == DType::f32));
  BOOST_TEST((f.tensors.at("i").dtype() == DType::i64));
  BOOST_TEST(max_abs_diff(f.tensors.at("b"), b) == 0.0);  // bf16 → f32 is exact
  BOOST_TEST(max_abs_diff(f.tensors.at("i"), i) == 0.0);
}

BOOST_AUTO_TEST_CASE(bad_files_give_checkpoint_errors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  BOOST_CHECK_NO_THROW(parse_safetensors(file_with_header(ok, 24)));
  check_checkpoint_error({1, 2, 3}, "truncated");
  std::vector<std::uint8_t> cut = file_with_header(ok, 24);
  cut.resize(20);
  check_checkpoint_error(cut, "truncated");
  check_checkpoint_error(file_with_header(ok, 23), "outside the data section");
  check_checkpoint_error(file_with_header(R"({"a":{"dtype":"F32","shape":[2,3]})", 24), "JSON");
  check_checkpoint_error(
      file_with_header(R"({"a":{"dtype":"Q4","shape":[2,3],"data_offsets":[0,24]}})", 24), "Q4");
  check_checkpoint_error(
      file_with_header(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,24]}})", 24),
      "needs 16");
  check_checkpoint_error(
      file_with_header(R"({"a":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", 24),
      "non-negative");
  check_checkpoint_error(
      file_with_header(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[24,0]}})", 24),
      "outside the data section");
  check_checkpoint_error(file_with_header("[1,2]", 0), "JSON object");
  BOOST_CHECK_THROW(read_safetensors("/nonexistent/x.safetensors"), CheckpointError);
}

BOOST_AUTO_TEST_CASE(failed_write_leaves_nothing) {
  TempDir dir("st_atomic");
  const std::string path = dir.file("keep.safetensors");
  write_safetensors(path, {{"a", Tensor::full({3}, 1.0, DType::f32)}});
  BOOST_CHECK_THROW(write_safetensors(dir.file("no_dir/x.safetensors"),
                                      {{"a", Tensor::full({3}, 2.0, DType::f32)}}),
                    CheckpointError);
  BOOST_CHECK_THROW(write_safetensors(path, {{"__metadata__", Tensor::full({3}, 2.0, DType::f32)}}),
                    InvalidArgument);
  BOOST_TEST(read_safetensors(path).tensors.at("a").item(2) == 1.0);  // old file untouched
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    files += e.is_regular_file();
  BOOST_TEST(files == 1);  // no temporary left behind
}

// Note [Streamed saving]: a file written range by range, in a random order,
// has the bytes of the whole-file serialisation; a writer that is not
// committed, or misses a byte, leaves no file.
BOOST_AUTO_TEST_CASE(streamed_writes_give_the_whole_file_bytes) {
  const std::uint64_t seed = zrt::test::test_seed("streamed_writes");
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  const std::map<std::string, Tensor> tensors = {{"b", random_tensor({7, 3}, DType::f32, gen)},
                                                 {"a", random_tensor({5}, DType::bf16, gen)},
                                                 {"c", random_tensor({0, 4}, DType::f32, gen)},
                                                 {"d", random_tensor({13}, DType::f16, gen)}};
  const std::map<std::string, std::string> meta = {{"k", "v"}};
  SafetensorsWriteOptions keep;
  keep.keep_float_dtypes = true;
  TempDir dir("st_streamed");
  const std::string path = dir.file("s.safetensors");
  std::map<std::string, SafetensorsSpec> specs;
  for (const auto& [k, t] : tensors) specs[k] = {t.dtype(), t.shape()};
  struct Piece {
    std::string name;
    std::int64_t first, count;
  };
  std::vector<Piece> pieces;
  for (const auto& [k, t] : tensors)
    for (std::int64_t i = 0; i < t.numel();) {
      const std::int64_t n = std::min<std::int64_t>(t.numel() - i, 1 + gen() % 4);
      pieces.push_back({k, i, n});
      i += n;
    }
  std::shuffle(pieces.begin(), pieces.end(), gen);
  {
    SafetensorsWriter w(path, specs, meta);
    for (const Piece& p : pieces) {
      const Tensor& t = tensors.at(p.name);
      w.write_elements(p.name, p.first, p.count,
                       static_cast<const char*>(t.data_ptr()) + p.first * t.itemsize());
    }
    w.commit();
  }
  std::ifstream in(path, std::ios::binary);
  const std::vector<std::uint8_t> got((std::istreambuf_iterator<char>(in)), {});
  BOOST_TEST((got == serialize_safetensors(tensors, meta, keep)));
  // write_safetensors goes through the writer too: the f32 default is unchanged.
  write_safetensors(path, tensors, meta);
  std::ifstream again(path, std::ios::binary);
  BOOST_TEST((std::vector<std::uint8_t>((std::istreambuf_iterator<char>(again)), {}) ==
              serialize_safetensors(tensors, meta)));
  const std::string other = dir.file("o.safetensors");
  {
    SafetensorsWriter w(other, specs);
    w.write("b", tensors.at("b"));
    BOOST_CHECK_THROW(w.write_elements("a", 3, 3, tensors.at("a").data_ptr()), InvalidArgument);
    BOOST_CHECK_THROW(w.commit(), InvalidState);  // a, d were never written
  }
  { SafetensorsWriter abandoned(other, specs); }
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    files += e.is_regular_file();
  BOOST_TEST(files == 1);  // s.safetensors alone: no temporary, no o.safetensors
}

// Note [Partial files]: a name the filesystem takes (up to its 255 bytes)
// is written, though ".NAME.zrt-partial-N" would be longer; two long names
// that differ only past the cut keep temporaries of their own.
BOOST_AUTO_TEST_CASE(names_at_the_filesystem_limit_are_written) {
  TempDir dir("st_long");
  const long limit = ::pathconf(std::filesystem::path(dir.file("")).c_str(), _PC_NAME_MAX);
  const std::size_t max = limit > 0 ? static_cast<std::size_t>(limit) : 255;
  for (const std::size_t size : {max - 30, max - 12, max}) {
    const std::string path = dir.file(std::string(size - 3, 'n') + ".st");
    write_safetensors(path, {{"a", Tensor::full({3}, double(size), DType::f32)}});
    BOOST_TEST(read_safetensors(path).tensors.at("a").item(1) == double(size));
    write_whole_file(dir.file(std::string(size - 3, 'n') + ".tx"), "text", "--metrics");
    // Its own leftover is removed by the next write; another name's is not.
    const std::string mine = create_partial_file(path, "--save");
    const std::string other =
        create_partial_file(dir.file(std::string(size - 3, 'n') + ".su"), "--save");
    BOOST_TEST(mine != other);
    write_safetensors(path, {{"a", Tensor::full({3}, 1.0, DType::f32)}});
    BOOST_TEST(!std::filesystem::exists(mine));
    BOOST_TEST(std::filesystem::exists(other));
    std::filesystem::remove(other);
  }
  // A long name of 3-byte characters is cut between characters, not inside one.
  std::string wide;
  while (wide.size() + 3 + 3 <= max) wide += "\xe8\xaa\x9e";
  const std::string partial =
      std::filesystem::path(create_partial_file(dir.file(wide + ".st"), "--save")).filename();
  for (std::size_t i = 0; i < partial.size();) {
    const auto lead = static_cast<unsigned char>(partial[i]);
    std::size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    for (std::size_t k = 1; k < n; ++k)
      if (i + k >= partial.size() || (static_cast<unsigned char>(partial[i + k]) & 0xC0) != 0x80)
        n = 0;
    BOOST_REQUIRE_MESSAGE(n > 0, "byte " << i << " of " << partial << " starts no character");
    i += n;
  }
  // One byte more is refused for what it is.
  try {
    write_whole_file(dir.file(std::string(max + 1, 'n')), "text", "--metrics");
    BOOST_ERROR("a name over the limit was accepted");
  } catch (const InvalidArgument& e) {
    BOOST_TEST(std::string(e.what()).find("File name too long") != std::string::npos, e.what());
  }
}
