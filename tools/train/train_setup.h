// What zrt-train and zrt-bench train share: the trainer a TrainOptions
// describes, its data, the ranks it runs on, and the process's memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/train/train_options.h"
#include "zrt/model_zoo/data/dataset.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/memory/address_space.h"

namespace zrt::train {

// Whether the run continues a checkpoint: --resume PATH, or --resume with a
// `latest` under --checkpoint-dir. Such a run reads no --init-from (the
// checkpoint holds the weights): a requeued job whose pretrained file has
// moved since its first start still resumes.
bool resumes_a_checkpoint(const TrainOptions& o);

// The trainer's options the flags ask for (TrainOptions::trainer), on the
// device of a rank whose local rank (its GPU) is `local_rank`.
model_zoo::TrainerConfig trainer_config(const TrainOptions& o, int local_rank);

// The values --reduce-dtype names (fp32, bf16, fp16, int8, int4), for zrt-train
// and zrt-bench train alike.
const std::vector<std::pair<std::string, optim::ReduceDType>>& reduce_dtype_flags();
// --gather-dtype's names and values (zrt-train and zrt-bench train).
const std::vector<std::pair<std::string, optim::GatherDType>>& gather_dtype_flags();

// --offload-optimizer disk:DIR whose DIR is not a writable directory:
// InvalidArgument naming the flag (none and host pass).
void check_offload_dir(const optim::OptimizerOffload& offload);

// A gpt whose block size no flag gave gets position embeddings for the whole
// sequence: the preset's block size, raised to seq_len.
void raise_block_size_to_seq_len(model_zoo::TrainerConfig& t);

// --data, or the embedded default dataset of the model kind.
model_zoo::Dataset load_data(const TrainOptions& o, const model_zoo::TrainerConfig& c);
// The host memory load_data holds (Dataset::nbytes): of --data from its size
// and header alone (Note [Host memory in the plan]).
std::size_t data_memory_bytes(const TrainOptions& o, const model_zoo::TrainerConfig& c);

// Note [One data set per process]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The ranks of one process (--ranks N) share one data set, loaded once
// before they start: a Trainer only reads its tokens or rows, so N copies
// (4 bytes a token each) were N times the host memory and the loading time
// for nothing. Ranks of an mpirun or srun launch are processes, each with
// its own. The memory plan still shows the data set in every rank's host
// column, as a rank of a launch holds it.
//
// The trainer of one rank: config (from trainer_config, possibly with more
// set), `shared` (the data set the ranks of this process share, read-only)
// or else --data or the embedded dataset, the --init-from weights or the
// model's seeded init. Collective over `world`.
model_zoo::Trainer make_trainer(const CommPtr& world, const TrainOptions& o,
                                model_zoo::TrainerConfig config,
                                const model_zoo::Dataset* shared = nullptr);

// Runs fn(world, local_rank, host) on every rank of this process: `local_ranks`
// ranks as threads (the local backend) when positive, else the launch world
// (mpirun, Slurm, torchrun, or a single process); `host` is an NCCL world's
// MPI bootstrap (World::bootstrap), else null. Each rank runs its CPU
// kernels on `threads` threads, or (0) on its share of the host's cores
// (kernels::default_cpu_threads). A launch world carries the ranks' tensors
// (on `device`'s kind) over `transport` (launched_world.h). Rethrows a rank's error.
void run_ranks(int local_ranks, const std::function<void(const CommPtr&, int, const CommPtr&)>& fn,
               int threads = 0, Device device = Device::cpu(),
               WorldTransport transport = WorldTransport::automatic);
// The device kind and transport of the options (--device, --transport), for run_ranks.
Device world_device(const TrainOptions& o);

// "1.5 GiB": bytes for people.
std::string human_bytes(double bytes);

// Memory a need is short of: what was needed, what is there, and whether
// that is one process's address space or the machine's memory.
struct MemoryShortfall {
  std::uint64_t need = 0, available = 0;
  bool in_process = false;  // the address-space limit's, not the machine's
};

// Bytes this machine can still give the process: MemAvailable, capped by
// its control group's memory limit (v1 or v2) and by what the address-space
// limit leaves (ulimit -v); 0 where unknown.
struct AvailableMemory {
  // MemAvailable capped by the control group: what the machine's processes
  // share (0: unknown). The address-space limit is each process's own.
  std::uint64_t machine = 0;
  std::optional<AddressSpaceLimit> limit;  // set when the address-space limit binds
  std::uint64_t bytes() const { return limit ? limit->left() : machine; }
  // For messages: "" or " (what the address-space limit of ... leaves)".
  std::string bound_by() const;
  // What `on_machine` bytes for the machine's ranks together, `in_process`
  // of them in this process, are short of: the limit's room for the
  // process, else the machine's memory; nullopt when both fit or nothing is known.
  std::optional<MemoryShortfall> shortfall(std::uint64_t on_machine,
                                           std::uint64_t in_process) const;
};
AvailableMemory available_memory();

}  // namespace zrt::train
