#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "zrt/runtime/allocator.h"
#include "zrt/runtime/error.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/runtime/cuda_check.h"
#endif

namespace zrt {

namespace {

constexpr std::size_t kHostAlignment = 64;

class PlainHostAllocator final : public Allocator {
 public:
  void* allocate(std::size_t nbytes, Stream) override {
    std::size_t rounded = (nbytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* p = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
    if (!p)
      throw OutOfMemory(detail::concat("host allocation of ", nbytes, " bytes failed"),
                        OutOfMemory::Numbers{.requested = nbytes}, __FILE__, __LINE__);
    return p;
  }
  void deallocate(void* p) noexcept override { std::free(p); }
  Device device() const override { return Device::cpu(); }
};

constexpr std::size_t kHugePage = std::size_t(2) << 20;

class HugePageHostAllocator final : public Allocator {
 public:
  void* allocate(std::size_t nbytes, Stream stream) override {
    if (nbytes < kHugePage) return small_.allocate(nbytes, stream);
    const std::size_t rounded = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (!p)
      throw OutOfMemory(detail::concat("host allocation of ", nbytes, " bytes failed"),
                        OutOfMemory::Numbers{.requested = nbytes}, __FILE__, __LINE__);
#ifdef MADV_HUGEPAGE
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without huge pages it is plain memory
#endif
    return p;
  }
  void deallocate(void* p) noexcept override { std::free(p); }
  Device device() const override { return Device::cpu(); }

 private:
  PlainHostAllocator small_;
};

#ifdef ZRT_WITH_CUDA
class PlainCudaAllocator final : public Allocator {
 public:
  explicit PlainCudaAllocator(int device) : device_(device) {}
  void* allocate(std::size_t nbytes, Stream) override {
    CudaDeviceGuard g(device_);
    void* p = nullptr;
    cudaError_t st = cudaMalloc(&p, nbytes);
    if (st == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      std::size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw OutOfMemory(
          detail::concat("cudaMalloc of ", nbytes, " bytes on cuda:", device_, " failed"),
          OutOfMemory::Numbers{.requested = nbytes, .free = free_b}, __FILE__, __LINE__);
    }
    ZRT_CUDA_CHECK(st);
    return p;
  }
  void deallocate(void* p) noexcept override {
    CudaDeviceGuard g(device_);
    cudaFree(p);
  }
  Device device() const override { return Device::cuda(device_); }

 private:
  int device_;
};
#endif

}  // namespace

AllocatorPtr huge_page_host_allocator() {
  static const AllocatorPtr host = std::make_shared<HugePageHostAllocator>();
  return host;
}

AllocatorPtr default_allocator(Device device) {
  if (device.is_cpu()) {
    static const AllocatorPtr host = std::make_shared<PlainHostAllocator>();
    return host;
  }
#ifdef ZRT_WITH_CUDA
  // Immutable after creation; one per ordinal, created on first use.
  static std::mutex mu;
  static std::vector<AllocatorPtr> per_device;
  std::lock_guard lock(mu);
  ZRT_CHECK_ARG(device.index >= 0 && device.index < 1024, "bad CUDA ordinal ", device.index);
  if (per_device.size() <= static_cast<std::size_t>(device.index))
    per_device.resize(device.index + 1);
  auto& slot = per_device[device.index];
  if (!slot) slot = std::make_shared<PlainCudaAllocator>(device.index);
  return slot;
#else
  ZRT_THROW(InvalidArgument, "device ", device.str(), ": this build of zrt has no CUDA support");
#endif
}

}  // namespace zrt
