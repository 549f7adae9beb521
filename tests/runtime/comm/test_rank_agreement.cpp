// Settings compared across ranks (Note [Ranks agree on their settings]): the
// lines name each differing setting with every differing rank's value, alike
// on every rank, over the local backend and as a pure comparison.
#include <boost/test/unit_test.hpp>

#include <mutex>
#include <random>

#include "tests/support/test_seed.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/rank_agreement.h"

using namespace zrt;

BOOST_AUTO_TEST_SUITE(rank_agreement)

BOOST_AUTO_TEST_CASE(names_each_differing_setting_and_rank) {
  const Settings base = {{"strategy", "full"}, {"dtype", "bf16"}, {"beta2", "0.95"}};
  Settings other = base;
  other[0].second = "hybrid";
  Settings fewer = {base[0], base[2], {"extra", "1"}};
  BOOST_TEST(differing_settings({base, base, base}).empty());
  BOOST_TEST(differing_settings({base}).empty());
  BOOST_TEST(differing_settings(std::vector<Settings>{}).empty());
  const auto lines = differing_settings({base, base, other, fewer});
  BOOST_TEST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[0] == "strategy: rank 0 has full; rank 2 has hybrid");
  BOOST_TEST(lines[1] == "dtype: rank 0 has bf16; rank 3 has nothing");
  BOOST_TEST(lines[2] == "extra: rank 0 has nothing; rank 3 has 1");
}

BOOST_AUTO_TEST_CASE(a_long_list_is_cut_with_a_count) {
  std::vector<std::string> lines;
  for (int i = 0; i < 10; ++i) lines.push_back("l" + std::to_string(i));
  BOOST_TEST(indented_lines({}) == "");
  BOOST_TEST(indented_lines({"a", "b"}) == "\n  a\n  b");
  BOOST_TEST(indented_lines(lines, 8) ==
             "\n  l0\n  l1\n  l2\n  l3\n  l4\n  l5\n  l6\n  l7\n  (and 2 more)");
}

BOOST_AUTO_TEST_CASE(every_rank_gets_the_same_lines) {
  std::mt19937_64 rng(test::test_seed("every_rank_gets_the_same_lines"));
  for (int n : {1, 2, 3, 4}) {
    // A random rank (never one of a world of one) with its own value of "b",
    // and values with the bytes a text encoding would trip on.
    const int odd = n == 1 ? -1 : 1 + static_cast<int>(rng() % static_cast<unsigned>(n - 1));
    std::mutex m;
    std::vector<std::vector<std::string>> seen(static_cast<std::size_t>(n));
    run_local_ranks(n, [&](const CommPtr& world) {
      Settings mine = {{"a", std::string("x\0y\n", 4)}, {"b", "1"}, {"", ""}};
      if (world->rank() == odd) mine[1].second = "2;\n";
      auto lines = differing_settings(*world, mine);
      std::lock_guard lock(m);
      seen[static_cast<std::size_t>(world->rank())] = std::move(lines);
    });
    const std::vector<std::string> expected =
        odd < 0 ? std::vector<std::string>{}
                : std::vector<std::string>{"b: rank 0 has 1; rank " + std::to_string(odd) +
                                           " has 2;\n"};
    for (int r = 0; r < n; ++r)
      BOOST_TEST(seen[static_cast<std::size_t>(r)] == expected, "rank " << r << " of " << n);
  }
}

BOOST_AUTO_TEST_SUITE_END()
