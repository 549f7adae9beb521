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
    // An empty tensor reads and writes nothing: it may have no storage.
    // Memory its owner freed and said where it lives (a ZeroModule view
    // outside its scope) is the caller's to mend, as in Tensor::data_ptr.
    if (t.numel() != 0 && t.is_freed()) {
      if (t.storage().has_freed_note()) ZRT_THROW_CALL(op, ": ", t.freed_str());
      ZRT_THROW(InvalidState, op, ": ", t.freed_str());
    }
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

void check_apart(const char* op, const Tensor& out, const char* in_name, const Tensor& in,
                 bool in_place) {
  const bool same = in_place && out.shares_storage(in) && out.offset() == in.offset() &&
                    out.nbytes() == in.nbytes();
  ZRT_CHECK_ARG(same || !out.overlaps(in), op, ": output ", out.str(), " overlaps ", in_name, " ",
                in.str(), in_place ? " without being it" : "",
                ": it would be written while it is read");
}

void check_disjoint(const char* op, NamedTensors outputs) {
  for (auto a = outputs.begin(); a != outputs.end(); ++a)
    for (auto b = a + 1; b != outputs.end(); ++b)
      ZRT_CHECK_ARG(!a->second.get().overlaps(b->second.get()), op, ": outputs ", a->first, " ",
                    a->second.get().str(), " and ", b->first, " ", b->second.get().str(),
                    " share memory: one would overwrite the other");
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
