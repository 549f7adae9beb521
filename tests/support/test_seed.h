// The seed of a test's random inputs: fresh each run, printed so a failure
// can be replayed, and taken from ZRT_TEST_SEED when that is set.
//
//   ZRT_TEST_SEED=1234 ctest --test-dir build -R test_adamw --output-on-failure
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace zrt::test {

// `who` names the test in the printed line.
inline std::uint64_t test_seed(const char* who) {
  std::uint64_t seed;
  const char* given = std::getenv("ZRT_TEST_SEED");
  if (given && *given) {
    seed = std::stoull(given);
  } else {
    seed = (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  std::fprintf(stderr, "%s: random seed %llu (replay: ZRT_TEST_SEED=%llu)\n", who,
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace zrt::test
