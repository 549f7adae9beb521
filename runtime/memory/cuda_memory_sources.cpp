// The CUDA raw sources: device memory (cudaMalloc) and pinned host memory
// (cudaHostAlloc). Compiled by the host compiler against the CUDA runtime API.
#include <string>

#include "zrt/runtime/error.h"
#include "zrt/runtime/memory/raw_memory_source.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/runtime/cuda_check.h"
#endif

namespace zrt {

#ifdef ZRT_WITH_CUDA
namespace {

// An allocation error is "out of memory" (nullptr to the caller, which may
// flush its cache and retry); anything else is a real CUDA failure.
void* out_of_memory_or_throw(cudaError_t status) {
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-until-read error
    return nullptr;
  }
  ZRT_CUDA_CHECK(status);
  return nullptr;
}

class CudaMemorySource final : public RawMemorySource {
 public:
  explicit CudaMemorySource(int device)
      : device_(device), name_("cudaMalloc on cuda:" + std::to_string(device)) {}

  void* allocate(std::size_t nbytes) override {
    CudaDeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, nbytes);
    return status == cudaSuccess ? ptr : out_of_memory_or_throw(status);
  }
  void fill(void* ptr, std::size_t nbytes, unsigned char byte, Stream stream) override {
    CudaDeviceGuard g(device_);
    auto native = stream.cpu_queue() ? nullptr : static_cast<cudaStream_t>(stream.native());
    ZRT_CUDA_CHECK(cudaMemsetAsync(ptr, byte, nbytes, native));
  }
  void free(void* ptr) noexcept override {
    try {
      CudaDeviceGuard guard(device_);
      cudaFree(ptr);
    } catch (const std::exception& e) {
      report_in_destructor("CudaMemorySource::free", e);
    }
  }
  Device device() const override { return Device::cuda(device_); }
  std::optional<std::size_t> free_bytes() const override {
    CudaDeviceGuard guard(device_);
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    return free_b;
  }
  const char* name() const override { return name_.c_str(); }

 private:
  int device_;
  std::string name_;
};

class PinnedHostMemorySource final : public RawMemorySource {
 public:
  void* allocate(std::size_t nbytes) override {
    void* ptr = nullptr;
    // Portable: usable by copies on every device's streams, not only the
    // device current at allocation time.
    cudaError_t status = cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable);
    return status == cudaSuccess ? ptr : out_of_memory_or_throw(status);
  }
  void free(void* ptr) noexcept override { cudaFreeHost(ptr); }
  Device device() const override { return Device::cpu(); }
  bool page_locked() const override { return true; }
  const char* name() const override { return "pinned host memory"; }
};

}  // namespace

RawMemorySourcePtr make_cuda_memory_source(int device) {
  ZRT_CHECK_ARG(device >= 0 && device < cuda_device_count(),
                "make_cuda_memory_source: no CUDA device ", device, " (", cuda_device_count(),
                " usable)");
  return std::make_unique<CudaMemorySource>(device);
}

RawMemorySourcePtr make_pinned_host_memory_source() {
  return std::make_unique<PinnedHostMemorySource>();
}

#else

RawMemorySourcePtr make_cuda_memory_source(int device) {
  ZRT_THROW(InvalidArgument, "make_cuda_memory_source(cuda:", device,
            "): this build of zrt has no CUDA support");
}

RawMemorySourcePtr make_pinned_host_memory_source() {
  ZRT_THROW(InvalidArgument,
            "make_pinned_host_memory_source: this build of zrt has no CUDA support");
}

#endif

}  // namespace zrt
