#include "zrt/model_zoo/trainer/memory_plan.h"

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "zrt/kernels/kernel_path.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/model_zoo/models/model_config.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::model_zoo {

namespace {

// What a block of the watched allocator holds (Note [Memory plan]).
enum class Category {
  master_and_moments,
  zero3_shards,
  unsharded_params,
  gradients,
  communication,
  activations,
  loading  // --init-from's read buffers (host memory, Note [Host memory in the plan])
};
constexpr std::size_t kCategories = 7;

// Which storage holds which category: the handles' buffers and the
// optimizer's moments. The first claim wins, so a storage that is two
// buffers at once (a zero3 shard that is the master) counts once. All of them
// exist from the engine's construction on and live as long as it does.
using HolderCategories = std::unordered_map<const void*, Category>;

HolderCategories holder_categories(TrainingEngine& engine, const Allocator* watched) {
  HolderCategories holders;
  // Only the watched allocator's blocks: the device's, or host memory (a
  // master in host memory, Note [Master in host memory]).
  auto claim = [&](const Tensor& t, Category c) {
    if (t.storage().allocator().get() == watched) holders.emplace(&t.storage(), c);
  };
  optim::ZeroAdamW& adamw = engine.optimizer();
  const auto& handles = engine.handles();
  for (std::size_t k = 0; k < handles.size(); ++k) {
    const optim::FlatParamHandle& h = *handles[k];
    claim(h.zero1_shard(), Category::master_and_moments);
    if (adamw.offloaded_moments() == nullptr) {  // on disk there is nothing in memory to claim
      claim(adamw.exp_avg_shard(k), Category::master_and_moments);
      claim(adamw.exp_avg_sq_shard(k), Category::master_and_moments);
    }
    claim(h.zero3_shard(), Category::zero3_shards);
    claim(h.full_param_padded(), Category::unsharded_params);
    claim(h.zero1_grad(), Category::gradients);
    claim(h.master_grad(), Category::gradients);  // its host copy beside a master in host memory
    claim(h.full_grad_padded(), Category::gradients);
    claim(h.full_prec_grad_padded(), Category::gradients);
  }
  // A use of a parameter tied across units has a gradient of its own in its unit's backward.
  for (const auto& t : engine.module().tied_params())
    claim(engine.module().param_views(t.user, t.fqn).grad, Category::gradients);
  return holders;
}

// Sits in front of a dry run's allocator and breaks its peak down (Note
// [Memory plan]). Each block is counted in its category from its allocation
// to its free, so the bytes held per category are always at hand and a peak
// costs O(1) to break down, however many blocks are live: a plan is linear in
// the number of units. A new peak is only marked when it happens, inside the
// allocation that makes it; it is copied at the next call into the allocator
// (or at settle()), before that call changes anything.
class PeakBreakdownAllocator final : public Allocator {
 public:
  explicit PeakBreakdownAllocator(AllocatorPtr inner) : inner_(std::move(inner)) {}

  // From the engine on, the breakdown can name the handles' blocks: the
  // blocks live now are counted again (once per plan).
  // A peak reached before (the engine's construction, reading --init-from)
  // is named again by the blocks of it still live.
  void watch(TrainingEngine* engine) {
    std::lock_guard lock(mutex_);
    settle_locked();
    engine_ = engine;
    holders_ = engine_ ? holder_categories(*engine_, this) : HolderCategories{};
    comm_ = engine_ ? engine_->module().comm_stream() : Stream();
    own_comm_stream_ = engine_ && comm_ != engine_->module().stream();
    held_.fill(0);
    std::array<std::size_t, kCategories> at_peak{};  // live now and at the peak
    for (auto& [ptr, live] : live_) {
      ++visits_;
      if (live.category != Category::loading) live.category = category_of(live.holder, live.stream);
      held_[index(live.category)] += live.requested;
      if (live.serial <= peak_serial_) at_peak[index(live.category)] += live.requested;
    }
    if (engine_ && peak_unnamed_) {
      // Unnamed, every block but the read buffers counted as activations.
      MemoryByCategory& m = at_peak_;
      for (std::size_t c = 0; c < kCategories; ++c)
        if (c != index(Category::loading)) m.activations -= at_peak[c];
      m.master_and_moments += at_peak[index(Category::master_and_moments)];
      m.zero3_shards += at_peak[index(Category::zero3_shards)];
      m.unsharded_params += at_peak[index(Category::unsharded_params)];
      m.gradients += at_peak[index(Category::gradients)];
      m.communication += at_peak[index(Category::communication)];
      m.activations += at_peak[index(Category::activations)];
      peak_unnamed_ = false;
    }
    // A peak that is what is held now is named by the categories just found.
    if (inner_->stats().allocated >= peak_) unsettled_ = true;
  }

  void* allocate(std::size_t nbytes, Stream stream) override {
    return allocate_for(nullptr, nbytes, stream);
  }
  void* allocate_for(const void* holder, std::size_t nbytes, Stream stream) override {
    return allocate_as(holder, std::nullopt, nbytes, stream);
  }
  // A block of --init-from's read buffers (LoadingBuffers).
  void* allocate_loading(std::size_t nbytes, Stream stream) {
    return allocate_as(nullptr, Category::loading, nbytes, stream);
  }
  void deallocate(void* ptr) noexcept override {
    std::lock_guard lock(mutex_);
    settle_locked();
    if (auto it = live_.find(ptr); it != live_.end()) {
      held_[index(it->second.category)] -= it->second.requested;
      live_.erase(it);
    }
    inner_->deallocate(ptr);
  }
  void record_use(void* ptr, Stream stream) override { inner_->record_use(ptr, stream); }
  Device device() const override { return inner_->device(); }
  MemoryStats stats() const override { return inner_->stats(); }
  void empty_cache() override { inner_->empty_cache(); }
  void reset_peak_stats() override {
    std::lock_guard lock(mutex_);
    inner_->reset_peak_stats();
    peak_ = inner_->stats().allocated;
    unsettled_ = true;  // until something exceeds it, the peak is what is held now
  }

  // The blocks the bookkeeping has looked at: one per allocation, and those
  // live when the engine is watched (RankMemoryPlan::bookkeeping_visits).
  std::size_t visits() {
    std::lock_guard lock(mutex_);
    return visits_;
  }

  // The breakdown of the peak since the last reset.
  MemoryByCategory settle() {
    std::lock_guard lock(mutex_);
    settle_locked();
    return at_peak_;
  }

 private:
  struct Live {
    std::size_t requested;
    Stream stream;
    const void* holder;  // the Storage that asked, or null
    Category category;
    std::size_t serial;  // allocations before it
  };

  static std::size_t index(Category c) { return static_cast<std::size_t>(c); }

  // The lock is held across the inner allocation, which a task's free
  // would then wait for were the stream to run tasks (Note [Allocations
  // wait for their stream's frees]); a plan's streams discard every task.
  void* allocate_as(const void* holder, std::optional<Category> category, std::size_t nbytes,
                    Stream stream) {
    std::lock_guard lock(mutex_);
    settle_locked();
    void* p = inner_->allocate(nbytes, stream);
    const Category c = category.value_or(category_of(holder, stream));
    live_[p] = {nbytes, stream, holder, c, visits_};
    ++visits_;
    held_[index(c)] += nbytes;
    const std::size_t allocated = inner_->stats().allocated;
    if (allocated > peak_) {
      peak_ = allocated;
      peak_serial_ = live_[p].serial;
      peak_unnamed_ = engine_ == nullptr;
      unsettled_ = true;
    }
    return p;
  }

  // A block belongs to the storage that allocated it for as long as it lives:
  // memory moves between storages only inside a handle, from one gradient
  // buffer to another (Storage::adopt_memory), and a borrowed buffer (the
  // unsharded parameter of a world of one) allocates nothing.
  Category category_of(const void* holder, Stream stream) const {
    if (holder)
      if (auto it = holders_.find(holder); it != holders_.end()) return it->second;
    // The rest of the communication stream's blocks are its cast, int8 and reduce buffers.
    if (own_comm_stream_ && stream == comm_) return Category::communication;
    return Category::activations;
  }

  void settle_locked() noexcept {
    if (!unsettled_) return;
    unsettled_ = false;
    MemoryByCategory& m = at_peak_;
    m.master_and_moments = held_[index(Category::master_and_moments)];
    m.zero3_shards = held_[index(Category::zero3_shards)];
    m.unsharded_params = held_[index(Category::unsharded_params)];
    m.gradients = held_[index(Category::gradients)];
    m.communication = held_[index(Category::communication)];
    m.activations = held_[index(Category::activations)];
    m.loading = held_[index(Category::loading)];
    std::size_t requested = 0;
    for (std::size_t h : held_) requested += h;
    m.rounding = peak_ - requested;
  }

  AllocatorPtr inner_;
  std::mutex mutex_;
  TrainingEngine* engine_ = nullptr;
  HolderCategories holders_;
  Stream comm_;
  bool own_comm_stream_ = false;
  std::unordered_map<void*, Live> live_;
  std::array<std::size_t, kCategories> held_{};  // the live blocks' requests by category
  std::size_t peak_ = 0;
  std::size_t peak_serial_ = 0;  // the allocation that made the peak
  bool peak_unnamed_ = false;    // made before the engine was watched
  std::size_t visits_ = 0;
  bool unsettled_ = false;
  MemoryByCategory at_peak_;
};

// --init-from's read buffers (ParamFileSource) in the host allocator's
// breakdown, as their own category (Note [Host memory in the plan]).
class LoadingBuffers final : public Allocator {
 public:
  explicit LoadingBuffers(std::shared_ptr<PeakBreakdownAllocator> host) : host_(std::move(host)) {}
  void* allocate(std::size_t nbytes, Stream stream) override {
    return host_->allocate_loading(nbytes, stream);
  }
  void deallocate(void* ptr) noexcept override { host_->deallocate(ptr); }
  void record_use(void* ptr, Stream stream) override { host_->record_use(ptr, stream); }
  Device device() const override { return host_->device(); }

 private:
  std::shared_ptr<PeakBreakdownAllocator> host_;
};

// This rank's micro-batches: host tensors of the right shapes, never read
// (a dry run's copies are dropped).
std::vector<Batch> dry_micro_batches(const TrainerConfig& c, int world_size) {
  const std::int64_t rows =
      c.batch_size / (static_cast<std::int64_t>(world_size) * c.micro_batches);
  std::vector<Batch> batches(static_cast<std::size_t>(c.micro_batches));
  for (Batch& b : batches) {
    if (c.model.kind == "mlp") {
      b.inputs = Tensor::empty({rows, resolve_mlp_dims(c.model).d_in}, DType::f32);
      b.targets = Tensor::empty({rows}, DType::i64);
      b.normaliser = static_cast<double>(c.batch_size);
    } else {
      b.inputs = Tensor::empty({rows, c.seq_len}, DType::i32);
      b.targets = Tensor::empty({rows, c.seq_len}, DType::i32);
      b.normaliser = static_cast<double>(c.batch_size * c.seq_len);
    }
  }
  return batches;
}

void check_plan_geometry(const TrainerConfig& c, int world_size, int steps) {
  ZRT_CHECK_ARG(world_size >= 1 && world_size <= kMaxPlannedRanks, "memory plan: a world of ",
                world_size, " ranks; plans run every rank as a thread, 1 to ", kMaxPlannedRanks);
  ZRT_CHECK_ARG(steps >= 1, "memory plan: ", steps, " steps; plan at least 1");
  ZRT_CHECK_ARG(c.micro_batches >= 1, "memory plan: ", c.micro_batches, " micro-batches per step");
  ZRT_CHECK_ARG(c.batch_size >= 1 &&
                    c.batch_size % (static_cast<std::int64_t>(world_size) * c.micro_batches) == 0,
                "memory plan: batch size ", c.batch_size, " is not a positive multiple of ",
                world_size, " ranks x ", c.micro_batches, " micro-batches");
  if (c.model.kind != "mlp") {
    const std::int64_t block = resolve_gpt_dims(c.model).block_size;
    ZRT_CHECK_ARG(c.seq_len >= 1 && c.seq_len <= block, "memory plan: sequence length ", c.seq_len,
                  " is outside [1, ", block, "], the model's block size");
  }
}

RankMemoryPlan plan_rank(const TrainerConfig& config, const CommPtr& world, int steps,
                         std::size_t data_bytes) {
  TrainerConfig c = config;
  const bool cuda = c.engine.zero.device.is_cuda();
  c.model.dtype = c.engine.zero.dtype;
  c.model.device = Device::cpu();
  c.engine.zero.device = Device::cpu();
  // CUDA's shape: compute and comm streams
  if (cuda) c.engine.zero.cpu_streams = optim::CpuStreams::all;
  if (!c.engine.zero.cpu_streams) c.engine.zero.cpu_streams = optim::default_cpu_streams();
  c.engine.zero.tracer = nullptr;
  c.engine.zero.dry_run = true;
  // Ops choose their CUDA paths' buffers (Note [CUDA kernels planned on the CPU]).
  std::optional<kernels::ScopedCudaKernelPlan> as_cuda;
  if (cuda) as_cuda.emplace();
  auto memory = std::make_shared<PeakBreakdownAllocator>(make_unbacked_caching_allocator());
  c.engine.zero.allocator = memory;
  // Note [Host memory in the plan]
  auto host = std::make_shared<PeakBreakdownAllocator>(make_unbacked_caching_allocator());
  c.engine.zero.host_allocator = host;

  // Initialised as the Trainer does, each rank drawing its shards where they
  // live (Note [Sharded initialisation]) or reading them from --init-from
  // (Note [Streamed loading]): the draws and reads are dropped (Note [Dry
  // runs]), the read buffers held as long.
  auto make_engine = [&] {
    if (c.init_from.empty())
      return std::make_unique<TrainingEngine>(make_model(c.model), world, c.engine);
    const ParamFileSource file(make_model(c.model)->units(), c.init_from,
                               std::make_shared<LoadingBuffers>(host));
    return std::make_unique<TrainingEngine>(make_model(c.model), world, c.engine, file);
  };
  const std::unique_ptr<TrainingEngine> owned_engine = make_engine();
  TrainingEngine& engine = *owned_engine;
  memory->watch(&engine);
  host->watch(&engine);
  struct Unwatch {  // before the engine goes, however the plan ends
    PeakBreakdownAllocator &memory, &host;
    ~Unwatch() {
      memory.watch(nullptr);
      host.watch(nullptr);
    }
  } unwatch{*memory, *host};

  RankMemoryPlan plan;
  plan.rank = world->rank();
  const std::vector<Batch> batches = dry_micro_batches(c, world->size());
  for (int s = 0; s < steps; ++s) {
    memory->reset_peak_stats();  // as the Trainer does: each step's own peak
    engine.step(batches, c.schedule.max_lr);
    const MemoryByCategory m = memory->settle();
    plan.step_peaks.push_back(m.total());
    if (m.total() > plan.peak) {
      plan.peak = m.total();
      plan.at_peak = m;
    }
  }
  plan.reserved_peak = memory->stats().peak_reserved;
  plan.host_at_peak = host->settle();
  plan.host_at_peak.data = data_bytes;  // held from before the engine to the end
  plan.host_peak = plan.host_at_peak.total();
  plan.bookkeeping_visits = memory->visits();
  return plan;
}

}  // namespace

const RankMemoryPlan& MemoryPlan::largest() const {
  ZRT_CHECK_STATE(!ranks.empty(), "memory plan: no ranks");
  return *std::max_element(
      ranks.begin(), ranks.end(),
      [](const RankMemoryPlan& a, const RankMemoryPlan& b) { return a.peak < b.peak; });
}

MemoryPlan plan_memory(const TrainerConfig& config, int world_size, int steps,
                       std::size_t data_bytes) {
  TrainerConfig c = config;
  c.model.dtype = c.engine.zero.dtype;
  validate_model_config(c.model);
  check_plan_geometry(c, world_size, steps);
  MemoryPlan plan;
  plan.ranks.resize(static_cast<std::size_t>(world_size));
  run_local_ranks(world_size, [&](const CommPtr& world) {
    world->set_link_model({});  // a dry run plans memory, not time (Note [Link model])
    plan.ranks[static_cast<std::size_t>(world->rank())] = plan_rank(c, world, steps, data_bytes);
  });
  return plan;
}

std::vector<FittingCandidate> plan_fitting(const TrainerConfig& config, int world_size,
                                           std::size_t budget_bytes, const std::string& offload_dir,
                                           std::size_t host_budget_bytes, std::size_t data_bytes) {
  using optim::ShardingStrategy;
  // Cheapest first: no gathers, one per unit and step, two.
  std::vector<ShardingStrategy> strategies = {
      ShardingStrategy::no_shard, ShardingStrategy::shard_grad_op, ShardingStrategy::full_shard};
  const ShardingStrategy asked = config.engine.zero.strategy;
  // hybrid or layer-zero, with the user's zero3 size
  if (std::find(strategies.begin(), strategies.end(), asked) == strategies.end())
    strategies.push_back(asked);
  const bool has_blocks = !make_model(config.model)->block_stages().empty();
  std::vector<std::string> checkpointing = {"none"};
  if (has_blocks) checkpointing = {"none", "every:2", "blocks"};
  // Host offload moves the state out of the device's memory, which on the
  // cpu is host memory too unless a limit makes it a GPU (Note [Memory limit]).
  std::vector<std::string> offloads = {"none"};
  if (config.engine.zero.device.is_cuda() || config.engine.zero.memory_limit > 0)
    offloads.push_back("host");
  offloads.push_back("disk:" + offload_dir);
  std::vector<FittingCandidate> fits;
  auto sweep = [&](DType state) {
    for (const std::string& offload : offloads)
      for (const std::string& ckpt : checkpointing)
        for (ShardingStrategy strategy : strategies)
          for (int prefetch = 2; prefetch >= 0; --prefetch) {
            if (prefetch > 0 && strategy == ShardingStrategy::no_shard)
              continue;  // nothing to gather ahead
            TrainerConfig c = config;
            c.engine.zero.strategy = strategy;
            // The group size is the given strategy's; the others read none.
            if (strategy != ShardingStrategy::hybrid_shard &&
                strategy != ShardingStrategy::layer_zero)
              c.engine.zero.zero3_size = 0;
            c.engine.prefetch = prefetch;
            c.engine.checkpointing = parse_activation_checkpointing(ckpt);
            c.engine.zero.offload_optimizer = optim::parse_optimizer_offload(offload);
            c.engine.zero.adamw.state_dtype = state;
            const MemoryPlan plan = plan_memory(c, world_size, kPlanSteps, data_bytes);
            const RankMemoryPlan& largest = plan.largest();
            std::size_t host = 0;
            for (const RankMemoryPlan& r : plan.ranks) host = std::max(host, r.host_peak);
            if (largest.reserved_peak > budget_bytes || host > host_budget_bytes) continue;
            std::string settings = std::string("--strategy ") + optim::strategy_name(strategy);
            if (c.engine.zero.zero3_size > 0)
              settings += " --zero3-size " + std::to_string(c.engine.zero.zero3_size);
            settings += " --prefetch " + std::to_string(prefetch) + " --activation-checkpointing " +
                        ckpt + " --offload-optimizer " +
                        (offload.starts_with("disk:") ? "disk:DIR" : offload);
            if (state == DType::bf16) settings += " --optimizer-state-dtype bf16";
            fits.push_back({settings, c, largest, host});
          }
  };
  // Note [Settings that fit]: bf16 moments change the numerics, so they are
  // tried only where no setting with the config's own state fits.
  sweep(config.engine.zero.adamw.state_dtype);
  if (fits.empty() && config.engine.zero.adamw.state_dtype == DType::f32) sweep(DType::bf16);
  return fits;
}

}  // namespace zrt::model_zoo
