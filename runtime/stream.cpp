#include "zrt/runtime/stream.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "zrt/runtime/cpu_stream.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/storage.h"
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
  if (is_cpu()) {
    if (CpuStream* q = cpu_queue()) q->synchronize();
    return;
  }
#ifdef ZRT_WITH_CUDA
  CudaDeviceGuard g(device_.index);
  ZRT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(native_)));
#else
  no_cuda("Stream::synchronize");
#endif
}

bool Stream::discards() const {
  const CpuStream* q = cpu_queue();
  return q != nullptr && q->discards();
}

void run_on_cpu_stream(Stream stream, const char* op, std::function<void()> task,
                       std::vector<std::shared_ptr<Storage>> written) {
  ZRT_CHECK_ARG(stream.is_cpu(), op, ": host work cannot be ordered on CUDA stream ",
                stream.device().str());
  CpuStream* q = stream.cpu_queue();
  if (!q) {
    task();
    return;
  }
  if (written.empty()) {
    q->enqueue(op, std::move(task));
    return;
  }
  // Ended as the task returns, before the stream counts it done; dropped
  // unrun (a discarding stream), it ends with the task.
  auto queued = std::make_shared<QueuedWork>(std::move(written));
  q->enqueue(op, [task = std::move(task), queued] {
    task();
    queued->end();
  });
}

OwnedStream::OwnedStream(Device device, std::function<void()> cpu_thread_init) {
  if (device.is_cpu()) {
    cpu_ = std::make_unique<CpuStream>(std::move(cpu_thread_init));
    stream_ = Stream(Device::cpu(), cpu_.get());
    return;
  }
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
  if (!stream_.is_cpu() && stream_.native())
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_.native()));
#endif
}

OwnedStream OwnedStream::discarding() {
  OwnedStream s;
  s.cpu_ = std::make_unique<CpuStream>(CpuStream::Discarding{});
  s.stream_ = Stream(Device::cpu(), s.cpu_.get());
  return s;
}

OwnedStream::OwnedStream(OwnedStream&& o) noexcept
    : stream_(std::exchange(o.stream_, Stream())), cpu_(std::move(o.cpu_)) {}

OwnedStream& OwnedStream::operator=(OwnedStream&& o) noexcept {
  if (this != &o) {
    OwnedStream dying(std::move(*this));
    stream_ = std::exchange(o.stream_, Stream());
    cpu_ = std::move(o.cpu_);
  }
  return *this;
}

// A CPU event: records are numbered; a record completes when its stream's
// queue reaches it, and a wait waits for the record issued before it.
struct Event::CpuState {
  std::mutex mutex;
  std::condition_variable completed_cv;
  std::uint64_t recorded = 0, completed = 0;
  std::exception_ptr failure;                          // of the stream whose record completed last
  std::chrono::steady_clock::time_point completed_at;  // of the last record completed

  // Blocks until record `target` completed; throws its stream's failure.
  void wait_for(std::uint64_t target) {
    std::unique_lock lock(mutex);
    completed_cv.wait(lock, [&] { return completed >= target; });
    if (failure) CpuStream::rethrow(failure, "waiting for an event of a failed CPU stream");
  }
};

Event::Event(Device device, [[maybe_unused]] bool enable_timing) : device_(device) {
  if (device.is_cpu()) {
    cpu_ = std::make_shared<CpuState>();
    return;
  }
#ifdef ZRT_WITH_CUDA
  CudaDeviceGuard g(device.index);
  cudaEvent_t e = nullptr;
  ZRT_CUDA_CHECK(
      cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
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

Event::Event(Event&& o) noexcept
    : device_(o.device_), native_(std::exchange(o.native_, nullptr)), cpu_(std::move(o.cpu_)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    Event dying(std::move(*this));
    device_ = o.device_;
    native_ = std::exchange(o.native_, nullptr);
    cpu_ = std::move(o.cpu_);
  }
  return *this;
}

void Event::record([[maybe_unused]] Stream s) {
  if (cpu_) {
    ZRT_CHECK_ARG(s.is_cpu(), "Event::record: a cpu event cannot record stream on ",
                  s.device().str());
    std::uint64_t target = 0;
    {
      std::lock_guard lock(cpu_->mutex);
      target = ++cpu_->recorded;
    }
    auto complete = [state = cpu_, target, queue = s.cpu_queue()] {
      {
        std::lock_guard lock(state->mutex);
        state->completed = std::max(state->completed, target);
        state->failure = queue ? queue->failure() : nullptr;
        state->completed_at = std::chrono::steady_clock::now();
      }
      state->completed_cv.notify_all();
    };
    if (CpuStream* q = s.cpu_queue()) {
      q->enqueue_always(std::move(complete));
    } else {
      complete();
    }
    return;
  }
  if (!native_) return;
#ifdef ZRT_WITH_CUDA
  // A cpu stream handle with a device event means the device's legacy default stream.
  ZRT_CHECK_ARG(s.is_cpu() || s.device() == device_, "Event::record: event on ", device_.str(),
                " cannot record stream on ", s.device().str());
  ZRT_CHECK_ARG(
      !s.cpu_queue(), "Event::record: event on ", device_.str(),
      " cannot record an owned CPU stream (its work runs on a host thread, not the device)");
  CudaDeviceGuard g(device_.index);
  ZRT_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(native_), static_cast<cudaStream_t>(s.native())));
#endif
}

void Event::wait([[maybe_unused]] Stream s) const {
  if (cpu_) {
    ZRT_CHECK_ARG(s.is_cpu(), "Event::wait: stream on ", s.device().str(),
                  " cannot wait for a cpu event");
    std::uint64_t target = 0;
    {
      std::lock_guard lock(cpu_->mutex);
      if (cpu_->completed >= cpu_->recorded && !cpu_->failure) return;  // nothing in flight
      target = cpu_->recorded;
    }
    run_on_cpu_stream(s, "waiting for an event",
                      [state = cpu_, target] { state->wait_for(target); });
    return;
  }
  if (!native_) return;
#ifdef ZRT_WITH_CUDA
  ZRT_CHECK_ARG(!s.cpu_queue(), "Event::wait: an owned CPU stream cannot wait for an event on ",
                device_.str(), " (its work runs on a host thread, not the device)");
  CudaDeviceGuard g(s.is_cpu() ? device_.index : s.device().index);
  ZRT_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.native()),
                                     static_cast<cudaEvent_t>(native_), 0));
#endif
}

void Event::synchronize() const {
  if (cpu_) {
    std::uint64_t target = 0;
    {
      std::lock_guard lock(cpu_->mutex);
      target = cpu_->recorded;
    }
    cpu_->wait_for(target);
    return;
  }
  if (!native_) return;
#ifdef ZRT_WITH_CUDA
  ZRT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(native_)));
#endif
}

bool Event::wait_for(std::chrono::microseconds limit) const {
  if (!cpu_) return query();
  std::unique_lock lock(cpu_->mutex);
  const std::uint64_t target = cpu_->recorded;
  return cpu_->completed_cv.wait_for(lock, limit, [&] { return cpu_->completed >= target; });
}

bool Event::query() const {
  if (cpu_) {
    std::lock_guard lock(cpu_->mutex);
    return cpu_->completed >= cpu_->recorded;
  }
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
  ZRT_CHECK_ARG(!start.cpu_ == !end.cpu_, "Event::elapsed_ms: a cpu and a device event");
  if (start.cpu_) {
    auto completed_at = [](CpuState& s) {
      std::lock_guard lock(s.mutex);
      ZRT_CHECK_STATE(s.recorded > 0 && s.completed >= s.recorded,
                      "Event::elapsed_ms: an event was not recorded or has not completed");
      return s.completed_at;
    };
    const auto from = completed_at(*start.cpu_), to = completed_at(*end.cpu_);
    return std::chrono::duration<float, std::milli>(to - from).count();
  }
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
