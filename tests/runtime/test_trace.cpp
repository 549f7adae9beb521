// Tracer::overlap: the part of one category's time inside another's, the
// figure zrt-bench train reports as the overlapped fraction of communication.
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
