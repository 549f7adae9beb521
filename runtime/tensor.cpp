#include "zrt/runtime/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#ifdef ZRT_WITH_CUDA
#include "zrt/runtime/cuda_check.h"
#endif

namespace zrt {

namespace {

// One element as a double, and a double as one element; the 16-bit floats
// convert through f32 (Note [16-bit storage types]).
template <class T>
double to_double(T x) {
  if constexpr (is_float16_v<T>)
    return to_f32(x);
  else
    return static_cast<double>(x);
}
// Into an integer type the fraction is dropped (a cast toward zero); NaN,
// an infinity or a value beyond the type's range has no integer, and a bare
// cast of it is undefined: InvalidArgument naming it. The bounds are powers
// of two, exact in a double (max + 1.0 is not, for i64).
template <class T>
T from_double(double v) {
  if constexpr (is_float16_v<T>) {
    return from_f32<T>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    const double whole = std::trunc(v);
    const double end = std::ldexp(1.0, std::numeric_limits<T>::digits);
    ZRT_CHECK_ARG(whole >= (std::is_signed_v<T> ? -end : 0.0) && whole < end, "value ", v,
                  " is not representable in ", dtype_name(dtype_of<T>()));
    return static_cast<T>(whole);
  } else {
    return static_cast<T>(v);
  }
}

// A value the caller gives an integer tensor is a whole number: 2.5 as a
// token id would silently be 2.
void check_whole(const char* op, double v, DType t) {
  ZRT_CHECK_ARG(is_floating(t) || v == std::floor(v), op, ": value ", v,
                " is not a whole number, as ", dtype_name(t), " needs");
}

// Converts one element; integers convert directly, anything else via double.
template <class Dst, class Src>
Dst convert(Src s) {
  if constexpr (std::is_integral_v<Dst> && std::is_integral_v<Src>) {
    ZRT_CHECK_ARG(std::in_range<Dst>(s), "value ", static_cast<std::int64_t>(s),
                  " is not representable in ", dtype_name(dtype_of<Dst>()));
    return static_cast<Dst>(s);
  } else
    return from_double<Dst>(to_double(s));
}

void host_cast(const void* src, DType src_t, void* dst, DType dst_t, std::int64_t n) {
  dispatch<HostTypes>(src_t, "copy_", [&](auto st) {
    using S = typename decltype(st)::type;
    dispatch<HostTypes>(dst_t, "copy_", [&](auto dt) {
      using D = typename decltype(dt)::type;
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
    });
  });
}

// Copies raw bytes between any two devices; synchronous when the host is
// involved unless `host_waits` is false (the host side is page-locked and
// the caller orders its use by the stream).
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, std::size_t n,
                [[maybe_unused]] Stream stream, [[maybe_unused]] bool host_waits = true) {
  if (n == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
#ifdef ZRT_WITH_CUDA
  ZRT_CHECK_ARG(!stream.cpu_queue(), "copy between ", src_dev.str(), " and ", dst_dev.str(),
                ": an owned CPU stream cannot order a device copy (use the device's stream)");
  int dev = dst_dev.is_cuda() ? dst_dev.index : src_dev.index;
  CudaDeviceGuard g(dev);
  auto s = static_cast<cudaStream_t>(stream.native());
  if (dst_dev.is_cuda() && src_dev.is_cuda() && dst_dev.index != src_dev.index)
    ZRT_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev.index, src, src_dev.index, n, s));
  else
    ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
  if ((host_waits && (dst_dev.is_cpu() || src_dev.is_cpu())) || stream.is_cpu())
    ZRT_CUDA_CHECK(cudaStreamSynchronize(s));
#else
  ZRT_THROW(InvalidArgument, "copy between ", src_dev.str(), " and ", dst_dev.str(),
            ": this build of zrt has no CUDA support");
#endif
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
               std::int64_t offset, Name name)
    : storage_(std::move(storage)),
      name_(std::move(name)),
      numel_(shape_numel(shape)),
      offset_(offset),
      shape_(shape),
      dtype_(dtype) {
  ZRT_CHECK_ARG(storage_ != nullptr || numel_ == 0, "tensor ", str(), " needs a storage");
  ZRT_CHECK_ARG(offset_ >= 0, "negative element offset ", offset_);
}

const std::string& Tensor::name() const {
  static const std::string unnamed;
  return name_ ? *name_ : unnamed;
}

Tensor& Tensor::set_name(std::string name) {
  name_ = name.empty() ? nullptr : std::make_shared<const std::string>(std::move(name));
  return *this;
}

Storage& Tensor::storage() const {
  ZRT_CHECK_STATE(storage_ != nullptr, "tensor ", str(), " has no storage (a default tensor)");
  return *storage_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, AllocatorPtr allocator,
                     Stream stream) {
  std::int64_t n = shape_numel(shape);
  if (!allocator) allocator = default_allocator(device);
  ZRT_CHECK_ARG(allocator->device() == device, "allocator for ", allocator->device().str(),
                " cannot allocate a tensor on ", device.str());
  ZRT_CHECK_ARG(static_cast<std::uint64_t>(n) <= std::numeric_limits<std::uint64_t>::max() / 8,
                "shape ", shape_str(shape), " is too large");
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(n) * dtype_size(dtype),
                                           std::move(allocator), stream);
  return Tensor(std::move(storage), shape, dtype, 0, {});
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, AllocatorPtr allocator) {
  return full(shape, 0.0, dtype, device, std::move(allocator));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device,
                    AllocatorPtr allocator) {
  Tensor t = empty(shape, dtype, device, std::move(allocator));
  t.fill_(value);
  return t;
}

Tensor Tensor::from_doubles(const std::vector<double>& values, DType dtype, Device device,
                            Shape shape) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  ZRT_CHECK_ARG(shape_numel(shape) == static_cast<std::int64_t>(values.size()),
                "from_doubles: ", values.size(), " values do not fill shape ", shape_str(shape));
  for (double v : values) check_whole("from_doubles", v, dtype);
  Tensor host = empty(shape, DType::f64);
  if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(double));
  Tensor out = empty(shape, dtype, device);
  out.copy_(host);
  return out;
}

Tensor Tensor::from_host(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor out = empty(shape, dtype, device);
  ZRT_CHECK_ARG(data != nullptr || out.numel() == 0, "from_host: null data for shape ",
                shape_str(shape));
  copy_bytes(out.data_ptr(), device, data, Device::cpu(), out.nbytes(), {});
  return out;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                            std::int64_t offset, std::string name) {
  ZRT_CHECK_ARG(storage != nullptr, "from_storage: no storage");
  Tensor t(std::move(storage), shape, dtype, offset, nullptr);
  // A view past the end would fail only at its first use, as an internal check.
  const auto end = static_cast<std::size_t>(offset + t.numel()) * t.itemsize();
  ZRT_CHECK_ARG(t.storage().is_freed() || end <= t.storage().nbytes(),
                "from_storage: ", shape_str(shape), " ", dtype_name(dtype), " at element ", offset,
                " ends at byte ", end, ", past the storage's ", t.storage().nbytes(), " bytes");
  return t.set_name(std::move(name));
}

std::int64_t Tensor::size(int d) const {
  int nd = dim();
  if (d < 0) d += nd;
  ZRT_CHECK_ARG(d >= 0 && d < nd, "dimension ", d, " out of range for ", str());
  return shape_[d];
}

std::string Tensor::str() const {
  return (name_ ? *name_ : std::string("tensor")) + shape_str(shape_) + " " + dtype_name(dtype_) +
         " " + device().str();
}

std::string Tensor::freed_str() const {
  return str() + " " + (storage_ ? storage_->freed_note() : std::string("has no storage"));
}

Tensor Tensor::view(Shape shape) const {
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      ZRT_CHECK_ARG(infer < 0, "view of ", str(), ": more than one -1 in ", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      ZRT_CHECK_ARG(shape[i] >= 0, "view of ", str(), ": negative dim in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    ZRT_CHECK_ARG(known != 0 && numel_ % known == 0, "view of ", str(), ": cannot infer -1 in ",
                  shape_str(shape));
    shape[infer] = numel_ / known;
  }
  ZRT_CHECK_ARG(shape_numel(shape) == numel_, "view of ", str(), " as ", shape_str(shape),
                ": element counts differ");
  return Tensor(storage_, std::move(shape), dtype_, offset_, name_);
}

Tensor Tensor::slice(std::int64_t start, std::int64_t length) const {
  ZRT_CHECK_ARG(start >= 0 && length >= 0 && start <= numel_ && length <= numel_ - start, "slice [",
                start, ", ", start, "+", length, ") out of bounds of ", str());
  return Tensor(storage_, {length}, dtype_, offset_ + start, name_);
}

Tensor Tensor::narrow(std::int64_t start, std::int64_t length) const {
  ZRT_CHECK_ARG(dim() >= 1, "narrow of 0-d tensor ", str());
  ZRT_CHECK_ARG(start >= 0 && length >= 0 && start <= shape_[0] && length <= shape_[0] - start,
                "narrow [", start, ", ", start, "+", length, ") out of bounds of ", str());
  Shape s = shape_;
  s[0] = length;
  std::int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  return Tensor(storage_, std::move(s), dtype_, offset_ + start * row, name_);
}

void* Tensor::data_ptr() const {
  if (is_freed()) {
    if (numel_ == 0) return nullptr;
    // Memory its owner freed and said where it lives (a ZeroModule view
    // outside its scope) is the caller's to mend; any other is zrt's bug.
    if (storage_ && storage_->has_freed_note()) ZRT_THROW_CALL("data access to ", freed_str());
    ZRT_THROW(InvalidState, "data access to ", freed_str());
  }
  std::size_t end = static_cast<std::size_t>(offset_ + numel_) * itemsize();
  ZRT_CHECK_STATE(end <= storage_->nbytes(), "tensor ", str(), " needs ", end,
                  " bytes but its storage holds ", storage_->nbytes());
  return static_cast<char*>(storage_->data()) + static_cast<std::size_t>(offset_) * itemsize();
}

Tensor Tensor::issue_view() const {
  if (is_freed()) return *this;
  auto memory = std::make_shared<Storage>(0, storage_->allocator(), storage_->stream());
  memory->borrow_memory(storage_);
  return Tensor(std::move(memory), shape_, dtype_, offset_, name_);
}

Tensor& Tensor::copy_(const Tensor& src, Stream stream) {
  ZRT_CHECK_ARG(src.numel() == numel_, "copy_ into ", str(), " from ", src.str(),
                ": element counts differ");
  if (numel_ == 0) return *this;
  void* d = data_ptr();
  const void* s = src.data_ptr();
  if (device().is_cpu() && src.device().is_cpu() && stream.cpu_queue()) {
    // The pointers are taken now, as a CUDA copy takes them (Note [CPU
    // streams]); the destination counts it while it is queued (Note [Host
    // reads of queued work]).
    run_on_cpu_stream(stream, "copy_",
                      [d, s, n = numel_, dt = dtype_, st = src.dtype()] {
                        if (dt == st)
                          std::memcpy(d, s, static_cast<std::size_t>(n) * dtype_size(dt));
                        else
                          host_cast(s, st, d, dt, n);
                      },
                      {storage_});
  } else if (src.dtype() == dtype_) {
    copy_bytes(d, device(), s, src.device(), nbytes(), stream);
  } else if (device().is_cpu() && src.device().is_cpu()) {
    host_cast(s, src.dtype(), d, dtype_, numel_);
  } else {
    // Casting copies that touch a device stage through the host; hot paths use kernels/cast.
    Tensor src_host = src;
    if (!src.device().is_cpu()) {
      src_host = empty(src.shape(), src.dtype());
      src_host.copy_(src, stream);
    }
    Tensor dst_host = empty(shape_, dtype_);
    host_cast(src_host.data_ptr(), src.dtype(), dst_host.data_ptr(), dtype_, numel_);
    copy_bytes(d, device(), dst_host.data_ptr(), Device::cpu(), nbytes(), stream);
  }
  return *this;
}

Tensor& Tensor::copy_async_(const Tensor& src, Stream stream) {
  ZRT_CHECK_ARG(src.dtype() == dtype_, "copy_async_ into ", str(), " from ", src.str(),
                ": dtypes differ");
  if (device().is_cpu() == src.device().is_cpu()) return copy_(src, stream);
  const Tensor& host = device().is_cpu() ? *this : src;
  ZRT_CHECK_ARG(host.storage().allocator() && host.storage().allocator()->page_locked(),
                "copy_async_ between ", src.str(), " and ", str(),
                ": the host side is not page-locked memory (a pinned allocator's)");
  ZRT_CHECK_ARG(src.numel() == numel_, "copy_async_ into ", str(), " from ", src.str(),
                ": element counts differ");
  if (numel_ == 0) return *this;
  copy_bytes(data_ptr(), device(), src.data_ptr(), src.device(), nbytes(), stream,
             /*host_waits=*/false);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_whole("fill_", value, dtype_);
  if (numel_ == 0) return *this;
  Tensor host = device().is_cpu() ? *this : empty(shape_, dtype_);
  dispatch<HostTypes>(dtype_, "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = from_double<T>(value);
    T* p = static_cast<T*>(host.data_ptr());
    for (std::int64_t i = 0; i < numel_; ++i) p[i] = v;
  });
  if (!device().is_cpu()) copy_(host);
  return *this;
}

Tensor Tensor::to(Device dev) const {
  Tensor out = empty(shape_, dtype_, dev);
  out.name_ = name_;
  return out.copy_(*this);
}

Tensor Tensor::to(DType dt) const {
  Tensor out = empty(shape_, dt, device());
  out.name_ = name_;
  return out.copy_(*this);
}

Tensor Tensor::clone() const { return to(dtype_); }

void Tensor::check_host_read(const char* read) const {
  if (!storage_ || storage_->queued_work() == 0) return;
  ZRT_THROW_CALL("Tensor::", read, ": ", str(), " is named by ", storage_->queued_work(),
                 " kernel(s) or copies queued on a CPU stream that have not run, so a host read "
                 "now sees the values from before them: synchronize that stream first "
                 "(ZeroModule::synchronize() for the module's streams)",
                 " (Note [Host reads of queued work])");
}

double Tensor::item(std::int64_t i) const {
  ZRT_CHECK_ARG(i >= 0 && i < numel_, "item ", i, " out of bounds of ", str());
  check_host_read("item");
  Tensor one = slice(i, 1);
  if (!device().is_cpu()) one = one.to(Device::cpu());
  return dispatch<HostTypes>(dtype_, "item", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return to_double(*static_cast<const T*>(one.data_ptr()));
  });
}

void Tensor::set_item(std::int64_t i, double value) {
  ZRT_CHECK_ARG(i >= 0 && i < numel_, "set_item ", i, " out of bounds of ", str());
  check_whole("set_item", value, dtype_);
  slice(i, 1).copy_(from_doubles({value}, DType::f64));
}

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> out(static_cast<std::size_t>(numel_));
  if (numel_ == 0) return out;
  check_host_read("to_doubles");
  Tensor host = to(Device::cpu()).to(DType::f64);
  std::memcpy(out.data(), host.data_ptr(), out.size() * sizeof(double));
  return out;
}

void free_storage(const Tensor& t) {
  if (t.storage_ptr()) t.storage().free();
}

void alloc_storage(const Tensor& t) {
  t.storage().allocate(static_cast<std::size_t>(t.offset() + t.numel()) * t.itemsize());
}

}  // namespace zrt
