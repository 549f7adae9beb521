// Streams and events: thin RAII wrappers over CUDA's, with a no-op CPU stream
// so the same code path runs on both. Order between streams only via events
// (see Note [Explicit cross-stream lifetimes] in memory/caching_allocator.h).
#pragma once

#include <cstdint>

#include "zrt/runtime/device.h"

namespace zrt {

// A non-owning handle to a stream. The default handle is the CPU stream, on
// which all work is complete as soon as the call that issued it returns. Used
// with CUDA tensors or events it stands for the device's legacy default
// stream, on which work is asynchronous like on any other CUDA stream.
class Stream {
 public:
  Stream() = default;
  static Stream cpu() { return {}; }
  // Wraps a native cudaStream_t (nullptr = the legacy default stream).
  static Stream cuda(int device, void* native) { return Stream(Device::cuda(device), native); }

  Device device() const { return device_; }
  void* native() const { return native_; }  // cudaStream_t, nullptr for cpu
  bool is_cpu() const { return device_.is_cpu(); }
  // A key that tells streams apart (for per-stream free lists).
  std::uintptr_t id() const { return reinterpret_cast<std::uintptr_t>(native_); }
  void synchronize() const;
  friend bool operator==(const Stream&, const Stream&) = default;

 private:
  Stream(Device d, void* native) : device_(d), native_(native) {}
  Device device_ = Device::cpu();
  void* native_ = nullptr;
};

// Owns a non-blocking CUDA stream (or nothing, for cpu).
class OwnedStream {
 public:
  explicit OwnedStream(Device device);
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  OwnedStream(OwnedStream&& o) noexcept : stream_(o.stream_) { o.stream_ = Stream(); }
  OwnedStream& operator=(OwnedStream&& o) noexcept;
  Stream get() const { return stream_; }
  operator Stream() const { return stream_; }

 private:
  Stream stream_;
};

// Owns a CUDA event (timing disabled unless asked). On cpu every operation is a
// no-op and the event counts as complete.
class Event {
 public:
  explicit Event(Device device, bool enable_timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : device_(o.device_), native_(o.native_) { o.native_ = nullptr; }
  Event& operator=(Event&& o) noexcept;

  void record(Stream s);        // capture the work issued to `s` so far
  void wait(Stream s) const;    // make `s` wait for the captured work
  void synchronize() const;     // block the host until it completes
  bool query() const;           // true when complete
  // Milliseconds between two recorded timing events.
  static float elapsed_ms(const Event& start, const Event& end);
  Device device() const { return device_; }

 private:
  Device device_;
  void* native_ = nullptr;  // cudaEvent_t
};

}  // namespace zrt
