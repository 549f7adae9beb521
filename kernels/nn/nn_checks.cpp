#include "zrt/kernels/nn/nn_checks.h"

#include "zrt/kernels/dispatch.h"

namespace zrt::kernels {

void check_nn_floats(const char* op, TensorRefs tensors) {
  // The dtype to match is a named operand's (a parameter's) where there is
  // one: an unnamed activation that differs is the one to blame.
  const Tensor* ref = &tensors.begin()->get();
  for (const Tensor& t : tensors)
    if (!t.name().empty()) {
      ref = &t;
      break;
    }
  ZRT_CHECK_ARG(is_floating(ref->dtype()), op, ": ", ref->str(), " must be f32, bf16, f16 or f64");
  for (const Tensor& t : tensors) {
    ZRT_CHECK_ARG(t.dtype() == ref->dtype(), op, ": ", t.str(), " must have dtype ",
                  dtype_name(ref->dtype()), " like ", ref->str());
  }
}

void check_numel(const char* op, const Tensor& t, std::int64_t numel) {
  ZRT_CHECK_ARG(t.numel() == numel, op, ": ", t.str(), " must have ", numel, " elements");
}

void check_ids(const char* op, const Tensor& t) {
  ZRT_CHECK_ARG(t.dtype() == DType::i32 || t.dtype() == DType::i64, op, ": ", t.str(),
                " must hold i32 or i64 ids");
}

std::vector<std::int64_t> read_host_ids(const char* op, const Tensor& ids, Stream stream) {
  check_ids(op, ids);
  std::vector<std::int64_t> out(static_cast<std::size_t>(ids.numel()));
  if (ids.numel() == 0) return out;
  Tensor host = ids;
  if (!ids.device().is_cpu()) {
    host = Tensor::empty(ids.shape(), ids.dtype());
    host.copy_(ids, stream);  // waits for `stream`, where the ids were written
  }
  dispatch<IdTypes>(ids.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = static_cast<const I*>(host.data_ptr());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int64_t>(p[i]);
  });
  return out;
}

std::vector<std::int64_t> host_ids(const char* op, const Tensor& ids, std::int64_t limit,
                                   bool allow_negative, Stream stream) {
  std::vector<std::int64_t> out = read_host_ids(op, ids, stream);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ZRT_CHECK_ARG(out[i] < limit && (allow_negative || out[i] >= 0), op, ": id ", out[i],
                  " at position ", i, " of ", ids.str(), " is outside [0, ", limit, ")");
  }
  return out;
}

DType acc_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

std::int64_t matrix_rows(const Tensor& t) {
  std::int64_t rows = 1;
  for (int d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);  // right even when the last dim is 0
  return rows;
}

}  // namespace zrt::kernels
