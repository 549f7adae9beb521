#include "zrt/optim/checkpoint/checkpoint_snapshot.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "zrt/kernels/ops/norm.h"
#include "zrt/optim/checkpoint/checkpoint_agreement.h"
#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::optim {

namespace {

namespace fs = std::filesystem;

// Whether this rank writes its shards: replicas of a shard leave it to replica 0.
bool writes_shards(const FlatParamHandle& h) {
  const CommPtr& replica = h.groups().replica;
  return !replica || replica->rank() == 0;
}

std::vector<HandleRecord> handle_records(const ZeroModule& module) {
  std::vector<HandleRecord> out;
  for (const auto& h : module.handles()) {
    HandleRecord r;
    r.name = h->name();
    r.numel_padded = h->layout().numel_padded();
    r.zero1_size = h->layout().zero1_size();
    r.quant_block = h->layout().quant_block();
    for (std::size_t i = 0; i < h->num_params(); ++i)
      r.params.push_back({h->fqn(i), h->layout().params()[i].shape, h->layout().param_offset(i),
                          h->layout().params()[i].pad_rows});
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Tensor SnapshotStaging::stage(const std::string& name, const Tensor& t, Stream stream) {
  Tensor& buffer = buffers_[name];
  if (!buffer.storage_ptr() || buffer.shape() != t.shape() || buffer.dtype() != t.dtype()) {
    // Copies from a device stream need pinned memory to be asynchronous.
    if (t.device().is_cuda() && !pinned_) pinned_ = make_pinned_host_allocator();
    buffer = Tensor::empty(t.shape(), t.dtype(), Device::cpu(),
                           t.device().is_cuda() ? pinned_ : nullptr);
  }
  // Host data is copied here and now: the module's streams are synchronized,
  // and `t` may be a temporary (moments read from disk) that a copy queued
  // on a CPU stream would outlive.
  buffer.copy_(t, t.device().is_cuda() ? stream : Stream());
  return buffer;
}

std::uint64_t SnapshotStaging::bytes() const {
  std::uint64_t n = 0;
  for (const auto& [name, t] : buffers_) n += t.nbytes();
  return n;
}

CheckpointSnapshot take_snapshot(ZeroModule& module, std::int64_t next_step,
                                 const CheckpointSaveOptions& options, SnapshotStaging* staging) {
  ZRT_CHECK_ARG(!options.root.empty(), "save_checkpoint: no checkpoint directory given");
  ZRT_CHECK_ARG(next_step >= 0, "save_checkpoint: step must be >= 0 (got ", next_step, ")");
  ZRT_CHECK_ARG(options.keep_last >= 0,
                "save_checkpoint: keep_last must be >= 0 (0: keep all; got ", options.keep_last,
                ")");
  // Stored inside index.json: text that is not JSON would fail there, in the index's words.
  ZRT_CHECK_ARG(nlohmann::json::accept(options.run_json),
                "save_checkpoint: run_json is not JSON: '", options.run_json.substr(0, 80),
                options.run_json.size() > 80 ? "...'" : "'");
  Communicator& world = *module.world();
  CheckpointSnapshot s;
  s.next_step = next_step;
  s.options = options;
  const FlatParamHandle& first = *module.handles().front();
  s.record.rank = world.rank();
  s.record.zero1_rank = first.groups().zero1->rank();
  s.writes_file = writes_shards(first);

  CheckpointIndex& index = s.index;
  index.step = next_step;
  index.world_size = world.size();
  index.strategy = strategy_name(module.options().strategy);
  index.zero3_size = first.groups().zero3->size();
  index.dtype = dtype_name(module.options().dtype);
  index.handles = handle_records(module);
  index.state.next_step = next_step;
  index.state.optimizer_step = module.optimizer().step_count();
  index.state.skipped_total = module.optimizer().skipped_total();
  index.state.consecutive_skips = module.optimizer().consecutive_skips();
  index.state.optimizer_state_dtype = module.optimizer().options().state_dtype;
  if (module.loss_scaler()) index.state.loss_scaler = module.loss_scaler()->state();
  index.run_json = options.run_json;

  module.synchronize();  // the shards are written on the module's streams (the last AdamW step)
  s.error = error_of([&] {
    if (!s.writes_file) return;
    const ZeroAdamW& opt = module.optimizer();
    const Stream stream = module.stream();
    // Shards are saved f32: bf16 moments (Note [bf16 AdamW moments]) are
    // kept in bf16 here and widened (exactly) as they are written
    // (write_rank_file), so a checkpoint resumes into either state dtype.
    auto keep = [&](const std::string& name, const Tensor& t) {
      s.tensors[name] = staging ? staging->stage(name, t, stream) : t;
    };
    for (std::size_t k = 0; k < module.handles().size(); ++k) {
      const FlatParamHandle& h = *module.handles()[k];
      // A checkpoint of NaN or Inf weights verifies, then resumes to NaN
      // losses: it is refused on every rank (the first agreement), and the
      // last finite step stays `latest`.
      ZRT_CHECK_AS(CheckpointError,
                   h.zero1_shard().numel() == 0 ||
                       !kernels::has_non_finite(h.zero1_shard(), h.master_stream()),
                   "the parameters of unit '", h.name(),
                   "' hold NaN or Inf values: the run has diverged, and a checkpoint of them "
                   "would only resume to NaN losses");
    }
    for (std::size_t k = 0; k < module.handles().size(); ++k) {
      const std::string& name = module.handles()[k]->name();
      keep(shard_tensor_name(name, ShardKind::param), module.handles()[k]->zero1_shard());
      keep(shard_tensor_name(name, ShardKind::exp_avg), opt.exp_avg_shard(k));
      keep(shard_tensor_name(name, ShardKind::exp_avg_sq), opt.exp_avg_sq_shard(k));
    }
    if (staging) stream.synchronize();  // the copies into staging are done
  });
  return s;
}

std::string write_snapshot(Communicator& comm, const CheckpointSnapshot& s) {
  const int rank = comm.rank();
  const CheckpointSaveOptions& options = s.options;
  const std::string tmp = step_tmp_dir(options.root, s.next_step);

  // Every rank's step, and rank 0's root, which every rank must share (Note
  // [Ranks agree on checkpoints]).
  const std::vector<std::string> given =
      exchange_texts(comm, std::to_string(s.next_step) + "\n" + options.root);
  const auto step_of = [&](int r) { return given[r].substr(0, given[r].find('\n')); };
  const std::string root0 = given[0].substr(given[0].find('\n') + 1);
  // Named by rank 0's root and step: one error text on every rank.
  const std::string what = "saving checkpoint " + step_dir(root0, std::stoll(step_of(0)));

  // A snapshot that failed fails the first agreement, before any file exists;
  // so do steps that differ, on every rank (rank 0 makes no directory).
  std::string error = s.error;
  for (int r = 1; error.empty() && r < comm.size(); ++r)
    if (step_of(r) != step_of(0))
      error = "rank 0 saves step " + step_of(0) + " and rank " + std::to_string(r) + " step " +
              step_of(r) + ": every rank must pass the same next_step";
  if (error.empty() && rank == 0) error = error_of([&] { begin_step(options.root, s.next_step); });
  agree(comm, error, what);

  RankRecord record = s.record;
  error = error_of([&] {
    if (options.before_write) options.before_write(rank);
    if (!s.writes_file) return;
    // Rank 0 made it: missing here, this rank's root is another directory.
    ZRT_CHECK_AS(CheckpointError, fs::is_directory(tmp), "the step's directory ",
                 step_tmp_dir(root0, s.next_step), " that rank 0 made is not at ", tmp,
                 options.root == root0
                     ? ": the ranks do not share the checkpoint root's filesystem (a directory "
                       "local to each machine?); save to a directory every rank sees"
                     : " (this rank's root is " + options.root + ", rank 0's " + root0 +
                           "): every rank must save under the same root");
    record.file = rank_file_name(rank);
    write_rank_file((fs::path(tmp) / record.file).string(), s.tensors, record);
  });
  // Records travel after a marker byte that errors never start with.
  const std::vector<std::string> replies =
      exchange_texts(comm, error.empty() ? "\x01" + rank_record_to_json(record) : error);
  for (std::size_t r = 0; r < replies.size(); ++r)
    if (replies[r].empty() || replies[r][0] != '\x01') {
      if (rank == 0) {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);  // a failed save leaves nothing behind
      }
      ZRT_THROW(CheckpointError, what, " failed on rank ", r, ": ", replies[r]);
    }

  error = rank != 0 ? "" : error_of([&] {
    CheckpointIndex index = s.index;
    for (std::size_t r = 0; r < replies.size(); ++r)
      index.ranks.push_back(
          rank_record_from_json(replies[r].substr(1), "rank " + std::to_string(r)));
    commit_step(options.root, index, options.keep_last);
  });
  if (rank == 0 && !error.empty()) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
  }
  agree(comm, error, what);
  return step_dir(options.root, s.next_step);
}

}  // namespace zrt::optim
