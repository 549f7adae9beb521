// Note [Non-blocking communicator creation] on the CPU: a stand-in for NCCL
// that makes a communicator as NCCL 2.28's non-blocking ncclCommSplit does
// (the call returns at once, the parent reads "in progress" while the job
// runs, the child's handle appears only when it ends, then the child's own
// init settles), and the ways it can go wrong. The real NCCL runs the same
// code in test_comm_gpu.
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "zrt/runtime/comm/comm_creation.h"

using namespace zrt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

enum Rc { ok = 0, busy = 1, broken = 3 };

struct FakeComm {
  int id = 7;
};

// One creation job: the owner is busy for `owner_polls` polls and then ends
// with `owner_end`, publishing the child unless `publishes` is false; the
// child is busy for `child_polls` polls and then ends with `child_end`.
// Counts every poll and notes a handle read while the owner was busy.
struct FakeJob {
  int owner_polls = 3, child_polls = 2;
  Rc owner_end = ok, child_end = ok;
  bool publishes = true;
  FakeComm child;
  FakeComm* published = nullptr;
  int owner_seen = 0, child_seen = 0, early_reads = 0;

  CreationPolls<FakeComm*, Rc> polls(bool with_owner) {
    CreationPolls<FakeComm*, Rc> p{ok, busy, nullptr, nullptr, nullptr};
    if (with_owner) {
      p.owner = [this] {
        if (++owner_seen <= owner_polls) return busy;
        if (publishes && owner_end == ok) published = &child;
        return owner_end;
      };
    } else {
      published = &child;  // init: the handle comes with the call
    }
    p.handle = [this, with_owner] {
      if (with_owner && owner_seen <= owner_polls) ++early_reads;
      return published;
    };
    p.state = [this](FakeComm* c) {
      BOOST_CHECK_EQUAL(c, &child);
      return ++child_seen <= child_polls ? busy : child_end;
    };
    return p;
  }
};

const auto kSoon = 10s;

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_creation)

// NCCL 2.28: ncclCommSplit returned ncclSuccess with the child still NULL.
BOOST_AUTO_TEST_CASE(split_that_returns_success_waits_for_the_parent_then_the_child) {
  for (Rc call : {ok, busy}) {
    FakeJob job;
    const auto made = await_creation(job.polls(true), call, true, Clock::now() + kSoon);
    BOOST_CHECK_EQUAL(made.result, ok);
    BOOST_CHECK(!made.missing);
    BOOST_CHECK_EQUAL(made.handle, &job.child);
    BOOST_CHECK_EQUAL(job.owner_seen, 4);  // 3 busy, then the end
    BOOST_CHECK_EQUAL(job.child_seen, 3);  // 2 busy, then ready
    BOOST_CHECK_EQUAL(job.early_reads, 0);
  }
}

BOOST_AUTO_TEST_CASE(a_job_that_ends_without_a_child_is_missing_not_a_communicator) {
  FakeJob job;
  job.publishes = false;
  const auto made = await_creation(job.polls(true), ok, true, Clock::now() + kSoon);
  BOOST_CHECK(made.missing);
  BOOST_CHECK(made.handle == nullptr);
  BOOST_CHECK_EQUAL(job.child_seen, 0);
}

// NCCL_SPLIT_NOCOLOR: NULL is the answer, after the parent's job ends.
BOOST_AUTO_TEST_CASE(a_rank_that_asked_for_no_group_gets_none_without_failing) {
  FakeJob job;
  job.publishes = false;
  const auto made = await_creation(job.polls(true), busy, false, Clock::now() + kSoon);
  BOOST_CHECK_EQUAL(made.result, ok);
  BOOST_CHECK(!made.missing);
  BOOST_CHECK(made.handle == nullptr);
  BOOST_CHECK_EQUAL(job.owner_seen, 4);
}

BOOST_AUTO_TEST_CASE(a_failed_call_polls_nothing) {
  FakeJob job;
  const auto made = await_creation(job.polls(true), broken, true, Clock::now() + kSoon);
  BOOST_CHECK_EQUAL(made.result, broken);
  BOOST_CHECK(made.handle == nullptr);
  BOOST_CHECK_EQUAL(job.owner_seen + job.child_seen, 0);
}

BOOST_AUTO_TEST_CASE(the_parent_failing_or_the_child_failing_is_the_result) {
  FakeJob parent_fails;
  parent_fails.owner_end = broken;
  auto made = await_creation(parent_fails.polls(true), ok, true, Clock::now() + kSoon);
  BOOST_CHECK_EQUAL(made.result, broken);
  BOOST_CHECK_EQUAL(parent_fails.child_seen, 0);

  FakeJob child_fails;
  child_fails.child_end = broken;
  made = await_creation(child_fails.polls(true), ok, true, Clock::now() + kSoon);
  BOOST_CHECK_EQUAL(made.result, broken);
  BOOST_CHECK_EQUAL(made.handle, &child_fails.child);  // handed back, for the caller to abort
}

BOOST_AUTO_TEST_CASE(a_job_that_never_ends_times_out_in_progress) {
  for (bool stuck_parent : {true, false}) {
    FakeJob job;
    (stuck_parent ? job.owner_polls : job.child_polls) = 1 << 30;
    const auto t0 = Clock::now();
    const auto made = await_creation(job.polls(true), ok, true, t0 + 20ms);
    BOOST_CHECK_EQUAL(made.result, busy);
    BOOST_CHECK(Clock::now() - t0 >= 20ms);
    BOOST_CHECK(Clock::now() - t0 < 5s);
    BOOST_CHECK_EQUAL(made.handle == nullptr, stuck_parent);
  }
}

// ncclCommInitRankConfig: no owner, the handle at once, its own state polled.
BOOST_AUTO_TEST_CASE(init_polls_the_new_handle_only) {
  FakeJob job;
  const auto made = await_creation(job.polls(false), busy, true, Clock::now() + kSoon);
  BOOST_CHECK_EQUAL(made.result, ok);
  BOOST_CHECK_EQUAL(made.handle, &job.child);
  BOOST_CHECK_EQUAL(job.owner_seen, 0);
  BOOST_CHECK_EQUAL(job.child_seen, 3);

  FakeJob none;
  auto polls = none.polls(false);
  polls.handle = [] { return static_cast<FakeComm*>(nullptr); };
  BOOST_CHECK(await_creation(polls, ok, true, Clock::now() + kSoon).missing);
}

BOOST_AUTO_TEST_CASE(poll_while_in_progress_polls_at_least_once) {
  int polls = 0;
  const Rc rc = poll_while_in_progress(
      busy, [&] { return ++polls < 3 ? busy : ok; }, Clock::now() - 1s);
  BOOST_CHECK_EQUAL(rc, busy);  // the deadline had passed: one poll, still busy
  BOOST_CHECK_EQUAL(polls, 1);
}

BOOST_AUTO_TEST_SUITE_END()
