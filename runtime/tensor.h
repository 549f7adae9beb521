// Tensor = view metadata (shape, element offset, dtype, name) plus a shared
// Storage. Views are contiguous; several views share one storage. A tensor is
// always fully initialised: the default tensor is an empty f32 cpu tensor of
// shape [0] with no storage. See Note [Freed storage] in storage.h.
//
// Note [Tensor is a small handle]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Layers hold views of the flat parameters and make views of activations on
// every call, so a view must cost no more than its fields. Its shape sits
// inline (Shape, at most Shape::max_dims dims); views are contiguous, so
// there are no strides to keep; the name, which only messages read, is one
// immutable string shared by every view of a tensor; the default tensor has
// no storage. Making, copying or viewing a tensor allocates nothing
// (zrt-bench tensor measures it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zrt/runtime/allocator.h"
#include "zrt/runtime/device.h"
#include "zrt/runtime/dtype.h"
#include "zrt/runtime/dtype_dispatch.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/shape.h"
#include "zrt/runtime/storage.h"
#include "zrt/runtime/stream.h"

namespace zrt {

class Tensor {
 public:
  Tensor() = default;  // an empty f32 cpu tensor of shape [0], no storage

  // New storage of exactly numel*itemsize bytes, uninitialised.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu(),
                      AllocatorPtr allocator = nullptr, Stream stream = {});
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu(),
                      AllocatorPtr allocator = nullptr);
  static Tensor full(const Shape& shape, double value, DType dtype, Device device = Device::cpu(),
                     AllocatorPtr allocator = nullptr);
  // A tensor with the given values cast to `dtype` (shape defaults to [n]).
  static Tensor from_doubles(const std::vector<double>& values, DType dtype,
                             Device device = Device::cpu(), Shape shape = {});
  // A copy of `shape`'s elements of `dtype` read from host memory at `data`.
  static Tensor from_host(const void* data, const Shape& shape, DType dtype,
                          Device device = Device::cpu());
  // A view of an existing storage (no allocation); checked on data access.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                             std::int64_t offset = 0, std::string name = {});

  // --- metadata -----------------------------------------------------------
  const Shape& shape() const { return shape_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  std::int64_t size(int d) const;
  std::int64_t numel() const { return numel_; }
  std::int64_t offset() const { return offset_; }  // in elements of dtype
  DType dtype() const { return dtype_; }
  std::size_t itemsize() const { return dtype_size(dtype_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * itemsize(); }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const std::string& name() const;
  Tensor& set_name(std::string name);
  // "name[2, 3] bf16 cuda:0" for messages.
  std::string str() const;

  // The storage; InvalidState for a default tensor, which has none.
  Storage& storage() const;
  const std::shared_ptr<Storage>& storage_ptr() const { return storage_; }  // null: none
  // One storage, or two holding the same memory (a borrowed one, an issue_view).
  bool shares_storage(const Tensor& o) const {
    return storage_ && o.storage_ &&
           (storage_ == o.storage_ || (storage_->data() && storage_->data() == o.storage_->data()));
  }
  // Shares at least one byte with `o` (tensors are contiguous: byte ranges).
  bool overlaps(const Tensor& o) const {
    if (!shares_storage(o) || numel_ == 0 || o.numel_ == 0) return false;
    const std::int64_t begin = offset_ * static_cast<std::int64_t>(itemsize());
    const std::int64_t o_begin = o.offset_ * static_cast<std::int64_t>(o.itemsize());
    return begin < o_begin + static_cast<std::int64_t>(o.nbytes()) &&
           o_begin < begin + static_cast<std::int64_t>(nbytes());
  }
  bool is_freed() const { return !storage_ || storage_->is_freed(); }
  // For messages about a freed tensor: str() and its storage's freed note,
  // e.g. "fc1.bias[32] f32 cpu has freed storage" (Note [Freed storage]).
  std::string freed_str() const;

  // --- views (share storage; always contiguous) ---------------------------
  // Same elements, new shape; one dim may be -1.
  Tensor view(Shape shape) const;
  Tensor flatten() const { return view({numel_}); }
  // Flat 1-D slice [start, start+length) of the elements.
  Tensor slice(std::int64_t start, std::int64_t length) const;
  // Rows [start, start+length) along dim 0.
  Tensor narrow(std::int64_t start, std::int64_t length) const;
  // A view of the memory the tensor has now, which a later free or
  // re-allocation of its storage does not move: what work issued to an owned
  // CPU stream reads, as a CUDA launch reads the pointers it was given (Note
  // [CPU streams]). The tensor itself when it holds no memory.
  Tensor issue_view() const;

  // --- data ---------------------------------------------------------------
  // Pointer to the first element. Throws InvalidState naming the tensor if its
  // storage is freed or smaller than the view needs.
  void* data_ptr() const;
  template <class T>
  T* data() const {
    ZRT_CHECK_ARG(dtype_of<T>() == dtype_, "tensor ", str(), " accessed as ",
                  dtype_name(dtype_of<T>()));
    return static_cast<T*>(data_ptr());
  }

  // Copies src into this (equal numel; any dtype and device pair, casting
  // with round-to-nearest-even). Copies are ordered on `stream`: an owned CPU
  // stream runs a host copy on its thread; CUDA copies are synchronised when
  // the host is involved.
  Tensor& copy_(const Tensor& src, Stream stream = {});
  // The same copy (equal dtypes), but one between a CUDA device and host
  // memory returns once it is enqueued on `stream`: the host side must be
  // page-locked (Allocator::page_locked; InvalidArgument otherwise), and
  // the caller neither reads nor rewrites it before `stream` has passed the
  // copy. Between host tensors it is copy_.
  Tensor& copy_async_(const Tensor& src, Stream stream);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor clone() const;

  // Element access for tests and tools (cpu or cuda; slow on cuda).
  double item(std::int64_t flat_index) const;
  void set_item(std::int64_t flat_index, double value);
  // item() and to_doubles() read on the host: InvalidState while a kernel
  // queued on a CPU stream names the tensor (Note [Host reads of queued work]).
  std::vector<double> to_doubles() const;

 private:
  using Name = std::shared_ptr<const std::string>;
  Tensor(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, std::int64_t offset,
         Name name);
  void check_host_read(const char* read) const;  // `read`: item or to_doubles

  std::shared_ptr<Storage> storage_;
  Name name_;  // null: unnamed
  std::int64_t numel_ = 0;
  std::int64_t offset_ = 0;
  Shape shape_{0};
  DType dtype_ = DType::f32;
};

// The reference code's _free_storage / _alloc_storage pair: free the memory
// behind `t` (all views stay valid objects), or give a freed storage exactly
// enough bytes for `t` (offset + numel elements) back.
void free_storage(const Tensor& t);
void alloc_storage(const Tensor& t);

}  // namespace zrt
