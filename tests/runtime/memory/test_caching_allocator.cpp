// The caching policy on CPU, over a fake raw source and fake stream events:
// exact statistics, reuse, split/merge, pools, best fit, per-stream free
// lists and event-guarded hand-off, empty_cache, the cap and OOM retry.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/runtime/memory/fake_memory_sources.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/memory/address_space.h"
#include "zrt/runtime/memory/block_sizes.h"
#include "zrt/runtime/memory/caching_allocator.h"

using namespace zrt;
using namespace zrt::block_sizes;
using zrt::test::fake_stream;
using zrt::test::FakeAllocator;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

std::mt19937_64 fresh_rng() {
  std::uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("seed " << seed);
  return std::mt19937_64(seed);
}

std::size_t uniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
}

// Fills [p, p+n) with `value`; `holds` checks it is still all there (memcmp of
// the block with itself shifted by one byte is libc-fast).
void fill(void* p, std::size_t n, unsigned char value) { std::memset(p, value, n); }
bool holds(const void* p, std::size_t n, unsigned char value) {
  auto* b = static_cast<const unsigned char*>(p);
  return b[0] == value && (n == 1 || std::memcmp(b, b + 1, n - 1) == 0);
}

char* bytes(void* p) { return static_cast<char*>(p); }

}  // namespace

BOOST_AUTO_TEST_SUITE(caching_allocator)

BOOST_AUTO_TEST_CASE(unbacked_memory_keeps_the_policy_and_its_counters) {
  // Note [Dry runs]: the same requests and frees give the same blocks'
  // sizes, peaks and segments over unbacked address space as over host
  // memory, wherever the host's segments lie (ties between free blocks of
  // one size are broken by place, not address).
  const std::uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("seed " << seed);
  std::mt19937_64 rng(seed);
  AllocatorPtr host = make_caching_allocator(Device::cpu(), {.memory_cap = 0, .poison = false});
  AllocatorPtr unbacked = make_unbacked_caching_allocator({.memory_cap = 0, .poison = true});
  std::vector<std::pair<void*, void*>> live;
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      host->deallocate(live[k].first);
      unbacked->deallocate(live[k].second);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    // Small and large requests, some just past a segment's rounding.
    const std::size_t n =
        rng() % 4 == 0 ? (std::size_t{1} << 20) + rng() % (3 << 20) : 1 + rng() % 70000;
    void* p = unbacked->allocate(n, Stream());
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(p) % 512 == 0u);
    live.emplace_back(host->allocate(n, Stream()), p);
  }
  const MemoryStats h = host->stats(), u = unbacked->stats();
  BOOST_TEST(u.allocated == h.allocated);
  BOOST_TEST(u.peak_allocated == h.peak_allocated);
  BOOST_TEST(u.reserved == h.reserved);
  BOOST_TEST(u.peak_reserved == h.peak_reserved);
  BOOST_TEST(u.num_raw_allocs == h.num_raw_allocs);
  for (auto& [a, b] : live) {
    host->deallocate(a);
    unbacked->deallocate(b);
  }
}

BOOST_AUTO_TEST_CASE(touching_unbacked_memory_faults) {
  // The net a dry run relies on: work that did reach its data would crash
  // the plan instead of passing it (Note [Dry runs]). Shown in a child process.
  AllocatorPtr unbacked = make_unbacked_caching_allocator();
  void* p = unbacked->allocate(4096, Stream());
  std::fflush(nullptr);
  const pid_t child = fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    // The test framework's handlers would catch the fault and run on in the child.
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    *static_cast<volatile char*>(p) = 1;
    _exit(0);
  }
  int status = 0;
  BOOST_TEST_REQUIRE(waitpid(child, &status, 0) == child);
  BOOST_TEST(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
             "a write to unbacked memory succeeded");
  unbacked->deallocate(p);
}

BOOST_AUTO_TEST_CASE(host_out_of_memory_names_the_address_space_limit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' shadow memory is far past any address-space limit.
  BOOST_TEST_MESSAGE("skipped under a sanitizer");
#else
  // Note [Address-space limit]: in a child, 256 MiB above what is mapped,
  // 1 GiB of host memory fails, and the error says why.
  std::fflush(nullptr);
  int pipe_fds[2];
  BOOST_TEST_REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    close(pipe_fds[0]);
    std::string said;
    {
      rlimit r{};
      getrlimit(RLIMIT_AS, &r);
      // Lower than any limit it runs under already (lowering is always allowed).
      r.rlim_cur = std::min<rlim_t>(r.rlim_cur, process_memory().mapped + 256 * MiB);
      setrlimit(RLIMIT_AS, &r);
      try {
        AllocatorPtr host = make_caching_allocator(Device::cpu());
        host->allocate(1024 * MiB, Stream());
        said = "allocated";
      } catch (const OutOfMemory& e) {
        said = (e.numbers().address_space_limit == r.rlim_cur ? "limit " : "no limit ") +
               std::string(e.what());
      }
    }
    [[maybe_unused]] auto n = write(pipe_fds[1], said.data(), said.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) said.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  BOOST_TEST_REQUIRE(waitpid(child, &status, 0) == child);
  BOOST_TEST_MESSAGE(said);
  BOOST_TEST(said.starts_with("limit out of memory on cpu (host memory)"), said);
  BOOST_TEST(said.find("this process is under the address-space limit of ") != std::string::npos,
             said);
  BOOST_TEST(said.find("(ulimit -v)") != std::string::npos, said);
#endif
}

BOOST_AUTO_TEST_CASE(size_policy) {
  BOOST_TEST(block_size_for(1) == 512u);
  BOOST_TEST(block_size_for(512) == 512u);
  BOOST_TEST(block_size_for(513) == 1024u);
  BOOST_TEST(is_small(block_size_for(MiB)));
  BOOST_TEST(!is_small(block_size_for(MiB + 1)));
  BOOST_TEST(segment_size_for(512) == 2 * MiB);
  BOOST_TEST(segment_size_for(block_size_for(MiB + 1)) == 2 * MiB);
  BOOST_TEST(segment_size_for(block_size_for(33 * MiB + 7)) == 34 * MiB);
  BOOST_TEST(should_split(true, 512));
  BOOST_TEST(!should_split(true, 0));
  BOOST_TEST(!should_split(false, MiB));
  BOOST_TEST(should_split(false, MiB + 512));
}

BOOST_AUTO_TEST_CASE(exact_statistics) {
  auto rng = fresh_rng();
  FakeAllocator a;
  std::vector<std::size_t> sizes = {1, 3, 512, 513, 1024 + 7, 65536 + 7, MiB};
  for (int i = 0; i < 20; ++i) sizes.push_back(uniform(rng, 1, MiB));
  std::shuffle(sizes.begin(), sizes.end(), rng);

  std::vector<void*> ptrs;
  std::size_t want_allocated = 0, want_requested = 0, peak = 0;
  for (std::size_t n : sizes) {
    ptrs.push_back(a->allocate(n, Stream{}));
    fill(ptrs.back(), n, 0x5a);
    want_allocated += block_size_for(n);  // small blocks are always cut to size
    want_requested += n;
    peak = std::max(peak, want_allocated);
    MemoryStats s = a->stats();
    BOOST_TEST(s.allocated == want_allocated);
    BOOST_TEST(s.requested == want_requested);
    BOOST_TEST(s.reserved == s.num_raw_allocs * kSmallSegment);
    BOOST_TEST(s.reserved >= s.allocated);
  }
  MemoryStats s = a->stats();
  BOOST_TEST(s.num_allocs == sizes.size());
  BOOST_TEST(s.num_raw_allocs == a.source->allocation_sizes.size());
  BOOST_TEST(s.reserved == a.source->in_use);
  BOOST_TEST(s.peak_reserved == s.reserved);

  // Free half, then allocate a little: peak_allocated keeps the high mark.
  for (std::size_t i = 0; i < ptrs.size() / 2; ++i) {
    a->deallocate(ptrs[i]);
    want_allocated -= block_size_for(sizes[i]);
    want_requested -= sizes[i];
  }
  void* extra = a->allocate(7, Stream{});
  want_allocated += 512;
  want_requested += 7;
  s = a->stats();
  BOOST_TEST(s.allocated == want_allocated);
  BOOST_TEST(s.requested == want_requested);
  BOOST_TEST(s.peak_allocated == peak);

  a->deallocate(extra);
  for (std::size_t i = ptrs.size() / 2; i < ptrs.size(); ++i) a->deallocate(ptrs[i]);
  s = a->stats();
  BOOST_TEST(s.allocated == 0u);
  BOOST_TEST(s.requested == 0u);
  BOOST_TEST(s.reserved == a.source->in_use);  // everything stays cached
  BOOST_TEST(s.num_frees == sizes.size() + 1);
  BOOST_TEST(s.num_raw_frees == 0u);
  BOOST_TEST(s.num_oom_retries == 0u);

  a->reset_peak_stats();
  BOOST_TEST(a->stats().peak_allocated == 0u);
  BOOST_TEST(a->stats().peak_reserved == s.reserved);

  a->empty_cache();
  s = a->stats();
  BOOST_TEST(s.reserved == 0u);
  BOOST_TEST(s.num_raw_frees == s.num_raw_allocs);
  BOOST_TEST(a.source->in_use == 0u);
}

BOOST_AUTO_TEST_CASE(steady_loop_makes_no_new_raw_allocations) {
  auto rng = fresh_rng();
  FakeAllocator a;
  std::vector<std::size_t> sizes = {1,   3,       4096 + 7,    700000,
                                    MiB, MiB + 1, 3 * MiB + 7, 33 * MiB + 7};
  for (int i = 0; i < 12; ++i) sizes.push_back(uniform(rng, 1, 5 * MiB));
  std::shuffle(sizes.begin(), sizes.end(), rng);

  std::uint64_t raw_after_first = 0;
  for (int iter = 0; iter < 5; ++iter) {
    std::vector<void*> ptrs;
    for (std::size_t n : sizes) ptrs.push_back(a->allocate(n, Stream{}));
    std::shuffle(ptrs.begin(), ptrs.end(), rng);
    for (void* p : ptrs) a->deallocate(p);
    if (iter == 0) raw_after_first = a->stats().num_raw_allocs;
    BOOST_TEST(a->stats().num_raw_allocs == raw_after_first);
    BOOST_TEST(a->stats().allocated == 0u);
  }
  BOOST_TEST(a->stats().num_raw_frees == 0u);
}

BOOST_AUTO_TEST_CASE(split_and_merge_within_a_segment) {
  FakeAllocator a;
  const std::size_t na = 100 * KiB + 3, nb = 200 * KiB + 5, nc = 300 * KiB + 7;
  char* pa = bytes(a->allocate(na, Stream{}));
  char* pb = bytes(a->allocate(nb, Stream{}));
  char* pc = bytes(a->allocate(nc, Stream{}));
  BOOST_TEST(a->stats().num_raw_allocs == 1u);  // one small segment holds all three
  BOOST_TEST(pb == pa + block_size_for(na));
  BOOST_TEST(pc == pb + block_size_for(nb));

  a->deallocate(pa);
  a->deallocate(pc);
  // The hole A left is too small for A+B; C merged with the segment's tail.
  void* big = a->allocate(block_size_for(na) + block_size_for(nb), Stream{});
  BOOST_TEST(bytes(big) == pc);
  a->deallocate(big);
  a->empty_cache();  // B still splits the segment: nothing to release
  BOOST_TEST(a->stats().reserved == kSmallSegment);

  a->deallocate(pb);  // A + B + (C + tail) become one free block
  void* merged = a->allocate(MiB, Stream{});
  BOOST_TEST(bytes(merged) == pa);
  BOOST_TEST(a->stats().num_raw_allocs == 1u);
  a->deallocate(merged);
  a->empty_cache();  // the whole segment is one free block again
  BOOST_TEST(a->stats().reserved == 0u);
  BOOST_TEST(a->stats().num_raw_frees == 1u);
}

BOOST_AUTO_TEST_CASE(large_blocks_split_only_for_sizable_remainders) {
  FakeAllocator a;
  // 3 MiB out of a free 34 MiB segment leaves 31 MiB, which is cut off and
  // serves the next request from the same segment.
  void* big = a->allocate(33 * MiB + 7, Stream{});
  a->deallocate(big);
  void* q = a->allocate(3 * MiB, Stream{});
  BOOST_TEST(q == big);
  BOOST_TEST(a->stats().allocated == 3 * MiB);
  // 30 MiB out of the 31 MiB rest: the 1 MiB sliver is not cut off.
  void* r = a->allocate(30 * MiB, Stream{});
  BOOST_TEST(bytes(r) == bytes(big) + 3 * MiB);
  BOOST_TEST(a->stats().allocated == 34 * MiB);
  BOOST_TEST(a->stats().num_raw_allocs == 1u);
  a->deallocate(q);
  a->deallocate(r);
  a->empty_cache();

  // 5 MiB + 7 -> a 6 MiB segment; the ~1 MiB rest stays with the block.
  void* p = a->allocate(5 * MiB + 7, Stream{});
  BOOST_TEST(a->stats().allocated == 6 * MiB);
  BOOST_TEST(a->stats().requested == 5 * MiB + 7);
  a->deallocate(p);
}

BOOST_AUTO_TEST_CASE(small_and_large_pools_are_separate) {
  FakeAllocator a;
  void* s1 = a->allocate(MiB, Stream{});  // the largest small request
  void* s2 = a->allocate(MiB, Stream{});
  BOOST_TEST(a->stats().num_raw_allocs == 1u);
  BOOST_TEST(bytes(s2) == bytes(s1) + MiB);
  BOOST_TEST(a->stats().reserved == kSmallSegment);

  void* l = a->allocate(MiB + 1, Stream{});  // the smallest large request
  BOOST_TEST(a->stats().num_raw_allocs == 2u);
  BOOST_TEST(a->stats().allocated == 4 * MiB);  // 2 MiB segment, not cut
  a->deallocate(l);

  // A free large block never serves a small request, nor the reverse.
  void* s3 = a->allocate(512, Stream{});
  BOOST_TEST(a->stats().num_raw_allocs == 3u);
  BOOST_TEST(s3 != l);
  a->deallocate(s1);
  a->deallocate(s2);
  a->deallocate(s3);
  a->empty_cache();
  void* s4 = a->allocate(512, Stream{});
  void* l2 = a->allocate(MiB + 1, Stream{});
  BOOST_TEST(a->stats().num_raw_allocs == 5u);
  a->deallocate(l2);
  a->deallocate(s4);
}

BOOST_AUTO_TEST_CASE(best_fit_in_the_large_pool) {
  auto rng = fresh_rng();
  FakeAllocator a;
  std::vector<std::size_t> sizes = {8 * MiB, 4 * MiB, 6 * MiB};
  std::shuffle(sizes.begin(), sizes.end(), rng);
  std::vector<void*> ptrs;
  for (std::size_t n : sizes) ptrs.push_back(a->allocate(n, Stream{}));
  for (void* p : ptrs) a->deallocate(p);
  auto block_of = [&](std::size_t n) {
    return ptrs[std::find(sizes.begin(), sizes.end(), n) - sizes.begin()];
  };

  void* p = a->allocate(3 * MiB + 512, Stream{});
  BOOST_TEST(p == block_of(4 * MiB));
  void* q = a->allocate(5 * MiB, Stream{});
  BOOST_TEST(q == block_of(6 * MiB));
  void* r = a->allocate(4 * MiB + 1, Stream{});
  BOOST_TEST(r == block_of(8 * MiB));
  BOOST_TEST(a->stats().num_raw_allocs == 3u);
}

BOOST_AUTO_TEST_CASE(best_fit_among_holes_of_a_segment) {
  FakeAllocator a;
  const std::size_t sizes[] = {64 * KiB, 512, 16 * KiB, 512, 32 * KiB, 512};
  std::vector<void*> ptrs;
  for (std::size_t n : sizes) ptrs.push_back(a->allocate(n, Stream{}));
  a->deallocate(ptrs[0]);  // holes of 64, 16 and 32 KiB between live separators
  a->deallocate(ptrs[2]);
  a->deallocate(ptrs[4]);
  BOOST_TEST(a->allocate(10 * KiB, Stream{}) == ptrs[2]);
  BOOST_TEST(a->allocate(20 * KiB, Stream{}) == ptrs[4]);
  BOOST_TEST(a->allocate(48 * KiB, Stream{}) == ptrs[0]);
  BOOST_TEST(a->stats().num_raw_allocs == 1u);
}

BOOST_AUTO_TEST_CASE(free_lists_are_per_stream) {
  FakeAllocator a;
  Stream s1 = fake_stream(1), s2 = fake_stream(2);
  void* p = a->allocate(1000, s1);
  a->deallocate(p);
  void* q = a->allocate(1000, s2);  // s1's cached block is not s2's
  BOOST_TEST(q != p);
  BOOST_TEST(a->stats().num_raw_allocs == 2u);
  BOOST_TEST(a->allocate(1000, s1) == p);  // s1 gets its block back at once
  BOOST_TEST(a.events->recorded.empty());
  a->deallocate(q);
}

BOOST_AUTO_TEST_CASE(cross_stream_block_waits_for_its_events) {
  FakeAllocator a;
  Stream s1 = fake_stream(1), s2 = fake_stream(2), s3 = fake_stream(3);
  const std::size_t n = 5000;
  void* p = a->allocate(n, s1);
  a->record_use(p, s2);
  a->record_use(p, s3);
  a->record_use(p, s2);  // declared twice, recorded once
  a->record_use(p, s1);  // its own stream needs no event
  a->deallocate(p);
  BOOST_REQUIRE(a.events->recorded.size() == 2u);
  BOOST_TEST((a.events->recorded[0].stream == s2));
  BOOST_TEST((a.events->recorded[1].stream == s3));
  BOOST_TEST(a->stats().allocated == 0u);  // freed for the caller...

  void* q = a->allocate(n, s1);  // ...but held from reuse
  BOOST_TEST(q != p);
  a.events->complete_stream(s2);
  void* r = a->allocate(n, s1);  // s3 still pending
  BOOST_TEST(r != p);
  a.events->complete_stream(s3);
  void* t = a->allocate(n, s1);
  BOOST_TEST(t == p);
  BOOST_TEST(a->stats().num_raw_allocs == 1u);

  // A later free without record_use is reused at once, with no events.
  a->deallocate(t);
  BOOST_TEST(a->allocate(n, s1) == p);
  BOOST_TEST(a.events->recorded.size() == 2u);
  a->deallocate(q);
  a->deallocate(r);
}

// Frees both halves of one small segment allocated on s1; the first half was
// also used on s2, so it is held until s2's event completes.
void free_segment_with_one_half_held(FakeAllocator& a, Stream s1, Stream s2) {
  void* held = a->allocate(MiB, s1);
  a->record_use(held, s2);
  a->deallocate(held);
  void* other = a->allocate(MiB, s1);
  BOOST_TEST(bytes(other) == bytes(held) + MiB);
  a->deallocate(other);
  BOOST_TEST(a.events->num_incomplete() == 1u);
}

BOOST_AUTO_TEST_CASE(held_blocks_merge_once_their_events_complete) {
  FakeAllocator a;
  free_segment_with_one_half_held(a, fake_stream(1), fake_stream(2));
  a.events->complete_all();
  // The next call sees the event done and merges the halves: the segment is
  // whole again, so empty_cache can release it without waiting.
  a->deallocate(a->allocate(2 * MiB - 512, fake_stream(1)));
  a->empty_cache();
  BOOST_TEST(a->stats().num_raw_frees == 2u);
  BOOST_TEST(a->stats().reserved == 0u);
  BOOST_TEST(a.events->synchronizations == 0);
}

BOOST_AUTO_TEST_CASE(empty_cache_waits_for_held_blocks) {
  FakeAllocator a;
  free_segment_with_one_half_held(a, fake_stream(1), fake_stream(2));
  // On a GPU this synchronizes the event; then the segment is whole and goes.
  a->empty_cache();
  BOOST_TEST(a.events->synchronizations == 1);
  BOOST_TEST(a->stats().reserved == 0u);
  BOOST_TEST(a->stats().num_raw_frees == 1u);
}

BOOST_AUTO_TEST_CASE(empty_cache_releases_only_fully_free_segments) {
  auto rng = fresh_rng();
  FakeAllocator a;
  std::vector<void*> keep, drop;
  std::size_t kept_segments_bytes = 0;
  for (int i = 0; i < 6; ++i) {
    std::size_t n = uniform(rng, 2, 9) * MiB + uniform(rng, 1, 4096);  // one large segment each
    void* p = a->allocate(n, Stream{});
    if (i % 2) {
      keep.push_back(p);
      kept_segments_bytes += segment_size_for(block_size_for(n));
    } else {
      drop.push_back(p);
    }
  }
  void* small_kept = a->allocate(100, Stream{});
  a->deallocate(a->allocate(200, Stream{}));  // frees space in a kept small segment
  kept_segments_bytes += kSmallSegment;
  for (void* p : drop) a->deallocate(p);
  a->empty_cache();
  MemoryStats s = a->stats();
  BOOST_TEST(s.reserved == kept_segments_bytes);
  BOOST_TEST(s.num_raw_frees == drop.size());
  BOOST_TEST(a.source->in_use == kept_segments_bytes);
  a->deallocate(small_kept);
  for (void* p : keep) a->deallocate(p);
}

BOOST_AUTO_TEST_CASE(out_of_memory_under_a_cap) {
  FakeAllocator a({.memory_cap = 4 * MiB});
  void* p = a->allocate(3 * MiB, Stream{});  // a 4 MiB segment, not cut
  try {
    a->allocate(MiB, Stream{});  // needs a 2 MiB small segment
    BOOST_FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const auto& n = e.numbers();
    BOOST_TEST(n.requested == MiB);
    BOOST_TEST(n.allocated == 4 * MiB);
    BOOST_TEST(n.reserved == 4 * MiB);
    BOOST_TEST(n.free == 0u);  // the fake source has no capacity to report
    BOOST_TEST(n.cap == 4 * MiB);
    std::string msg = e.what();
    for (const char* word : {"requested 1048576", "allocated 4194304", "reserved 4194304",
                             "free unknown", "cap 4194304", "cpu"})
      BOOST_TEST(msg.find(word) != std::string::npos, "message lacks '" << word << "': " << msg);
  }
  MemoryStats s = a->stats();
  BOOST_TEST(s.num_oom_retries == 1u);
  BOOST_TEST(s.reserved == 4 * MiB);
  BOOST_TEST(s.num_raw_allocs == 1u);
  BOOST_TEST(a.source->allocation_sizes.size() ==
             1u);  // the cap refused before the source was asked

  // Once the cached segment can be flushed, the retry makes room.
  a->deallocate(p);
  void* q = a->allocate(MiB, Stream{});
  BOOST_TEST(q != nullptr);
  s = a->stats();
  BOOST_TEST(s.num_oom_retries == 2u);
  BOOST_TEST(s.num_raw_frees == 1u);
  BOOST_TEST(s.reserved == kSmallSegment);
  BOOST_TEST(s.peak_reserved == 4 * MiB);
  a->deallocate(q);
}

BOOST_AUTO_TEST_CASE(out_of_memory_from_the_raw_source) {
  FakeAllocator a({}, 10 * MiB);  // the source itself holds 10 MiB
  void* p = a->allocate(6 * MiB, Stream{});
  try {
    a->allocate(5 * MiB, Stream{});
    BOOST_FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    BOOST_TEST(e.numbers().requested == 5 * MiB);
    BOOST_TEST(e.numbers().allocated == 6 * MiB);
    BOOST_TEST(e.numbers().reserved == 6 * MiB);
    BOOST_TEST(e.numbers().free == 4 * MiB);
    BOOST_TEST(e.numbers().cap == 0u);
    BOOST_TEST(std::string(e.what()).find("cap none") != std::string::npos);
  }
  BOOST_TEST(a->stats().num_oom_retries == 1u);

  // A transient raw failure is absorbed by the one retry.
  a.source->fail_next = 1;
  void* q = a->allocate(2 * MiB, Stream{});
  BOOST_TEST(a->stats().num_oom_retries == 2u);
  // Two failures in a row are not.
  a.source->fail_next = 2;
  BOOST_CHECK_THROW(a->allocate(512, Stream{}), OutOfMemory);
  a->deallocate(p);
  a->deallocate(q);
}

BOOST_AUTO_TEST_CASE(bad_requests_get_typed_errors) {
  FakeAllocator a({}, 64 * MiB);
  BOOST_CHECK_THROW(a->allocate(0, Stream{}), InvalidArgument);
  BOOST_CHECK_THROW(a->allocate(SIZE_MAX, Stream{}), InvalidArgument);
  BOOST_CHECK_THROW(a->allocate(kMaxRequest + 1, Stream{}), InvalidArgument);
  BOOST_CHECK_THROW(a->allocate(std::size_t{1} << 40, Stream{}), OutOfMemory);
  int not_ours = 0;
  BOOST_CHECK_THROW(a->record_use(&not_ours, fake_stream(2)), InvalidArgument);
  BOOST_CHECK_NO_THROW(a->deallocate(nullptr));
  BOOST_CHECK_NO_THROW(a->deallocate(&not_ours));  // reported, not thrown
  void* p = a->allocate(10, Stream{});
  a->deallocate(p);
  BOOST_CHECK_NO_THROW(a->deallocate(p));  // a double free is reported too
  BOOST_TEST(a->stats().num_frees == 1u);
  BOOST_CHECK_THROW(CachingAllocator(nullptr, nullptr), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(device_memory_only_on_its_devices_streams) {
  auto source = std::make_shared<zrt::test::FakeSourceState>();
  source->device = Device::cuda(0);
  CachingAllocator a(
      std::make_unique<zrt::test::FakeMemorySource>(source),
      std::make_unique<zrt::test::FakeEventSource>(std::make_shared<zrt::test::FakeEventState>()));
  BOOST_TEST((a.device() == Device::cuda(0)));
  BOOST_CHECK_THROW(a.allocate(100, Stream::cuda(1, reinterpret_cast<void*>(1))), InvalidArgument);
  a.deallocate(a.allocate(100, Stream::cuda(0, reinterpret_cast<void*>(1))));
  a.deallocate(a.allocate(100, Stream{}));
  // Host memory may serve any device's streams (pinned buffers for copies).
  FakeAllocator host;
  host->deallocate(host->allocate(100, Stream::cuda(3, reinterpret_cast<void*>(1))));
  BOOST_TEST(host->stats().num_frees == 1u);
}

BOOST_AUTO_TEST_CASE(destructor_releases_everything) {
  FakeAllocator a;
  a->allocate(100, Stream{});  // never freed
  void* held = a->allocate(3 * MiB, fake_stream(1));
  a->record_use(held, fake_stream(2));
  a->deallocate(held);
  a->deallocate(a->allocate(20 * MiB, Stream{}));
  BOOST_TEST(a.source->live.size() == 3u);
  a.alloc.reset();
  BOOST_TEST(a.source->live.empty());
  BOOST_TEST(a.source->in_use == 0u);
  BOOST_TEST(a.events->synchronizations == 1);
}

// Random traffic on three streams, under a cap: blocks never overlap (each
// keeps its fill), the counters match a model, reserved stays under the cap,
// and everything goes back to the source in the end.
BOOST_AUTO_TEST_CASE(random_traffic_keeps_blocks_disjoint_and_counters_exact) {
  auto rng = fresh_rng();
  const std::size_t cap = 48 * MiB;
  FakeAllocator a({.memory_cap = cap});
  const Stream streams[] = {fake_stream(1), fake_stream(2), fake_stream(3)};
  struct Live {
    void* p;
    std::size_t n;
    unsigned char fill;
  };
  std::vector<Live> live;
  std::size_t requested = 0;
  int ooms = 0;
  for (int op = 0; op < 3000; ++op) {
    std::size_t kind = uniform(rng, 0, 9);
    if (kind < 5 || live.empty()) {
      std::size_t n = kind == 0 ? uniform(rng, MiB, 6 * MiB) : uniform(rng, 1, 64 * KiB);
      Stream s = streams[uniform(rng, 0, 2)];
      try {
        void* p = a->allocate(n, s);
        auto fill_value = static_cast<unsigned char>(uniform(rng, 1, 255));
        fill(p, n, fill_value);
        live.push_back({p, n, fill_value});
        requested += n;
        if (uniform(rng, 0, 3) == 0) a->record_use(p, streams[uniform(rng, 0, 2)]);
      } catch (const OutOfMemory& e) {
        ++ooms;
        BOOST_TEST(e.numbers().reserved <= cap);
        BOOST_TEST(e.numbers().requested == n);
      }
    } else if (kind < 9) {
      std::size_t i = uniform(rng, 0, live.size() - 1);
      BOOST_TEST(holds(live[i].p, live[i].n, live[i].fill));
      a->deallocate(live[i].p);
      requested -= live[i].n;
      live[i] = live.back();
      live.pop_back();
    } else {
      a.events->complete_stream(streams[uniform(rng, 0, 2)]);
    }
    MemoryStats s = a->stats();
    BOOST_TEST(s.requested == requested);
    BOOST_TEST(s.allocated >= requested);
    BOOST_TEST(s.reserved >= s.allocated);
    BOOST_TEST(s.reserved <= cap);
  }
  BOOST_TEST_MESSAGE(ooms << " allocations hit the cap");
  for (auto& l : live) {
    BOOST_TEST(holds(l.p, l.n, l.fill));
    a->deallocate(l.p);
  }
  MemoryStats s = a->stats();
  BOOST_TEST(s.allocated == 0u);
  BOOST_TEST(s.requested == 0u);
  a->empty_cache();
  s = a->stats();
  BOOST_TEST(s.reserved == 0u);
  BOOST_TEST(s.num_raw_allocs == s.num_raw_frees);
  BOOST_TEST(a.source->in_use == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
