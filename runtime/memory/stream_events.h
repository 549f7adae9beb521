// How the caching allocator learns that work issued to a stream has finished,
// without depending on CUDA: the real source records zrt::Event, tests plug in
// a fake whose events complete when the test says so. See
// Note [Explicit cross-stream lifetimes] in caching_allocator.h.
#pragma once

#include <memory>

#include "zrt/runtime/stream.h"

namespace zrt {

// One recorded marker in a stream's work.
class StreamEvent {
 public:
  virtual ~StreamEvent() = default;
  // True when the work captured at record time has completed. Non-blocking.
  virtual bool query() = 0;
  // Blocks the host until query() would return true.
  virtual void synchronize() = 0;
};

class StreamEventSource {
 public:
  virtual ~StreamEventSource() = default;
  // Captures the work issued to `stream` so far.
  virtual std::unique_ptr<StreamEvent> record(Stream stream) = 0;
};

using StreamEventSourcePtr = std::unique_ptr<StreamEventSource>;

// zrt::Event on the recorded stream's device: it completes when the stream
// reaches it. The default handle Stream{} means what it means to kernels on
// `memory` (the allocator's device): the legacy default stream of a CUDA
// device, asynchronous; on the CPU, complete at once (Note [CPU streams]).
StreamEventSourcePtr make_device_event_source(Device memory);

}  // namespace zrt
