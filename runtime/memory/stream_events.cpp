#include "zrt/runtime/memory/stream_events.h"

namespace zrt {

namespace {

class DeviceStreamEvent final : public StreamEvent {
 public:
  explicit DeviceStreamEvent(Stream stream) : event_(stream.device()) { event_.record(stream); }
  bool query() override { return event_.query(); }
  void synchronize() override { event_.synchronize(); }

 private:
  Event event_;
};

class DeviceEventSource final : public StreamEventSource {
 public:
  std::unique_ptr<StreamEvent> record(Stream stream) override {
    return std::make_unique<DeviceStreamEvent>(stream);
  }
};

}  // namespace

StreamEventSourcePtr make_device_event_source() { return std::make_unique<DeviceEventSource>(); }

}  // namespace zrt
