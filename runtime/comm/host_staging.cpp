#include "runtime/comm/host_staging.h"

namespace zrt {

Tensor host_input(const Tensor& t, Stream stream) {
  if (t.device().is_cpu()) return t;
  stream.synchronize();
  return t.to(Device::cpu());
}

Tensor host_output(const Tensor& t) {
  return t.device().is_cpu() ? t : Tensor::empty(t.shape(), t.dtype(), Device::cpu());
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
