// What a run's memory need is short of (tools/train/train_setup.h): an
// address-space limit (ulimit -v) is each process's own, the machine's
// memory its processes share. Ranks launched as processes each need their
// own share of the first, and together all of the second.
#include <boost/test/unit_test.hpp>
#include <optional>

#include "tools/train/train_setup.h"

namespace zrt::train {
namespace {

constexpr std::uint64_t MiB = 1 << 20;

// A machine with `machine` MiB available to processes each under a limit
// that leaves `left` MiB (none when 0).
AvailableMemory memory(std::uint64_t machine, std::uint64_t left) {
  AvailableMemory a;
  a.machine = machine * MiB;
  if (left > 0)
    a.limit = AddressSpaceLimit{.limit = (left + 300) * MiB, .used = 300 * MiB, .data = false};
  return a;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(available_memory_suite)

BOOST_AUTO_TEST_CASE(a_limit_is_each_processs_the_machine_is_shared) {
  // Four processes of 90 MiB under a limit leaving each 100 MiB, on a
  // machine with 1000: they fit. (Compared with the whole machine's need,
  // the limit warned of 360 MiB against 100.)
  BOOST_TEST(!memory(1000, 100).shortfall(360 * MiB, 90 * MiB).has_value());
  // One process of 120 MiB does not fit its 100.
  const auto process = memory(1000, 100).shortfall(360 * MiB, 120 * MiB);
  BOOST_TEST_REQUIRE(process.has_value());
  BOOST_TEST(process->in_process);
  BOOST_TEST(process->need == 120 * MiB);
  BOOST_TEST(process->available == 100 * MiB);
  // Twelve processes of 90 MiB do not fit the machine's 1000.
  const auto machine = memory(1000, 100).shortfall(1080 * MiB, 90 * MiB);
  BOOST_TEST_REQUIRE(machine.has_value());
  BOOST_TEST(!machine->in_process);
  BOOST_TEST(machine->need == 1080 * MiB);
  BOOST_TEST(machine->available == 1000 * MiB);
  // Without a limit only the machine counts; with nothing known, nothing is short.
  BOOST_TEST(!memory(1000, 0).shortfall(1000 * MiB, 1000 * MiB).has_value());
  BOOST_TEST(memory(1000, 0).shortfall(1001 * MiB, 1 * MiB).has_value());
  BOOST_TEST(!memory(0, 0).shortfall(~std::uint64_t{0}, ~std::uint64_t{0}).has_value());
}

BOOST_AUTO_TEST_CASE(this_machine_is_read) {
  const AvailableMemory a = available_memory();
  // The limit is kept only where it leaves less than the machine has.
  BOOST_TEST((!a.limit || a.machine == 0 || a.limit->left() < a.machine));
  BOOST_TEST((a.machine == 0 || a.bytes() <= a.machine));
  BOOST_TEST(a.bound_by().empty() == !a.limit.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace zrt::train
