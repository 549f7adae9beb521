// Tracer::overlap: the part of one category's time inside another's, the
// figure zrt-bench train reports as the overlapped fraction of communication.
// Tracer::take_event_lines: the streamed trace.
#include <boost/test/unit_test.hpp>

#include "zrt/runtime/error.h"
#include "zrt/runtime/trace.h"

using zrt::Tracer;

BOOST_AUTO_TEST_CASE(overlap_of_intervals) {
  Tracer t(0);
  // compute: [0,10) [20,30) [25,40) -> union [0,10) [20,40)
  t.complete("forward a", "compute", Tracer::kComputeTrack, 0, 10);
  t.complete("forward b", "compute", Tracer::kComputeTrack, 20, 30);
  t.complete("backward b", "compute", Tracer::kComputeTrack, 25, 40);
  t.complete("wait b", "wait", Tracer::kComputeTrack, 10, 20);
  // comm: [5,15) overlaps 5; [18,22) overlaps 2; [38,50) overlaps 2; [60,61) none
  t.complete("all_gather", "comm", Tracer::kCommTrack, 5, 15);
  t.complete("all_gather", "comm", Tracer::kCommTrack, 18, 22);
  t.complete("reduce_scatter", "comm", Tracer::kCommTrack, 38, 50);
  t.complete("reduce_scatter", "comm", Tracer::kCommTrack, 60, 61);
  const Tracer::Overlap o = t.overlap("comm", "compute");
  BOOST_TEST(o.busy_us == 10.0 + 4 + 12 + 1);
  BOOST_TEST(o.overlapped_us == 5.0 + 2 + 2);
  BOOST_TEST(o.fraction() == 9.0 / 27.0);
  // Waiting is not computing: [10,20) covers comm [10,15) and [18,20).
  BOOST_TEST(t.overlap("comm", "wait").overlapped_us == 5.0 + 2);
  // Only events starting at or after `since` count.
  const Tracer::Overlap late = t.overlap("comm", "compute", 30);
  BOOST_TEST(late.busy_us == 13.0);
  BOOST_TEST(late.overlapped_us == 0.0);  // compute events from 30 on: none
  // Overlapping comm events count once.
  t.complete("all_gather", "comm", Tracer::kCommTrack, 6, 8);
  BOOST_TEST(t.overlap("comm", "compute").busy_us == 27.0);
  BOOST_TEST(Tracer(1).overlap("comm", "compute").fraction() == 0.0);
  BOOST_CHECK_THROW(t.complete("x", "comm", Tracer::kCommTrack, 5, 4), zrt::InvalidArgument);
}

// Note [Streamed trace]: each take hands over the events since the last one,
// once; the first leads with the metadata naming the rank and its tracks.
BOOST_AUTO_TEST_CASE(taken_events_are_handed_over_once) {
  Tracer t(3);
  t.complete("forward a", "compute", Tracer::kComputeTrack, 0, 10);
  const std::vector<std::string> first = t.take_event_lines();
  BOOST_TEST_REQUIRE(first.size() == 4u);
  BOOST_TEST(first[2].find("\"rank 3\"") != std::string::npos);
  BOOST_TEST(first[3].find("\"forward a\"") != std::string::npos);
  BOOST_TEST(first[3].find("\"pid\":3") != std::string::npos);
  BOOST_TEST(t.num_events() == 0u);
  t.complete("backward a", "compute", Tracer::kComputeTrack, 10, 20);
  t.counter("memory", {{"allocated", 1}});
  const std::vector<std::string> second = t.take_event_lines();
  BOOST_TEST_REQUIRE(second.size() == 2u);
  BOOST_TEST(second[0].find("\"backward a\"") != std::string::npos);
  BOOST_TEST(second[1].find("\"ph\":\"C\"") != std::string::npos);
  BOOST_TEST(t.take_event_lines().empty());
}
