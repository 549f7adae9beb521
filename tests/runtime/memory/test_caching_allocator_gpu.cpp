// The caching allocator over real CUDA memory and events: stream hand-off
// gated by a host function that holds a stream until the test lets it go,
// statistics, OOM under a cap, pinned host memory, tensors.
#include <boost/test/unit_test.hpp>

#ifdef ZRT_WITH_CUDA
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "zrt/runtime/cuda_check.h"
#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/tensor.h"

using namespace zrt;

namespace {

constexpr std::size_t MiB = 1024 * 1024;

// Blocks a stream at the point it is enqueued until open() is called, so an
// event recorded after it is reliably incomplete meanwhile.
class StreamGate {
 public:
  explicit StreamGate(Stream s) {
    ZRT_CUDA_CHECK(
        cudaLaunchHostFunc(static_cast<cudaStream_t>(s.native()), &StreamGate::wait, this));
  }
  void open() { open_.store(true); }

 private:
  static void wait(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    while (!gate->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  std::atomic<bool> open_{false};
};

}  // namespace

BOOST_AUTO_TEST_SUITE(caching_allocator_gpu)

BOOST_AUTO_TEST_CASE(cross_stream_hand_off_waits_for_real_events) {
  AllocatorPtr alloc = make_caching_allocator(Device::cuda(0));
  OwnedStream compute(Device::cuda(0)), gather(Device::cuda(0));
  const std::size_t n = 3 * MiB + 7;

  void* p = alloc->allocate(n, compute);
  ZRT_CUDA_CHECK(cudaMemsetAsync(p, 0x3c, n, static_cast<cudaStream_t>(compute.get().native())));
  alloc->record_use(p, gather);
  StreamGate gate(gather);  // gather's work "before the free" is still running
  alloc->deallocate(p);
  BOOST_TEST(alloc->stats().allocated == 0u);

  void* q = alloc->allocate(n, compute);
  BOOST_TEST(q != p);  // held: gather may still read it
  gate.open();
  gather.get().synchronize();
  void* r = alloc->allocate(n, compute);
  BOOST_TEST(r == p);
  BOOST_TEST(alloc->stats().num_raw_allocs == 2u);

  // Without record_use, the same stream gets the block back at once.
  alloc->deallocate(r);
  BOOST_TEST(alloc->allocate(n, compute) == p);
  alloc->deallocate(p);
  alloc->deallocate(q);
  compute.get().synchronize();
  alloc->empty_cache();
  BOOST_TEST(alloc->stats().reserved == 0u);
  BOOST_TEST(alloc->stats().num_raw_frees == 2u);
}

BOOST_AUTO_TEST_CASE(empty_cache_synchronizes_held_blocks) {
  AllocatorPtr alloc = make_caching_allocator(Device::cuda(0));
  OwnedStream compute(Device::cuda(0)), gather(Device::cuda(0));
  void* p = alloc->allocate(MiB, compute);
  alloc->record_use(p, gather);
  auto gate = std::make_unique<StreamGate>(gather);
  alloc->deallocate(p);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate->open();
  });
  alloc->empty_cache();  // returns only after the gate opened and the event completed
  opener.join();
  BOOST_TEST(alloc->stats().reserved == 0u);
}

BOOST_AUTO_TEST_CASE(out_of_memory_under_a_cap_on_the_device) {
  AllocatorPtr alloc = make_caching_allocator(Device::cuda(0), {.memory_cap = 64 * MiB});
  void* p = alloc->allocate(48 * MiB, Stream::cuda(0, nullptr));
  try {
    alloc->allocate(32 * MiB, Stream::cuda(0, nullptr));
    BOOST_FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    BOOST_TEST(e.numbers().requested == 32 * MiB);
    BOOST_TEST(e.numbers().allocated == 48 * MiB);
    BOOST_TEST(e.numbers().reserved == 48 * MiB);
    BOOST_TEST(e.numbers().cap == 64 * MiB);
    BOOST_TEST(e.numbers().free > 0u);  // cudaMemGetInfo answers
    BOOST_TEST(std::string(e.what()).find("cuda:0") != std::string::npos);
  }
  BOOST_TEST(alloc->stats().num_oom_retries == 1u);
  alloc->deallocate(p);
  void* q = alloc->allocate(32 * MiB, Stream::cuda(0, nullptr));  // reuses the cached 48 MiB
  BOOST_TEST(q == p);
  alloc->deallocate(q);
}

BOOST_AUTO_TEST_CASE(tensors_and_pinned_memory) {
  AllocatorPtr alloc = make_caching_allocator(Device::cuda(0));
  Tensor t = Tensor::empty({1025, 7}, DType::bf16, Device::cuda(0), alloc);
  void* first = t.data_ptr();
  std::mt19937 gen(std::random_device{}());
  std::vector<double> values(1025 * 7);
  for (auto& v : values) v = std::uniform_int_distribution<int>(-100, 100)(gen);  // exact in bf16
  for (int cycle = 0; cycle < 3; ++cycle) {
    t.fill_(-999.0);  // poison
    t.copy_(Tensor::from_doubles(values, DType::f32, Device::cpu(), {1025, 7}));
    BOOST_TEST(t.to(Device::cpu()).to_doubles() == values);
    free_storage(t);
    BOOST_TEST(alloc->stats().allocated == 0u);
    alloc_storage(t);
    BOOST_TEST(t.data_ptr() == first);  // the cached block comes back
  }
  BOOST_TEST(alloc->stats().num_raw_allocs == 1u);

  AllocatorPtr pinned = make_pinned_host_allocator();
  BOOST_TEST((pinned->device() == Device::cpu()));
  void* h = pinned->allocate(5000, Stream{});
  cudaPointerAttributes attr{};
  ZRT_CUDA_CHECK(cudaPointerGetAttributes(&attr, h));
  BOOST_TEST((attr.type == cudaMemoryTypeHost));
  pinned->deallocate(h);
  BOOST_TEST(pinned->allocate(5000, Stream{}) == h);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // ZRT_WITH_CUDA
