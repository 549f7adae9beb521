// The size policy of the caching allocator: how requests are rounded, which
// pool serves them, how big a new segment is, and when a free block is worth
// splitting. Pure functions, so the policy reads (and is tested) in one place.
#pragma once

#include <cstddef>

namespace zrt::block_sizes {

// Every block size is a multiple of this, which keeps every block as aligned
// as its segment (raw sources align segments to at least 512 bytes).
inline constexpr std::size_t kGranularity = 512;
// Requests up to this size come from the small pool...
inline constexpr std::size_t kSmallRequestMax = std::size_t{1} << 20;
// ...which packs them into segments of this size.
inline constexpr std::size_t kSmallSegment = std::size_t{2} << 20;
// Large-pool segments are the rounded request, rounded up to this.
inline constexpr std::size_t kLargeSegmentRounding = std::size_t{2} << 20;
// Larger requests are a caller's bug (an overflowed size), not a real need.
inline constexpr std::size_t kMaxRequest = std::size_t{1} << 50;

constexpr std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// The size of the block that serves a request of `nbytes` (0 < nbytes <= kMaxRequest).
constexpr std::size_t block_size_for(std::size_t nbytes) { return round_up(nbytes, kGranularity); }

constexpr bool is_small(std::size_t block_size) { return block_size <= kSmallRequestMax; }

// Bytes to ask the raw source for when no cached block fits `block_size`.
constexpr std::size_t segment_size_for(std::size_t block_size) {
  return is_small(block_size) ? kSmallSegment : round_up(block_size, kLargeSegmentRounding);
}

// Whether a free block that serves a request should be cut, leaving
// `remaining` bytes as a new free block. Large blocks are not cut for less
// than a small request's worth: such a sliver could only serve small
// requests, which have their own pool, and would fragment the segment.
constexpr bool should_split(bool small_pool, std::size_t remaining) {
  return small_pool ? remaining >= kGranularity : remaining > kSmallRequestMax;
}

}  // namespace zrt::block_sizes
