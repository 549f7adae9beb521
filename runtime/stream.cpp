#include "zrt/runtime/stream.h"

#include <utility>

#include "zrt/runtime/error.h"
#ifdef ZRT_WITH_CUDA
#include "zrt/runtime/cuda_check.h"
#endif

namespace zrt {

namespace {
[[noreturn, maybe_unused]] void no_cuda(const char* what) {
  ZRT_THROW(InvalidArgument, what, ": this build of zrt has no CUDA support");
}
}  // namespace

void Stream::synchronize() const {
  if (is_cpu()) return;
#ifdef ZRT_WITH_CUDA
  CudaDeviceGuard g(device_.index);
  ZRT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(native_)));
#else
  no_cuda("Stream::synchronize");
#endif
}

OwnedStream::OwnedStream(Device device) {
  if (device.is_cpu()) return;
#ifdef ZRT_WITH_CUDA
  CudaDeviceGuard g(device.index);
  cudaStream_t s = nullptr;
  ZRT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = Stream::cuda(device.index, s);
#else
  no_cuda("OwnedStream");
#endif
}

OwnedStream::~OwnedStream() {
#ifdef ZRT_WITH_CUDA
  if (!stream_.is_cpu() && stream_.native()) cudaStreamDestroy(static_cast<cudaStream_t>(stream_.native()));
#endif
}

OwnedStream& OwnedStream::operator=(OwnedStream&& o) noexcept {
  if (this != &o) {
    OwnedStream dying(std::move(*this));
    stream_ = std::exchange(o.stream_, Stream());
  }
  return *this;
}

Event::Event(Device device, [[maybe_unused]] bool enable_timing) : device_(device) {
  if (device.is_cpu()) return;
#ifdef ZRT_WITH_CUDA
  CudaDeviceGuard g(device.index);
  cudaEvent_t e = nullptr;
  ZRT_CUDA_CHECK(cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
  native_ = e;
#else
  no_cuda("Event");
#endif
}

Event::~Event() {
#ifdef ZRT_WITH_CUDA
  if (native_) cudaEventDestroy(static_cast<cudaEvent_t>(native_));
#endif
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    Event dying(std::move(*this));
    device_ = o.device_;
    native_ = std::exchange(o.native_, nullptr);
  }
  return *this;
}

void Event::record([[maybe_unused]] Stream s) {
  if (!native_) return;
#ifdef ZRT_WITH_CUDA
  // A cpu stream handle with a device event means the device's legacy default stream.
  ZRT_CHECK_ARG(s.is_cpu() || s.device() == device_, "Event::record: event on ", device_.str(),
                " cannot record stream on ", s.device().str());
  CudaDeviceGuard g(device_.index);
  ZRT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(native_), static_cast<cudaStream_t>(s.native())));
#endif
}

void Event::wait([[maybe_unused]] Stream s) const {
  if (!native_) return;
#ifdef ZRT_WITH_CUDA
  CudaDeviceGuard g(s.is_cpu() ? device_.index : s.device().index);
  ZRT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.native()), static_cast<cudaEvent_t>(native_), 0));
#endif
}

void Event::synchronize() const {
  if (!native_) return;
#ifdef ZRT_WITH_CUDA
  ZRT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(native_)));
#endif
}

bool Event::query() const {
  if (!native_) return true;
#ifdef ZRT_WITH_CUDA
  cudaError_t st = cudaEventQuery(static_cast<cudaEvent_t>(native_));
  if (st == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  ZRT_CUDA_CHECK(st);
#endif
  return true;
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  if (!start.native_ || !end.native_) return 0.0f;
#ifdef ZRT_WITH_CUDA
  float ms = 0;
  ZRT_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.native_),
                                      static_cast<cudaEvent_t>(end.native_)));
  return ms;
#else
  return 0.0f;
#endif
}

}  // namespace zrt
