#include "runtime/storage.h"

#include "runtime/error.h"

namespace zrt {

Storage::Storage(std::size_t nbytes, AllocatorPtr allocator, Stream stream)
    : allocator_(std::move(allocator)), stream_(stream) {
  ZRT_CHECK_ARG(allocator_ != nullptr, "Storage needs an allocator");
  if (nbytes > 0) allocate(nbytes);
}

Storage::~Storage() { free(); }

void Storage::free() noexcept {
  if (data_) allocator_->deallocate(data_);
  data_ = nullptr;
  nbytes_ = 0;
}

void Storage::allocate(std::size_t nbytes) { allocate(nbytes, stream_); }

void Storage::allocate(std::size_t nbytes, Stream stream) {
  ZRT_CHECK_STATE(is_freed(), "Storage::allocate: storage already holds ", nbytes_,
                  " bytes; free it first (re-sizing live storage is not allowed)");
  if (nbytes == 0) return;
  data_ = allocator_->allocate(nbytes, stream);
  nbytes_ = nbytes;
  stream_ = stream;
}

void Storage::record_use(Stream stream) {
  ZRT_CHECK_STATE(!is_freed(), "Storage::record_use on freed storage");
  allocator_->record_use(data_, stream);
}

}  // namespace zrt
