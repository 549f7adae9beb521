#include "zrt/runtime/memory/stream_events.h"

namespace zrt {

namespace {

// The device whose event marks `stream`: its own, but for the default handle
// Stream{}, which with a CUDA allocator's memory stands for that device's
// legacy default stream (an asynchronous stream, not "complete at once").
Device event_device(Stream stream, Device memory) {
  return stream.is_cpu() && !stream.cpu_queue() ? memory : stream.device();
}

class DeviceStreamEvent final : public StreamEvent {
 public:
  DeviceStreamEvent(Stream stream, Device memory) : event_(event_device(stream, memory)) {
    event_.record(stream);
  }
  bool query() override { return event_.query(); }
  void synchronize() override { event_.synchronize(); }

 private:
  Event event_;
};

class DeviceEventSource final : public StreamEventSource {
 public:
  explicit DeviceEventSource(Device memory) : memory_(memory) {}
  std::unique_ptr<StreamEvent> record(Stream stream) override {
    return std::make_unique<DeviceStreamEvent>(stream, memory_);
  }

 private:
  Device memory_;
};

}  // namespace

StreamEventSourcePtr make_device_event_source(Device memory) {
  return std::make_unique<DeviceEventSource>(memory);
}

}  // namespace zrt
