// Streams and events: thin RAII wrappers over CUDA's, and over zrt's CPU
// streams (Note [CPU streams] in cpu_stream.h), so the same code path runs on
// both. Order between streams only via events (see Note [Explicit
// cross-stream lifetimes] in memory/caching_allocator.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "zrt/runtime/device.h"

namespace zrt {

class CpuStream;
class Storage;

// A non-owning handle to a stream. The default handle is the CPU stream, on
// which all work is complete as soon as the call that issued it returns. Used
// with CUDA tensors or events it stands for the device's legacy default
// stream, on which work is asynchronous like on any other CUDA stream. An
// owned CPU stream's handle names its queue (cpu_queue()).
class Stream {
 public:
  Stream() = default;
  static Stream cpu() { return {}; }
  // Wraps a native cudaStream_t (nullptr = the legacy default stream).
  static Stream cuda(int device, void* native) { return Stream(Device::cuda(device), native); }

  Device device() const { return device_; }
  void* native() const { return native_; }  // cudaStream_t; CpuStream* or nullptr for cpu
  bool is_cpu() const { return device_.is_cpu(); }
  // The owned CPU stream's queue; null for the default CPU stream and CUDA.
  CpuStream* cpu_queue() const { return is_cpu() ? static_cast<CpuStream*>(native_) : nullptr; }
  // Whether work issued to it is dropped (OwnedStream::discarding()).
  bool discards() const;
  // A key that tells streams apart (for per-stream free lists).
  std::uintptr_t id() const { return reinterpret_cast<std::uintptr_t>(native_); }
  void synchronize() const;
  friend bool operator==(const Stream&, const Stream&) = default;

 private:
  friend class OwnedStream;
  Stream(Device d, void* native) : device_(d), native_(native) {}
  Device device_ = Device::cpu();
  void* native_ = nullptr;
};

// Runs `task` in `stream`'s order on the host: now, on the calling thread, for
// the default CPU stream; on the stream's thread for an owned CPU stream
// (`op` names it in a failure). There, `written` (the storages it writes)
// count it from now until it returns (Note [Host reads of queued work]).
// InvalidArgument for a CUDA stream.
void run_on_cpu_stream(Stream stream, const char* op, std::function<void()> task,
                       std::vector<std::shared_ptr<Storage>> written = {});

// Owns a non-blocking CUDA stream, or for cpu a CPU stream with a thread of
// its own that first runs `cpu_thread_init` (Note [CPU streams]).
class OwnedStream {
 public:
  explicit OwnedStream(Device device, std::function<void()> cpu_thread_init = {});
  // A CPU stream that drops every kernel, copy and collective issued to it
  // (Note [CPU streams]; Note [Dry runs] in model_zoo/trainer/memory_plan.h).
  static OwnedStream discarding();
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  OwnedStream(OwnedStream&& o) noexcept;
  OwnedStream& operator=(OwnedStream&& o) noexcept;
  Stream get() const { return stream_; }
  operator Stream() const { return stream_; }

 private:
  OwnedStream() = default;
  Stream stream_;
  std::unique_ptr<CpuStream> cpu_;
};

// Owns a CUDA event (timing disabled unless asked), or a CPU stream's event.
// A CPU event recorded on the default CPU stream is complete at once.
class Event {
 public:
  explicit Event(Device device, bool enable_timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;

  void record(Stream s);      // capture the work issued to `s` so far
  void wait(Stream s) const;  // make `s` wait for the captured work
  void synchronize() const;   // block the host until it completes
  bool query() const;         // true when complete (a failed CPU stream's record counts)
  // Blocks the host up to `limit` for the captured work and says whether it
  // completed: a CPU event wakes the moment it does; a CUDA one is queried
  // once, at once (the caller sleeps between tries).
  bool wait_for(std::chrono::microseconds limit) const;
  // Milliseconds between two recorded timing events, both completed: on
  // CUDA device time; on the CPU the host clock when each completed (its
  // stream reached it).
  static float elapsed_ms(const Event& start, const Event& end);
  Device device() const { return device_; }

 private:
  struct CpuState;
  Device device_;
  void* native_ = nullptr;         // cudaEvent_t
  std::shared_ptr<CpuState> cpu_;  // cpu: shared with the records in flight
};

}  // namespace zrt
