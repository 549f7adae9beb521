// The memory plan: each rank's peak of a training configuration, by
// category, predicted without memory and without training (zrt-train --plan),
// and which settings fit a budget (--plan --fit BYTES).
//
// Note [Dry runs]
// ~~~~~~~~~~~~~~~
// A dry run is the real step with no data. Its ZeroModule (dry_run) issues
// everything to discarding CPU streams (Note [CPU streams]), which drop every
// kernel, copy and collective, and allocates from a caching allocator over
// unbacked address space (make_unbacked_caching_allocator): the same rounding,
// pools, splits and per-stream free lists, the same counters, and no memory
// behind any block (touching one faults, so a dry run that did work on its
// data would crash, not pass). The engine, the handles, the layers and the
// optimizer run their own code, so every buffer is allocated and freed in the
// order and at the size of a real step; nothing has to mirror them, and the
// plan cannot drift from the engine as it changes. Host code that reads data
// reads zeros or stand-ins: a loss, a gradient norm of 0 (so no step is
// skipped), found-inf false. Collectives that run on the calling thread
// (group splits, the handles' layout check) really run, between the planned
// ranks as threads of one process, so every rank's groups and shards are
// its own. Disk offload creates no scratch file. What a dry run cannot see:
// memory outside zrt's allocators (NCCL's and cuBLAS's workspaces, the data
// set). A CUDA run is planned on CPU
// streams of its shape (compute and communication streams of their own), so
// the CPU path's buffers stand in for the CUDA path's: the embedding
// gradient's token groups (small) are missing. Nor
// are the local backend's device collectives in the plan (Note [Local
// collectives on the device] in runtime/comm/local_comm.cpp): a CUDA
// all_reduce between local ranks takes device scratch of the whole
// tensor's size on every rank, and a reduction reading another GPU's input
// a copy of it, where the planned host path stages through host memory.
//
// Note [Memory plan]
// ~~~~~~~~~~~~~~~~~~
// plan_memory runs `steps` dry steps of the configuration on every rank of
// the world and reports what each rank's allocator saw: the peak of each step
// (what --metrics calls mem_peak: bytes handed out, rounded), the peak of
// reserved segments (what the device must hold), and what the largest
// step's peak consisted of. The breakdown is taken at the moment of the
// peak, by block: the blocks that are a handle's buffers (zero1 shard,
// zero3 shard, unsharded parameter, gradients) or the optimizer's moments
// count as those; blocks allocated on the communication stream are its
// cast, int8 gather and reduce buffers (with --cpu-streams none there is no
// such stream, and they count as workspaces); every other block is an activation or a
// workspace (outputs kept for backward, inputs kept by checkpointed blocks,
// the loss, disk offload's chunk buffers); rounding is what blocks hold
// beyond their requests. Each block is counted in its category from its
// allocation, as the storage that asked for it (Allocator::allocate_for)
// says, to its free, so a peak's breakdown is a copy of running totals: a
// plan costs O(1) per allocation, linear in the units, where breaking down
// every new peak by walking the live blocks was quadratic (a 4,000-layer
// GPT took minutes). The steps
// run in the order training does, so lazily allocated state (fp32 gradients
// on first use, the optimizer's first step) is in them; two steps reach the
// steady state of the peak, but the reserved segments can take longer: the
// cache's free lists settle over a few steps, and a step as late as the
// fifth may find no hole to fit a request and reserve another segment
// (--fit had listed settings that ran out of memory there). A plan runs
// kPlanSteps; the dry steps are cheap (no compute, no memory).
//
// Note [Host memory in the plan]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What a rank holds in host memory outside the device's allocator is
// counted by the same dry run: the module's host allocator
// (ZeroModuleOptions::host_allocator, pinned on CUDA) is a second unbacked
// caching allocator behind a breakdown of its own, from the engine's
// construction through the steps. It holds the master, m and v of
// --offload-optimizer host (4 + 8 bytes per parameter of the shard, 4 + 4
// with bf16 moments), the host copy of the reduced gradient shard (4) and
// the compute-dtype staging of the master's upload; beside a CUDA device
// also disk offload's two chunk buffers (2 x 2 moments x the chunk: the
// plan runs the CUDA path, each chunk copied to the device for its update).
// Its peak is the most held at once (blocks' rounded sizes), not per step:
// the state lives from construction on. The engine initialises as the
// Trainer does, each rank drawing only its shards where they live (Note
// [Sharded initialisation]), which takes no host memory beyond the state.
// Reading --init-from (Note [Streamed loading]) holds, while each part is
// read, a buffer of a parameter's part in the rank's shard in the file's
// dtype and, unless that is fp32, one of its fp32 conversion: the dry run
// reads the file's header and takes these buffers from the same allocator
// (the Trainer takes them from the module's host allocator where one is
// given), in their own category (loading), at the moment they are held.
// So they raise the peak only where, with the state built so far, they
// exceed what is held later; the peak's breakdown names the state then
// held by its blocks still live once the engine is built. The data set
// (data: Dataset::nbytes; for a file, data_file_memory_bytes from its
// size and header; 4 bytes a token) is held from before the engine to the
// end, so it adds to every moment: the plan adds it to the peak. Host
// memory the plan leaves out: loading a data file holds, for a moment
// before the engine holds anything, the file's bytes and a copy besides
// the data set (load_dataset); the allocator's own cache
// (pinned segments on CUDA are rounded to 2 MiB), a step's micro-batches,
// and a checkpoint's staging. On --device cpu the device's
// memory is host memory too, so a rank's host memory is this figure plus
// at most its reserved peak (at least its peak: pages of reserved segments
// no block touched are not resident; test_memory_plan measures the
// process's), and --offload-optimizer host only moves the state from
// one to the other; with --memory-limit the limit caps the first only (Note
// [Memory limit]), as a GPU's memory would.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "zrt/model_zoo/trainer/trainer.h"

namespace zrt::model_zoo {

// Bytes of one rank's allocator at its peak, by what they hold (Note [Memory
// plan]). total() is the peak.
struct MemoryByCategory {
  std::size_t master_and_moments = 0;  // fp32 zero1 shards and AdamW's m and v in memory
  // compute-dtype (or with an int8 gather quantized) zero3 shards; none where they are the master
  std::size_t zero3_shards = 0;
  std::size_t unsharded_params =
      0;                          // gathered flat parameters in flight (the unit and its prefetch)
  std::size_t gradients = 0;      // runtime, fp32 accumulation and zero1 gradient shards
  std::size_t communication = 0;  // cast, int8 and reduce buffers of the communication stream
  std::size_t activations =
      0;                     // everything else: layers' outputs and caches, kept inputs, workspaces
  std::size_t rounding = 0;  // what the allocator's blocks hold beyond the requests
  // Host memory only (Note [Host memory in the plan]): the data set, and
  // --init-from's read buffers live at the peak.
  std::size_t data = 0;
  std::size_t loading = 0;
  std::size_t total() const {
    return master_and_moments + zero3_shards + unsharded_params + gradients + communication +
           activations + rounding + data + loading;
  }
};

struct RankMemoryPlan {
  int rank = 0;
  std::vector<std::size_t> step_peaks;  // each planned step's allocator peak (mem_peak)
  std::size_t peak = 0;                 // the largest of them
  std::size_t reserved_peak = 0;        // the most segments the allocator held
  MemoryByCategory at_peak;             // the largest step's peak, by category
  // Host memory outside the device's allocator (Note [Host memory in the
  // plan]): the most held at once from construction on, and what it held
  // then (master_and_moments, gradients: the reduced shard's host copy;
  // activations: staging and disk offload's chunk buffers; data: the data
  // set; loading: --init-from's read buffers).
  std::size_t host_peak = 0;
  MemoryByCategory host_at_peak;
  // The plan's own cost: blocks its breakdown looked at, about one per
  // allocation of the dry steps, so planning stays linear in the number of
  // units (a test holds it to that; Note [Memory plan]).
  std::size_t bookkeeping_visits = 0;
};

struct MemoryPlan {
  std::vector<RankMemoryPlan> ranks;  // by rank
  // The rank with the largest peak (the first of equals).
  const RankMemoryPlan& largest() const;
};

// The largest world plan_memory runs: every rank is a thread of this process.
inline constexpr int kMaxPlannedRanks = 64;

// The dry steps of a plan (Note [Memory plan]: enough for the reserved
// segments to settle).
inline constexpr int kPlanSteps = 8;

// Plans `config` on a world of `world_size` ranks (Note [Memory plan]),
// with `steps` (>= 1) dry steps (Note [Dry runs]), each rank holding a data
// set of `data_bytes` (Dataset::nbytes, data_file_memory_bytes) in host
// memory. Reads only the header of config.init_from. Validates like the
// Trainer (typed errors naming the problem): the model, the batch geometry,
// and 1 <= world_size <= kMaxPlannedRanks. A CUDA device is planned on CPU
// streams of CUDA's shape. Allocates no memory for parameters, state or
// activations, and computes nothing.
MemoryPlan plan_memory(const TrainerConfig& config, int world_size, int steps = kPlanSteps,
                       std::size_t data_bytes = 0);

// One candidate of plan_fitting: what it changes and its plan's largest rank.
struct FittingCandidate {
  std::string settings;  // e.g. "--strategy full --prefetch 1 --activation-checkpointing blocks"
  TrainerConfig config;
  RankMemoryPlan largest;
  std::size_t host_peak =
      0;  // the most host memory any rank holds (Note [Host memory in the plan])
};

// Note [Settings that fit]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// plan_fitting plans the settings a user can change without changing the
// model or the batch: strategy, prefetch, activation checkpointing,
// optimizer offload to host memory (where that is not the device's own)
// and to disk, and bf16 optimizer state. All but the last give the same
// bits as the config's own settings (each is tested bit-identical), so
// they are ranked by cost alone: no offload, then host, then disk (each
// step moves the update further from the device), then less recomputation
// (none, every:2, blocks), then less communication (no-shard, grad-op,
// full, then the config's own hybrid or layer-zero), then deeper prefetch.
// bf16 moments change the numerics (stochastic rounding: Note [bf16 AdamW
// moments]; the loss of a run follows fp32 state's closely, not to the bit),
// a choice that belongs to the user, not to a cost order. So with fp32
// state they are planned only when no fp32-state setting fits, and then in
// the same order, each setting spelled with --optimizer-state-dtype bf16:
// offloading to disk, though slower, is preferred to changing what the run
// computes. (bf16 state would often be the faster of the two: it also
// halves the moments' traffic. A user who accepts it passes it, and the
// sweep then keeps it.) What it saves: 4 of the 16 bytes per parameter of a
// shard without offload, half of disk offload's chunk buffers, and with
// host offload 4 of the host's 16: where a host budget is given (zrt-train
// --fit-host, a machine's memory over its ranks), bf16 state can be what
// lets the state leave the device at all.

// Plans the settings of Note [Settings that fit] (disk offload under
// `offload_dir`) and returns those whose largest rank's reserved peak is at
// most `budget_bytes` and whose ranks each hold at most `host_budget_bytes`
// of host memory (Note [Host memory in the plan]; a data set of `data_bytes`
// included), in that note's order.
std::vector<FittingCandidate> plan_fitting(
    const TrainerConfig& config, int world_size, std::size_t budget_bytes,
    const std::string& offload_dir,
    std::size_t host_budget_bytes = std::numeric_limits<std::size_t>::max(),
    std::size_t data_bytes = 0);

}  // namespace zrt::model_zoo
