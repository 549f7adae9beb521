#include "zrt/runtime/storage.h"

#include <utility>

#include "zrt/runtime/error.h"

namespace zrt {

Storage::Storage(std::size_t nbytes, AllocatorPtr allocator, Stream stream)
    : allocator_(std::move(allocator)), stream_(stream) {
  ZRT_CHECK_ARG(allocator_ != nullptr, "Storage needs an allocator");
  if (nbytes > 0) allocate(nbytes);
}

Storage::~Storage() { free(); }

void Storage::free() noexcept {
  if (data_ && !lender_) allocator_->deallocate(data_);
  lender_.reset();
  data_ = nullptr;
  nbytes_ = 0;
}

void Storage::allocate(std::size_t nbytes) { allocate(nbytes, stream_); }

void Storage::allocate(std::size_t nbytes, Stream stream) {
  ZRT_CHECK_STATE(is_freed(), "Storage::allocate: storage already holds ", nbytes_,
                  " bytes; free it first (re-sizing live storage is not allowed)");
  if (nbytes == 0) return;
  data_ = allocator_->allocate_for(this, nbytes, stream);
  nbytes_ = nbytes;
  stream_ = stream;
}

void Storage::adopt_memory(Storage& from) {
  ZRT_CHECK_STATE(is_freed(), "Storage::adopt_memory: storage already holds ", nbytes_, " bytes");
  ZRT_CHECK_STATE(!from.is_freed(), "Storage::adopt_memory: the source storage is freed");
  ZRT_CHECK_STATE(!from.is_borrowed(),
                  "Storage::adopt_memory: the source storage's memory is borrowed");
  ZRT_CHECK_ARG(from.allocator_ == allocator_,
                "Storage::adopt_memory: the source storage has another allocator");
  data_ = std::exchange(from.data_, nullptr);
  nbytes_ = std::exchange(from.nbytes_, 0);
  stream_ = from.stream_;
}

void Storage::borrow_memory(std::shared_ptr<Storage> owner) {
  ZRT_CHECK_ARG(owner != nullptr && owner.get() != this,
                "Storage::borrow_memory needs another storage");
  ZRT_CHECK_STATE(is_freed(), "Storage::borrow_memory: storage already holds ", nbytes_, " bytes");
  ZRT_CHECK_STATE(!owner->is_freed(), "Storage::borrow_memory: the owning storage is freed");
  ZRT_CHECK_ARG(owner->allocator_ == allocator_,
                "Storage::borrow_memory: the owning storage has another allocator");
  // Borrowed from a borrower, the memory is its lender's: that storage is
  // kept alive and counts the queued work (counter()), however often the
  // borrowers in between let go (a scope's views, Note [Views live in their
  // scopes], and the issue views of work queued on them).
  if (owner->lender_) owner = owner->lender_;
  ZRT_CHECK_STATE(owner.get() != this && !owner->is_freed(),
                  "Storage::borrow_memory: the storage the memory was borrowed from is ",
                  owner.get() == this ? "this one" : "freed");
  data_ = owner->data_;
  nbytes_ = owner->nbytes_;
  stream_ = owner->stream_;
  lender_ = std::move(owner);
}

void Storage::record_use(Stream stream) {
  ZRT_CHECK_STATE(!is_freed(), "Storage::record_use on freed storage");
  allocator_->record_use(data_, stream);
}

void Storage::claim(std::size_t offset, std::size_t nbytes, const void* owner,
                    const std::string& owner_name, const std::string& param) {
  if (nbytes == 0) return;
  std::lock_guard lock(claims_mutex_);
  for (const auto& c : claims_)
    ZRT_CHECK_ARG(c.owner == owner || offset + nbytes <= c.begin || c.end <= offset, "parameter '",
                  param, "' cannot join flat parameter '", owner_name,
                  "': its memory is already parameter '", c.param, "' of flat parameter '",
                  c.owner_name, "'");
  claims_.push_back({offset, offset + nbytes, owner, owner_name, param});
}

void Storage::release_claims(const void* owner) noexcept {
  std::lock_guard lock(claims_mutex_);
  std::erase_if(claims_, [&](const Claim& c) { return c.owner == owner; });
}

}  // namespace zrt
