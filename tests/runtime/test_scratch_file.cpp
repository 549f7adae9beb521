// Note [Scratch files]: created new, unlinked at once, preallocated (a disk
// without room fails at creation, naming the bytes), zeros until written,
// whole-range reads and writes from several threads.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "zrt/runtime/error.h"
#include "zrt/runtime/io/scratch_file.h"

using namespace zrt;
namespace fs = std::filesystem;

namespace {

struct FreshDir {
  fs::path path;
  FreshDir() {
    std::string templ = (fs::temp_directory_path() / "zrt-scratch-test-XXXXXX").string();
    path = ::mkdtemp(templ.data());
  }
  ~FreshDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string what_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scratch_file)

BOOST_AUTO_TEST_CASE(reads_back_what_was_written_and_leaves_nothing) {
  FreshDir dir;
  const std::uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("seed " << seed);
  std::mt19937_64 rng(seed);
  {
    ScratchFile f(dir.path.string(), "moments", 3 * 4099);
    BOOST_TEST(f.size() == 3u * 4099);
    BOOST_TEST(fs::is_empty(dir.path));  // unlinked at once
    std::vector<std::byte> zeros(4099, std::byte{1});
    f.read(4099, zeros);
    BOOST_TEST(
        (zeros == std::vector<std::byte>(4099, std::byte{0})));  // fresh blocks read as zeros
    // Three threads write and read back their own odd-sized ranges.
    std::vector<std::thread> threads;
    std::vector<bool> same(3, false);
    for (int t = 0; t < 3; ++t) {
      std::vector<std::byte> data(4099);
      for (auto& b : data) b = static_cast<std::byte>(rng());
      threads.emplace_back([&f, &same, t, data] {
        f.write(static_cast<std::uint64_t>(t) * 4099, data);
        std::vector<std::byte> back(4099);
        f.read(static_cast<std::uint64_t>(t) * 4099, back);
        same[static_cast<std::size_t>(t)] = back == data;
      });
    }
    for (auto& th : threads) th.join();
    BOOST_TEST((same == std::vector<bool>(3, true)));
    std::vector<std::byte> past(2);
    BOOST_CHECK_THROW(f.read(3 * 4099 - 1, past), InvalidArgument);
  }
  BOOST_TEST(fs::is_empty(dir.path));
}

BOOST_AUTO_TEST_CASE(a_disk_without_room_fails_at_creation) {
  FreshDir dir;
  const std::uint64_t huge = std::uint64_t{1} << 60;  // more than any disk
  const std::string what = what_of([&] { ScratchFile f(dir.path.string(), "moments", huge); });
  BOOST_TEST_MESSAGE(what);
  BOOST_TEST(what.find("cannot reserve " + std::to_string(huge) + " bytes") != std::string::npos,
             what);
  BOOST_CHECK_THROW(ScratchFile(dir.path.string(), "m", huge), ResourceError);
  BOOST_TEST(fs::is_empty(dir.path));
}

BOOST_AUTO_TEST_CASE(a_missing_directory_is_named) {
  const std::string what =
      what_of([] { ScratchFile f("/nonexistent/zrt-scratch", "moments", 16); });
  BOOST_TEST(what.find("/nonexistent/zrt-scratch does not exist") != std::string::npos, what);
  BOOST_CHECK_THROW(ScratchFile("/nonexistent/zrt-scratch", "moments", 16), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
