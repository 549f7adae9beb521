#include "zrt/runtime/comm/host_staging.h"

#include "zrt/runtime/device.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/runtime/memory/caching_allocator.h"
#endif

namespace zrt {

AllocatorPtr HostStagingPool::allocator() {
#ifdef ZRT_WITH_CUDA
  // Pinned memory needs a CUDA device; a CUDA build on a machine without one
  // stages through plain host memory (the default allocator).
  std::call_once(once_, [this] {
    if (cuda_available()) allocator_ = make_pinned_host_allocator();
  });
#endif
  return allocator_;
}

Tensor host_staging_like(const Tensor& t, HostStagingPool* pool) {
  // An empty tensor holds no memory: nothing to pin.
  AllocatorPtr alloc = pool != nullptr && t.numel() > 0 ? pool->allocator() : nullptr;
  return Tensor::empty(t.shape(), t.dtype(), Device::cpu(), std::move(alloc));
}

Tensor host_input(const Tensor& t, Stream stream, HostStagingPool* pool) {
  if (t.device().is_cpu()) return t;
  // A device-to-host copy_ is ordered after the stream's work and waits for it.
  Tensor h = host_staging_like(t, pool);
  h.copy_(t, stream);
  return h;
}

Tensor host_output(const Tensor& t, HostStagingPool* pool) {
  return t.device().is_cpu() ? t : host_staging_like(t, pool);
}

void finish_output(const Tensor& t, const Tensor& host, Stream stream) {
  if (!t.device().is_cpu()) Tensor(t).copy_(host, stream);
}

const std::byte* bytes_of(const Tensor& t) {
  return t.numel() == 0 ? nullptr : static_cast<const std::byte*>(t.data_ptr());
}

std::byte* mutable_bytes_of(const Tensor& t) {
  return t.numel() == 0 ? nullptr : static_cast<std::byte*>(t.data_ptr());
}

}  // namespace zrt
