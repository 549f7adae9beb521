// Note [Step phase times] on the CPU: an interval is the time its stream
// takes between the two events (on an owned CPU stream the work queued
// there, not the host's issue of it), read() sums per phase and forgets,
// collectives of a group and of the groups split from it count as
// communication, and misuse is refused.
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <thread>
#include <vector>

#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/phase_timer.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"

using namespace zrt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

void sleep_on(Stream s, std::chrono::milliseconds d) {
  run_on_cpu_stream(s, "sleep", [d] { std::this_thread::sleep_for(d); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(phase_timer)

BOOST_AUTO_TEST_CASE(phases_on_the_default_stream_sum_and_are_forgotten_when_read) {
  PhaseTimer timer(Device::cpu());
  {
    PhaseTimer::Scope s(&timer, Phase::forward, Stream::cpu());
    sleep_on(Stream::cpu(), 20ms);
  }
  for (int i = 0; i < 2; ++i) {
    PhaseTimer::Scope s(&timer, Phase::backward, Stream::cpu());
    sleep_on(Stream::cpu(), 15ms);
  }
  const PhaseTimes t = timer.read();
  BOOST_TEST(t.forward_ms >= 20);
  BOOST_TEST(t.forward_ms < 20 + 500);
  BOOST_TEST(t.backward_ms >= 30);
  BOOST_TEST(t.backward_ms < 30 + 500);
  BOOST_TEST(t.optimizer_ms == 0);
  BOOST_TEST(t.comm_ms == 0);
  const PhaseTimes again = timer.read();
  BOOST_TEST(again.forward_ms + again.backward_ms == 0);
  // Events are reused: a later interval reads as itself.
  { PhaseTimer::Scope s(&timer, Phase::optimizer, Stream::cpu()); }
  const PhaseTimes later = timer.read();
  BOOST_TEST(later.optimizer_ms < 20);
  BOOST_TEST(later.forward_ms == 0);
}

BOOST_AUTO_TEST_CASE(an_owned_stream_is_timed_by_its_work_not_by_the_issue) {
  OwnedStream stream(Device::cpu());
  PhaseTimer timer(Device::cpu());
  const auto t0 = Clock::now();
  {
    PhaseTimer::Scope s(&timer, Phase::forward, stream);
    sleep_on(stream, 40ms);
  }
  const bool issued_at_once = Clock::now() - t0 < 40ms;
  BOOST_TEST(issued_at_once);         // issued, not yet run
  const PhaseTimes t = timer.read();  // waits for the stream
  BOOST_TEST(t.forward_ms >= 40);
}

// Rank 1 comes late to each collective, so rank 0's collectives take that
// long on its streams: the world's on an owned stream, its split child's on
// the default one. A barrier runs on the calling thread and is not timed.
BOOST_AUTO_TEST_CASE(collectives_of_a_group_and_its_splits_are_communication) {
  std::vector<PhaseTimes> rank0(3);
  std::array<char, 2> inherited{};
  run_local_ranks(2, [&](const CommPtr& world) {
    const int r = world->rank();
    auto timer = std::make_shared<PhaseTimer>(Device::cpu());
    world->set_phase_timer(timer);
    auto child = world->split(0, r);
    inherited[static_cast<std::size_t>(r)] = child->phase_timer() == timer;
    OwnedStream stream(Device::cpu());
    Tensor t = Tensor::full({4}, 1.0, DType::f32);
    if (r == 1) std::this_thread::sleep_for(50ms);
    world->all_reduce(t, ReduceOp::sum, stream);
    const PhaseTimes world_times = timer->read();
    if (r == 1) std::this_thread::sleep_for(50ms);
    child->all_reduce(t, ReduceOp::sum);
    const PhaseTimes child_times = timer->read();
    if (r == 1) std::this_thread::sleep_for(50ms);
    world->barrier();
    const PhaseTimes barrier_times = timer->read();
    if (r == 0) rank0 = {world_times, child_times, barrier_times};
  });
  BOOST_TEST(inherited[0]);
  BOOST_TEST(inherited[1]);
  BOOST_TEST(rank0[0].comm_ms >= 30);
  BOOST_TEST(rank0[1].comm_ms >= 30);
  BOOST_TEST(rank0[2].comm_ms == 0);
  for (const PhaseTimes& p : rank0) BOOST_TEST(p.forward_ms + p.backward_ms + p.optimizer_ms == 0);
}

BOOST_AUTO_TEST_CASE(misuse_is_refused) {
  PhaseTimer timer(Device::cpu());
  BOOST_CHECK_THROW(timer.end(0, Stream::cpu()), InvalidArgument);
  const std::size_t open = timer.begin(Phase::comm, Stream::cpu());
  BOOST_CHECK_THROW(timer.read(), InvalidState);
  timer.end(open, Stream::cpu());
  BOOST_CHECK_THROW(timer.end(open, Stream::cpu()), InvalidArgument);
  BOOST_CHECK_NO_THROW(timer.read());
  BOOST_TEST(timer.can_time(Stream::cpu()));
  BOOST_TEST(!timer.can_time(Stream::cuda(0, nullptr)));
  BOOST_CHECK_THROW(timer.begin(Phase::forward, Stream::cuda(0, nullptr)), InvalidArgument);
  {
    PhaseTimer::Scope skipped(&timer, Phase::forward, Stream::cuda(0, nullptr));  // records nothing
  }
  BOOST_CHECK_NO_THROW(timer.read());
  Event never(Device::cpu(), true), done(Device::cpu(), true);
  done.record(Stream::cpu());
  BOOST_CHECK_THROW(Event::elapsed_ms(never, done), InvalidState);
}

BOOST_AUTO_TEST_SUITE_END()
