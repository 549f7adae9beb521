// AdamW's exp_avg and exp_avg_sq in a scratch file instead of memory
// (--offload-optimizer disk:DIR), streamed through two chunk buffers.
//
// Note [Optimizer state on disk]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each rank keeps the moments of its zero1 shards in one scratch file (Note
// [Scratch files]: preallocated, so a full disk fails before training, and
// removed however the run ends): handle k's exp_avg then its exp_avg_sq,
// handle after handle, in the state dtype (fp32, or bf16: Note [bf16 AdamW
// moments]). The optimizer step walks every handle's shard in
// chunks of at most `chunk_elements`; two buffers alternate, so while chunk
// i is updated, chunk i + 1 is read into the other buffer, and chunk i's write
// runs while the step waits for that read (each on a thread of its own). AdamW is elementwise and its CPU loops are
// bit-identical at any offset (Note [CPU vector clones]), so the update of a
// chunk is the update of those elements: the run is bit-identical to one that
// keeps the moments in memory. Each handle is handed back (`updated`) as soon
// as its last chunk's update has run, so the caller's gathers of the next
// step's first units (Note [Gathers after the update] in
// optim/zero_module.cpp) overlap the later handles' chunks. Memory held: the
// two buffers, 4 moments × the chunk, instead of 8 (bf16: 4) bytes per
// parameter of the shard (host memory beside a CUDA device, which holds the
// chunk being updated; and beside them what those gathers hold). A checkpoint reads
// and writes the moments through the same file, in the same format as any
// other (resume with or without offload); a save reads each handle's moments
// into memory for the write, and a load stages them as it stages every
// shard, so both need the moments' bytes for a moment. An I/O error mid-step throws
// ResourceError naming the file; the shards updated before it keep their
// update, so the run cannot continue from memory, only from its last
// checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zrt/runtime/allocator.h"
#include "zrt/runtime/io/scratch_file.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

class OffloadedMoments {
 public:
  // Room for the moments (`dtype`: f32 or bf16) of shards of
  // `shard_elements[k]` elements, zeroed, in
  // DIR/zrt-adamw-moments.rank-R.PID.bin. Chunk buffers from `allocator` on
  // a cpu `device`; beside a CUDA one (or planned as one, Note [CUDA kernels
  // planned on the CPU]) from `host_allocator`, each chunk copied to `device`
  // from `allocator` for its update. Used in `stream` order.
  OffloadedMoments(const std::string& dir, int rank, std::vector<std::int64_t> shard_elements,
                   std::int64_t chunk_elements, DType dtype, Device device, AllocatorPtr allocator,
                   AllocatorPtr host_allocator, Stream stream);
  ~OffloadedMoments();
  OffloadedMoments(const OffloadedMoments&) = delete;
  OffloadedMoments& operator=(const OffloadedMoments&) = delete;

  struct Chunk {
    std::size_t handle = 0;
    std::int64_t begin = 0, count = 0;  // elements of the handle's shard
    Tensor exp_avg, exp_avg_sq;         // [count] of dtype(), updated in place by the callback
  };
  // Passes every chunk of every shard, in order, to `update`, and writes what
  // it leaves in the chunk back (Note [Optimizer state on disk]). `updated(k)`,
  // when given, runs once for each handle k, in order, as soon as the update
  // of its last chunk has run (a shard of no elements: right after the
  // handle before it), while the next handle's chunks are still to come.
  void update_all(const std::function<void(const Chunk&)>& update,
                  const std::function<void(std::size_t)>& updated = {});
  // Handle k's exp_avg (moment 0) or exp_avg_sq (1) as a fresh tensor of
  // dtype() on the device / replaces both (any float dtype, cast to dtype()).
  Tensor read(std::size_t k, int moment) const;
  void write(std::size_t k, const Tensor& exp_avg, const Tensor& exp_avg_sq);

  const ScratchFile& file() const { return *file_; }
  DType dtype() const { return dtype_; }

 private:
  std::uint64_t offset(std::size_t k, int moment, std::int64_t element) const;
  Tensor on_device(const Tensor& host) const;

  std::vector<std::int64_t> shard_elements_;
  std::vector<std::uint64_t> first_byte_;  // per handle: where its exp_avg starts
  std::int64_t chunk_elements_;
  DType dtype_;
  std::uint64_t item_;  // bytes per element
  Device device_;
  AllocatorPtr allocator_;
  AllocatorPtr host_allocator_;
  Stream stream_;
  std::unique_ptr<ScratchFile> file_;
};

}  // namespace zrt::optim
