// Storage owns the bytes behind tensors.
//
// Note [Freed storage]
// ~~~~~~~~~~~~~~~~~~~~
// ZeRO-3 keeps the unsharded flat parameter and its gradients only while a
// unit computes. Their Storage is *freed* (size 0, memory back to the
// allocator) in between, while every view into it (the original parameters,
// their gradients) stays a valid Tensor object with its shape and offset. Any
// data access while freed throws InvalidState naming the tensor. `allocate`
// gives a freed storage memory again, of an explicit size, in place: the views
// then see the new memory. Re-sizing a live storage is not allowed. Its
// owner can say in its freed_note where the memory exists (a ZeroModule's
// unsharded parameters: inside their unit's scopes), and every message about
// a freed view says that, in the user's terms.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zrt/runtime/allocator.h"
#include "zrt/runtime/device.h"
#include "zrt/runtime/stream.h"

namespace zrt {

class Storage {
 public:
  // Allocates `nbytes` (0 gives a freed storage) from `allocator` on `stream`.
  Storage(std::size_t nbytes, AllocatorPtr allocator, Stream stream = {});
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const { return allocator_->device(); }
  std::size_t nbytes() const { return nbytes_; }
  bool is_freed() const { return data_ == nullptr; }
  // The bytes; nullptr when freed (Tensor turns that into a named error).
  void* data() const { return data_; }
  const AllocatorPtr& allocator() const { return allocator_; }
  Stream stream() const { return stream_; }

  // Returns the memory to the allocator; size becomes 0. Freeing a freed
  // storage is a no-op.
  void free() noexcept;
  // Gives a freed storage `nbytes` of fresh (uninitialised) memory, allocated
  // on `stream` (default: the stream it was created with). Throws InvalidState
  // if the storage is not freed.
  void allocate(std::size_t nbytes);
  void allocate(std::size_t nbytes, Stream stream);
  // Moves `from`'s memory into this freed storage and leaves `from` freed: a
  // buffer changes role without a copy. Both must share the allocator.
  // Throws InvalidState if this is not freed or `from` is, InvalidArgument
  // for different allocators.
  void adopt_memory(Storage& from);
  // Points this freed storage at `owner`'s memory without owning it: one
  // buffer under a second role (Note [Unsharded parameter of a world of
  // one], Note [Views live in their scopes]). free() then only lets go; the
  // memory's owner (`owner`, or the storage `owner` borrows from) is kept
  // alive meanwhile and must stay allocated. Throws InvalidState if this is
  // not freed or the owner is, InvalidArgument for different allocators or
  // `owner` itself.
  void borrow_memory(std::shared_ptr<Storage> owner);
  bool is_borrowed() const { return lender_ != nullptr; }
  // See Allocator::record_use.
  void record_use(Stream stream);
  // Note [Host reads of queued work]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A kernel or copy issued to an owned CPU stream runs later (Note [CPU
  // streams]). On CUDA a host read of its output is a copy ordered on a
  // stream; here it is a plain load, and one made before the stream got
  // there read the values from before the kernel, with nothing said (a loss
  // read without synchronize() under cpu_streams all). So each storage
  // counts the work queued on a CPU stream that writes it, until the work
  // returns (QueuedWork), and Tensor's host reads, item() and to_doubles(),
  // refuse with InvalidState naming the tensor while any is queued. What
  // counts: the destination of a Tensor::copy_, the tensors a pointer twin
  // names as written (run_cpu_twin_over: the whole-tensor ops of kernels/ops,
  // which the communication stream runs too), and every tensor of a twin
  // that takes its tensors (run_cpu_twin: the model's ops, the loss among
  // them), inputs too, since it cannot tell them apart. Those run queued
  // only on a compute stream of its own (cpu_streams all), where a host read
  // of a model op's input before synchronize() is refused as well. So is
  // the output of a collective queued on a CPU stream (Communicator::issue).
  // A storage borrowing another's memory
  // shares its count: work queued through either writes the same bytes.
  int queued_work() const { return counter().queued_work_.load(std::memory_order_acquire); }
  // What a message about a view's data access while freed says after the
  // view's name: "has freed storage", or what the owner set, saying where
  // the memory exists (Note [Freed storage]). Set before the storage is shared.
  const std::string& freed_note() const { return freed_note_; }
  bool has_freed_note() const { return freed_note_ != kDefaultFreedNote; }
  void set_freed_note(std::string note) { freed_note_ = std::move(note); }

  // Records that bytes [offset, offset+nbytes) hold parameter `param` of flat
  // parameter `owner_name` (identified by `owner`). Throws InvalidArgument if
  // another owner already claimed an overlapping range: a parameter belongs
  // to one flat parameter. Empty ranges never conflict.
  void claim(std::size_t offset, std::size_t nbytes, const void* owner,
             const std::string& owner_name, const std::string& param);
  void release_claims(const void* owner) noexcept;

 private:
  AllocatorPtr allocator_;
  Stream stream_;
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  std::shared_ptr<Storage> lender_;  // set while the memory is borrowed
  friend class QueuedWork;
  // Whose queued_work_ counts work on this memory: the lender's while borrowed.
  const Storage& counter() const { return lender_ ? *lender_ : *this; }
  std::atomic<int> queued_work_{0};
  static constexpr const char* kDefaultFreedNote = "has freed storage";
  std::string freed_note_ = kDefaultFreedNote;

  struct Claim {
    std::size_t begin, end;
    const void* owner;
    std::string owner_name, param;
  };
  std::mutex claims_mutex_;
  std::vector<Claim> claims_;
};

// Work queued on an owned CPU stream (a kernel, a copy), counted on the
// storages it names from issue until end() (as it returns, before the
// stream counts it done) or until it is dropped unrun (Note [Host reads of
// queued work]).
class QueuedWork {
 public:
  explicit QueuedWork(std::vector<std::shared_ptr<Storage>> storages)
      : storages_(std::move(storages)) {
    for (auto& s : storages_) {
      if (s->lender_) s = s->lender_;  // the memory's owner counts it (Storage::counter)
      s->queued_work_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  ~QueuedWork() { end(); }
  QueuedWork(const QueuedWork&) = delete;
  QueuedWork& operator=(const QueuedWork&) = delete;
  void end() {
    for (const auto& s : storages_) s->queued_work_.fetch_sub(1, std::memory_order_release);
    storages_.clear();
  }

 private:
  std::vector<std::shared_ptr<Storage>> storages_;
};

}  // namespace zrt
