#include "zrt/kernels/ops/op_checks.h"

#include "zrt/kernels/dispatch.h"

namespace zrt::kernels {

Device check_operands(const char* op, TensorRefs tensors, Stream stream) {
  ZRT_CHECK_ARG(tensors.size() > 0, op, ": no operands");
  const Tensor& first = tensors.begin()->get();
  const Device device = first.device();
  for (const Tensor& t : tensors) {
    ZRT_CHECK_ARG(t.device() == device, op, ": operands on different devices: ", first.str(),
                  " and ", t.str());
    ZRT_CHECK_STATE(!t.is_freed(), op, ": ", t.freed_str());
    t.data_ptr();  // throws InvalidState naming the tensor if its storage is too small
  }
  if (device.is_cpu()) {
    ZRT_CHECK_ARG(stream.is_cpu(), op, ": cpu tensors with a stream of ", stream.device());
  } else {
    ZRT_CHECK_ARG(stream.is_cpu() || stream.device() == device, op, ": tensors on ", device,
                  " with a stream of ", stream.device());
    ZRT_CHECK_ARG(!stream.cpu_queue(), op, ": tensors on ", device, " with an owned CPU stream");
  }
  return device;
}

void check_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  ZRT_CHECK_ARG(a.numel() == b.numel(), op, ": numel mismatch between ", a.str(), " and ", b.str());
}

void check_dtype(const char* op, const Tensor& t, DType expected) {
  ZRT_CHECK_ARG(t.dtype() == expected, op, ": ", t.str(), " must be ", dtype_name(expected));
}

void check_kernel_float(const char* op, const Tensor& t) {
  ZRT_CHECK_ARG(has_dtype<StorageFloats>(t.dtype()), op, ": ", t.str(),
                " must be f32, bf16 or f16");
}

}  // namespace zrt::kernels
