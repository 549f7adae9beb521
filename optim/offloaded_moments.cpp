#include "zrt/optim/offloaded_moments.h"

#include <algorithm>
#include <future>
#include <span>

#include "zrt/kernels/kernel_path.h"
#include "zrt/runtime/error.h"

namespace zrt::optim {

namespace {

std::span<std::byte> bytes_of(const Tensor& host) {
  return {static_cast<std::byte*>(host.data_ptr()), host.nbytes()};
}

}  // namespace

OffloadedMoments::OffloadedMoments(const std::string& dir, int rank,
                                   std::vector<std::int64_t> shard_elements,
                                   std::int64_t chunk_elements, DType dtype, Device device,
                                   AllocatorPtr allocator, AllocatorPtr host_allocator,
                                   Stream stream)
    : shard_elements_(std::move(shard_elements)),
      chunk_elements_(chunk_elements),
      dtype_(dtype),
      item_(dtype_size(dtype)),
      device_(device),
      allocator_(std::move(allocator)),
      host_allocator_(std::move(host_allocator)),
      stream_(stream) {
  ZRT_CHECK_ARG(chunk_elements_ > 0, "optimizer offload: chunk of ", chunk_elements_, " elements");
  ZRT_CHECK_ARG(dtype == DType::f32 || dtype == DType::bf16, "optimizer offload: moments of ",
                dtype_name(dtype), ", not f32 or bf16");
  std::uint64_t total = 0;
  for (std::int64_t n : shard_elements_) {
    ZRT_CHECK_ARG(n >= 0, "optimizer offload: a shard of ", n, " elements");
    first_byte_.push_back(total);
    total += 2 * item_ * static_cast<std::uint64_t>(n);
  }
  // A dry run's stream drops the step's work, and the file's I/O is part of
  // it: no file (Note [Dry runs]).
  if (!stream_.discards())
    file_ =
        std::make_unique<ScratchFile>(dir, "zrt-adamw-moments.rank-" + std::to_string(rank), total);
}

OffloadedMoments::~OffloadedMoments() = default;

std::uint64_t OffloadedMoments::offset(std::size_t k, int moment, std::int64_t element) const {
  return first_byte_[k] + item_ * (static_cast<std::uint64_t>(moment) *
                                       static_cast<std::uint64_t>(shard_elements_[k]) +
                                   static_cast<std::uint64_t>(element));
}

Tensor OffloadedMoments::on_device(const Tensor& host) const {
  Tensor t = Tensor::empty(host.shape(), dtype_, device_, allocator_, stream_);
  t.copy_(host, stream_);
  return t;
}

void OffloadedMoments::update_all(const std::function<void(const Chunk&)>& update,
                                  const std::function<void(std::size_t)>& updated) {
  struct Piece {
    std::size_t handle;
    std::int64_t begin, count;
  };
  std::vector<Piece> pieces;
  for (std::size_t k = 0; k < shard_elements_.size(); ++k)
    for (std::int64_t b = 0; b < shard_elements_[k]; b += chunk_elements_)
      pieces.push_back({k, b, std::min(chunk_elements_, shard_elements_[k] - b)});
  // Hands handles [handed, up_to) over: every chunk of theirs is updated.
  std::size_t handed = 0;
  auto hand_over = [&](std::size_t up_to) {
    for (; handed < up_to; ++handed)
      if (updated) updated(handed);
  };
  if (pieces.empty()) {
    hand_over(shard_elements_.size());
    return;
  }
  std::int64_t longest = 0;
  for (const Piece& p : pieces) longest = std::max(longest, p.count);

  // Host buffers for the I/O: the engine's own memory on a CPU device; host
  // memory beside a CUDA one, as a plan of a CUDA run counts them.
  const bool on_cpu = device_.is_cpu() && !kernels::planning_cuda_kernels();
  Tensor buffers[2];
  for (Tensor& b : buffers)
    b = Tensor::empty({2 * longest}, dtype_, Device::cpu(), on_cpu ? allocator_ : host_allocator_,
                      stream_);
  stream_.synchronize();  // the buffers' memory is free for the I/O threads to fill
  auto moment = [&](int slot, int m, std::int64_t count) {
    return buffers[slot].slice(m * longest, count);
  };
  auto read = [&](int slot, const Piece& p) {
    if (!file_) return;  // a dry run
    for (int m = 0; m < 2; ++m)
      file_->read(offset(p.handle, m, p.begin), bytes_of(moment(slot, m, p.count)));
  };
  auto write = [&](int slot, const Piece& p) {
    if (!file_) return;
    for (int m = 0; m < 2; ++m)
      file_->write(offset(p.handle, m, p.begin), bytes_of(moment(slot, m, p.count)));
  };
  // Declared after the buffers: leaving early (an exception) waits for the I/O
  // threads before the buffers go.
  std::future<void> reading[2], writing[2];
  reading[0] = std::async(std::launch::async, read, 0, pieces[0]);
  hand_over(pieces[0].handle);  // shards of no elements before the first chunk
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const int slot = static_cast<int>(i % 2), next = 1 - slot;
    reading[slot].get();
    if (i + 1 < pieces.size()) {
      if (writing[next].valid()) writing[next].get();
      reading[next] = std::async(std::launch::async, read, next, pieces[i + 1]);
    }
    const Piece& p = pieces[i];
    Chunk c{p.handle, p.begin, p.count, moment(slot, 0, p.count), moment(slot, 1, p.count)};
    if (!on_cpu) {
      c.exp_avg = on_device(c.exp_avg);
      c.exp_avg_sq = on_device(c.exp_avg_sq);
    }
    update(c);
    if (!on_cpu) {
      moment(slot, 0, p.count).copy_(c.exp_avg, stream_);
      moment(slot, 1, p.count).copy_(c.exp_avg_sq, stream_);
    }
    stream_
        .synchronize();  // the update (and copy back) is done before the thread writes the buffer
    writing[slot] = std::async(std::launch::async, write, slot, p);
    // Note [Gathers after the update] (optim/zero_module.cpp): a handle whose
    // last chunk this was is handed over now, before the next handle's chunk,
    // not after every handle's.
    hand_over(i + 1 < pieces.size() ? pieces[i + 1].handle : shard_elements_.size());
  }
  for (std::future<void>& w : writing)
    if (w.valid()) w.get();
}

Tensor OffloadedMoments::read(std::size_t k, int moment) const {
  ZRT_CHECK_ARG(k < shard_elements_.size() && (moment == 0 || moment == 1),
                "optimizer offload: no moment ", moment, " of handle ", k);
  ZRT_CHECK_STATE(file_ != nullptr, "optimizer offload: a dry run has no moments to read");
  Tensor host = Tensor::empty({shard_elements_[k]}, dtype_);
  file_->read(offset(k, moment, 0), bytes_of(host));
  return device_.is_cpu() ? host : on_device(host);
}

void OffloadedMoments::write(std::size_t k, const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  ZRT_CHECK_ARG(k < shard_elements_.size(), "optimizer offload: no handle ", k);
  ZRT_CHECK_STATE(file_ != nullptr, "optimizer offload: a dry run has no moments to write");
  int m = 0;
  for (const Tensor* t : {&exp_avg, &exp_avg_sq}) {
    ZRT_CHECK_ARG(t->numel() == shard_elements_[k], "optimizer offload: handle ", k,
                  " moments have ", shard_elements_[k], " elements, not ", t->numel());
    Tensor host = Tensor::empty({shard_elements_[k]}, dtype_);
    host.copy_(*t, stream_);  // casts a checkpoint's f32 to the state dtype
    stream_.synchronize();
    file_->write(offset(k, m++, 0), bytes_of(host));
  }
}

}  // namespace zrt::optim
