#include "tools/train/train_setup.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/model_zoo/data/data_files.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/kernel_filesystem.h"
#include "zrt/runtime/memory/address_space.h"

namespace zrt::train {

using model_zoo::Dataset;
using model_zoo::TrainerConfig;

bool resumes_a_checkpoint(const TrainOptions& o) {
  return o.resume && (!o.resume_from.empty() ||
                      std::filesystem::exists(std::filesystem::path(o.checkpoint_dir) / "latest"));
}

TrainerConfig trainer_config(const TrainOptions& o, int local_rank) {
  TrainerConfig c = o.trainer;
  if (resumes_a_checkpoint(o)) c.init_from.clear();  // the checkpoint holds the weights
  c.engine.zero.device = o.device == "cuda"
                             ? Device::cuda(device_for_local_rank(local_rank, cuda_device_count()))
                             : Device::cpu();
  return c;
}

const std::vector<std::pair<std::string, optim::ReduceDType>>& reduce_dtype_flags() {
  // The compute dtypes' names (kDTypeFlags), then the quantized formats.
  static const std::vector<std::pair<std::string, optim::ReduceDType>> flags = [] {
    std::vector<std::pair<std::string, optim::ReduceDType>> out;
    for (const DTypeFlag& f : kDTypeFlags) out.emplace_back(f.name, f.reduce);
    const std::pair<std::string, optim::ReduceDType> quantized[] = {
        {"int8", optim::ReduceDType::int8}, {"int4", optim::ReduceDType::int4}};
    out.insert(out.end(), std::begin(quantized), std::end(quantized));
    return out;
  }();
  return flags;
}

const std::vector<std::pair<std::string, optim::GatherDType>>& gather_dtype_flags() {
  static const std::vector<std::pair<std::string, optim::GatherDType>> flags = {
      {"compute", optim::GatherDType::compute}, {"int8", optim::GatherDType::int8}};
  return flags;
}

void check_offload_dir(const optim::OptimizerOffload& offload) {
  if (offload.kind != optim::OptimizerOffload::Kind::disk) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  refuse_kernel_filesystem("--offload-optimizer " + offload.str(), offload.dir);
  ZRT_CHECK_ARG(fs::is_directory(offload.dir, ec), "--offload-optimizer ", offload.str(), ": ",
                fs::exists(offload.dir, ec) ? offload.dir + " is not a directory"
                                            : "directory " + offload.dir + " does not exist");
  ZRT_CHECK_ARG(::access(offload.dir.c_str(), W_OK) == 0, "--offload-optimizer ", offload.str(),
                ": directory ", offload.dir, " is not writable");
}

void raise_block_size_to_seq_len(TrainerConfig& t) {
  if (t.model.kind == "gpt" && !t.model.block_size &&
      model_zoo::resolve_gpt_dims(t.model).block_size < t.seq_len)
    t.model.block_size = t.seq_len;
}

Dataset load_data(const TrainOptions& o, const TrainerConfig& c) {
  if (!o.data.empty()) return model_zoo::load_dataset(o.data);
  if (o.trainer.model.kind == "mlp") {
    auto dims = model_zoo::resolve_mlp_dims(c.model);
    return model_zoo::synthetic_cluster_dataset(0, 4096, dims.d_in, dims.n_classes);
  }
  return model_zoo::synthetic_text_dataset();
}

std::size_t data_memory_bytes(const TrainOptions& o, const TrainerConfig& c) {
  return o.data.empty() ? load_data(o, c).nbytes() : model_zoo::data_file_memory_bytes(o.data);
}

model_zoo::Trainer make_trainer(const CommPtr& world, const TrainOptions& o, TrainerConfig config,
                                const Dataset* shared) {
  Dataset data = shared ? *shared : load_data(o, config);
  return model_zoo::Trainer(world, std::move(config), std::move(data));
}

Device world_device(const TrainOptions& o) {
  return o.device == "cuda" ? Device::cuda(0) : Device::cpu();
}

void run_ranks(int local_ranks, const std::function<void(const CommPtr&, int, const CommPtr&)>& fn,
               int threads, Device device, WorldTransport transport) {
  auto kernel_threads = [&](int ranks_here) {
    kernels::set_cpu_threads(threads > 0 ? threads : kernels::default_cpu_threads(ranks_here));
  };
  if (local_ranks > 0) {
    run_local_ranks(local_ranks, [&](const CommPtr& world) {
      kernel_threads(local_ranks);
      fn(world, world->rank(), nullptr);
    });
  } else {
    World w = init_world(default_comm_timeout(), device, transport);
    kernel_threads(w.launch.local_size);
    fn(w.comm, w.local_rank, w.bootstrap);
  }
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

namespace {
// The memory limit of this process's control group (v2 memory.max, v1
// memory.limit_in_bytes), read where /proc/self/cgroup places it and at
// every directory above it up to the hierarchy's root (a container's own
// view, where its path may not exist); 0 where none is set.
std::uint64_t cgroup_memory_limit() {
  std::string v2_path, v1_path;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) v2_path = path;
    std::stringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") v1_path = path;
  }
  // The smallest limit of the group and of every group above it (a limit
  // on a parent, a systemd slice, binds its children too).
  std::uint64_t smallest = 0;
  auto take = [&](const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string text;
    if (!(in >> text) || text == "max") return;
    try {
      const std::uint64_t bytes = std::stoull(text);
      if (bytes < (std::uint64_t{1} << 62))  // v1 writes "no limit" as about 2^63
        smallest = smallest == 0 ? bytes : std::min(smallest, bytes);
    } catch (const std::exception&) {
    }
  };
  struct Hierarchy {
    std::string root, group, file;
  };
  const Hierarchy hierarchies[] = {{"/sys/fs/cgroup", v2_path, "memory.max"},
                                   {"/sys/fs/cgroup/memory", v1_path, "memory.limit_in_bytes"}};
  for (const auto& [root, group, file] : hierarchies) {
    for (std::filesystem::path dir = std::filesystem::path(root + group).lexically_normal();;
         dir = dir.parent_path()) {
      take(dir / file);
      if (dir == root || dir.string().size() <= root.size()) break;
    }
  }
  return smallest;
}
}  // namespace

AvailableMemory available_memory() {
  std::uint64_t avail = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") avail = kib * 1024;
    meminfo.ignore(64, '\n');
  }
  const std::uint64_t limit = cgroup_memory_limit();
  if (limit > 0) avail = std::min<std::uint64_t>(avail ? avail : UINT64_MAX, limit);
  if (const std::optional<AddressSpaceLimit> as = address_space_limit();
      as && (avail == 0 || as->left() < avail))
    return {avail, as};
  return {avail, std::nullopt};
}

std::string AvailableMemory::bound_by() const {
  return limit ? " (what " + limit->describe() + " leaves)" : "";
}

std::optional<MemoryShortfall> AvailableMemory::shortfall(std::uint64_t on_machine,
                                                          std::uint64_t in_process) const {
  if (limit && in_process > limit->left()) return MemoryShortfall{in_process, limit->left(), true};
  if (machine > 0 && on_machine > machine) return MemoryShortfall{on_machine, machine, false};
  return std::nullopt;
}

}  // namespace zrt::train
