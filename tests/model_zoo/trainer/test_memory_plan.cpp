// The memory plan (Note [Memory plan], Note [Dry runs]): for a sweep of
// model size, world size, strategy, dtype, micro-batches, prefetch,
// activation checkpointing, optimizer offload and state dtype, each rank's planned peak of
// each step is within 5% of the peak its allocator measured in a real run on
// local ranks; the breakdown adds up and names what it should; a plan
// allocates no memory and runs no kernel; bad input is a typed error.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "tests/support/test_seed.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/model_zoo/data/data_files.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/trainer/memory_plan.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/memory/caching_allocator.h"

using namespace zrt;
using namespace zrt::model_zoo;
using optim::ShardingStrategy;
using zrt::test::TempDir;

namespace {

struct Case {
  std::string name;
  TrainerConfig config;
  int world = 1;
};

TrainerConfig base_config(const std::string& kind) {
  TrainerConfig c;
  c.model.kind = kind;
  c.model.preset = "tiny";
  c.engine.zero.adamw.max_grad_norm = 1.0;
  c.engine.zero.adamw.weight_decay = 0.1;
  c.batch_size = 12;
  c.seq_len = 16;
  c.steps = 2;
  // Compute and collectives on the calling thread: the issue order is the
  // order memory is freed in, as on CUDA (Note [Memory plan]).
  c.engine.zero.cpu_streams = optim::CpuStreams::none;
  return c;
}

// Each rank's allocator statistics after each of the config's steps,
// trained for real on the embedded data.
std::vector<std::vector<MemoryStats>> measured_memory(const TrainerConfig& config, int world) {
  std::vector<std::vector<MemoryStats>> stats(static_cast<std::size_t>(world));
  run_local_ranks(
      world,
      [&](const CommPtr& comm) {
        Dataset data = config.model.kind == "gpt" ? synthetic_text_dataset()
                                                  : synthetic_cluster_dataset(0, 4096, 16, 8);
        Trainer trainer(comm, config, std::move(data));
        for (std::int64_t s = 0; s < config.steps; ++s)
          stats[static_cast<std::size_t>(comm->rank())].push_back(trainer.step().memory);
      },
      std::chrono::seconds(120));
  return stats;
}

// Each rank's allocator peak of each step (mem_peak).
std::vector<std::vector<std::size_t>> measured_peaks(const TrainerConfig& config, int world) {
  std::vector<std::vector<std::size_t>> peaks;
  for (const auto& rank : measured_memory(config, world)) {
    peaks.emplace_back();
    for (const MemoryStats& m : rank) peaks.back().push_back(m.peak_allocated);
  }
  return peaks;
}

std::vector<Case> sweep(const std::string& scratch) {
  std::vector<Case> cases;
  auto add = [&](std::string name, int world, const std::function<void(TrainerConfig&)>& edit,
                 const std::string& kind = "gpt") {
    TrainerConfig c = base_config(kind);
    edit(c);
    cases.push_back({std::move(name), c, world});
  };
  auto wider =
      [](TrainerConfig& c) {  // blocks of about a MiB: the large pool and its unsplit remainders
        c.model.n_layer = 3;
        c.model.n_embd = 160;
        c.model.n_head = 5;
      };
  add("gpt tiny, 1 rank", 1, [](TrainerConfig&) {});
  add("gpt tiny, 2 ranks, full", 2, [](TrainerConfig&) {});
  add("gpt tiny, 3 ranks, full, bf16, 2 micro-batches", 3, [](TrainerConfig& c) {
    c.engine.zero.dtype = DType::bf16;
    c.micro_batches = 2;
  });
  add("gpt tiny, 2 ranks, grad-op, f16", 2, [](TrainerConfig& c) {
    c.engine.zero.strategy = ShardingStrategy::shard_grad_op;
    c.engine.zero.dtype = DType::f16;
  });
  add("gpt tiny, 2 ranks, no-shard, 2 micro-batches", 2, [](TrainerConfig& c) {
    c.engine.zero.strategy = ShardingStrategy::no_shard;
    c.micro_batches = 2;
  });
  add("gpt tiny, 4 ranks, hybrid 2, bf16 reduce", 4, [](TrainerConfig& c) {
    c.engine.zero.strategy = ShardingStrategy::hybrid_shard;
    c.engine.zero.zero3_size = 2;
    c.engine.zero.grad_reduce.dtype = optim::ReduceDType::bf16;
    c.batch_size = 16;
  });
  add("gpt tiny, 4 ranks, layer-zero 2, bf16", 4, [](TrainerConfig& c) {
    c.engine.zero.strategy = ShardingStrategy::layer_zero;
    c.engine.zero.zero3_size = 2;
    c.engine.zero.dtype = DType::bf16;
    c.batch_size = 16;
  });
  add("gpt tiny, 4 ranks, layer-zero 2, bf16, int8 gather", 4, [](TrainerConfig& c) {
    c.engine.zero.strategy = ShardingStrategy::layer_zero;
    c.engine.zero.zero3_size = 2;
    c.engine.zero.dtype = DType::bf16;
    c.engine.zero.gather.dtype = optim::GatherDType::int8;
    c.batch_size = 16;
  });
  add("gpt tiny, 3 ranks, full, int8 gather", 3,
      [](TrainerConfig& c) { c.engine.zero.gather.dtype = optim::GatherDType::int8; });
  add("gpt tiny, 4 ranks, hybrid 2, int8 reduce, 2 micro-batches", 4, [](TrainerConfig& c) {
    c.engine.zero.strategy = ShardingStrategy::hybrid_shard;
    c.engine.zero.zero3_size = 2;
    c.engine.zero.grad_reduce.dtype = optim::ReduceDType::int8;
    c.micro_batches = 2;
    c.batch_size = 16;
  });
  for (int prefetch : {0, 2})
    add("gpt tiny, 2 ranks, prefetch " + std::to_string(prefetch), 2,
        [=](TrainerConfig& c) { c.engine.prefetch = prefetch; });
  add("gpt tiny, 2 ranks, checkpointing blocks", 2,
      [](TrainerConfig& c) { c.engine.checkpointing = parse_activation_checkpointing("blocks"); });
  add("gpt tiny, 3 ranks, head unit, 2 micro-batches", 3, [](TrainerConfig& c) {
    c.model.head_unit = true;  // the tie's gradient buffer in the head's backward
    c.micro_batches = 2;
  });
  add("gpt tiny, 1 rank, offload grads, 3 micro-batches", 1, [](TrainerConfig& c) {
    c.engine.zero.grad_reduce.offload = true;
    c.micro_batches = 3;
  });
  add("gpt tiny, 2 ranks, moments on disk", 2, [&](TrainerConfig& c) {
    c.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::disk, scratch, 1000};
  });
  // Note [Gathers after the update]: the next step's first three units
  // gathered while the later units' chunks stream through the buffers, and
  // the same gathered at the next step's start.
  for (bool early : {true, false})
    add(std::string("gpt tiny, 2 ranks, moments on disk, prefetch 2, gathers ") +
            (early ? "after the update" : "at the step's start"),
        2, [&, early](TrainerConfig& c) {
          c.batch_size = 4;
          c.engine.prefetch = 2;
          c.engine.gather_after_update = early;
          c.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::disk, scratch, 1000};
        });
  add("gpt tiny, 2 ranks, bf16 optimizer state", 2,
      [](TrainerConfig& c) { c.engine.zero.adamw.state_dtype = DType::bf16; });
  add("gpt wider, 1 rank", 1, wider);
  add("gpt wider, 2 ranks, every:2, bf16", 2, [&](TrainerConfig& c) {
    wider(c);
    c.engine.checkpointing = parse_activation_checkpointing("every:2");
    c.engine.zero.dtype = DType::bf16;
  });
  add("gpt wider, 3 ranks, full, prefetch 2, 2 micro-batches", 3, [&](TrainerConfig& c) {
    wider(c);
    c.engine.prefetch = 2;
    c.micro_batches = 2;
  });
  add(
      "mlp tiny, 1 rank", 1, [](TrainerConfig&) {}, "mlp");
  add(
      "mlp tiny, 3 ranks, grad-op, f16", 3,
      [](TrainerConfig& c) {
        c.engine.zero.strategy = ShardingStrategy::shard_grad_op;
        c.engine.zero.dtype = DType::f16;
      },
      "mlp");
  return cases;
}

// VmRSS or VmHWM of this process, bytes.
double status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string k; in >> k;) {
    double kib = 0;
    if (k == key + ":" && in >> kib) return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

std::size_t max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::size_t>(u.ru_maxrss);
}

// Each rank's host peak in a real run of `c` on local ranks, counted by a
// caching host allocator of its own (which rounds as the plan's does), on
// the data set `data` makes; `seen` looks at each rank's Trainer first.
std::vector<std::size_t> counted_host_peaks(
    const TrainerConfig& c, int world, const std::function<Dataset(int rank)>& data,
    const std::function<void(Trainer&, int rank)>& seen = nullptr) {
  std::vector<std::size_t> held(static_cast<std::size_t>(world));
  run_local_ranks(
      world,
      [&](const CommPtr& comm) {
        TrainerConfig mine = c;
        const AllocatorPtr host = make_caching_allocator(Device::cpu());
        mine.engine.zero.host_allocator = host;
        Trainer trainer(comm, mine, data(comm->rank()));
        if (seen) seen(trainer, comm->rank());
        for (std::int64_t s = 0; s < c.steps; ++s) trainer.step();
        held[static_cast<std::size_t>(comm->rank())] = host->stats().peak_allocated;
      },
      std::chrono::seconds(120));
  return held;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memory_plan)

BOOST_AUTO_TEST_CASE(a_plan_allocates_nothing) {
  // 1.5 B parameters (24 GB of fp32 master and moments): planned in this
  // process, whose largest resident set grows by far less. First in the
  // suite, so no earlier case's memory hides the growth.
  TrainerConfig c = base_config("gpt");
  c.model.preset = "gpt2-124m";
  c.model.n_layer = 48;
  c.model.n_embd = 1600;
  c.model.n_head = 25;
  c.batch_size = 1;
  c.seq_len = 64;
  const std::size_t before = max_rss_kib();
  const RankMemoryPlan p = plan_memory(c, 1, 1).largest();
  const double grew = static_cast<double>(max_rss_kib() - before) * 1024;
  BOOST_TEST_MESSAGE("planned peak " << p.peak / 1e9 << " GB; the largest resident set grew by "
                                     << grew / 1e6 << " MB");
  BOOST_TEST(p.at_peak.master_and_moments > 1.5e9 * 12);
  BOOST_TEST(grew < 0.01 * static_cast<double>(p.peak));
}

BOOST_AUTO_TEST_CASE(plans_every_step_of_every_rank_within_five_percent) {
  TempDir scratch;
  double worst = -1;
  std::string worst_case;
  for (const Case& c : sweep(scratch.str())) {
    const auto measured = measured_peaks(c.config, c.world);
    const MemoryPlan plan = plan_memory(c.config, c.world, static_cast<int>(c.config.steps));
    BOOST_TEST_REQUIRE(plan.ranks.size() == static_cast<std::size_t>(c.world));
    for (int r = 0; r < c.world; ++r) {
      const RankMemoryPlan& p = plan.ranks[static_cast<std::size_t>(r)];
      BOOST_TEST(p.rank == r);
      BOOST_TEST(p.at_peak.total() == p.peak, c.name << ": the breakdown adds up to the peak");
      BOOST_TEST(p.reserved_peak >= p.peak);
      for (std::size_t s = 0; s < measured[r].size(); ++s) {
        const double want = static_cast<double>(measured[r][s]);
        const double got = static_cast<double>(p.step_peaks.at(s));
        const double error = std::abs(got - want) / want;
        BOOST_TEST(error <= 0.05, c.name << ", rank " << r << ", step " << s << ": planned " << got
                                         << " B, measured " << want << " B");
        if (error > worst) {
          worst = error;
          worst_case = c.name;
        }
      }
    }
    BOOST_TEST_MESSAGE(c.name << ": peak " << plan.largest().peak << " B");
  }
  BOOST_TEST_MESSAGE("worst planned-vs-measured error: " << 100 * worst << "% (" << worst_case
                                                         << ")");
}

BOOST_AUTO_TEST_CASE(work_queued_on_cpu_streams_adds_little_to_the_plan) {
  // A task queued on an owned CPU stream keeps its tensors' memory until it
  // runs, so a run whose host is ahead of its streams holds more than the
  // issue order does: never less. But the pool grows little past the plan's:
  // an allocation that would grow it first waits for its stream's queue
  // (Note [Allocations wait for their stream's frees]). Without that wait,
  // a host a step ahead of its compute stream held every block of the step.
  // Activations outweigh the parameters here (8 blocks of width 64, 32 x 32
  // tokens), in segments of their own.
  for (int every : {0, 1})
    for (optim::CpuStreams streams : {optim::CpuStreams::comm, optim::CpuStreams::all}) {
      TrainerConfig c = base_config("gpt");
      c.model.n_layer = 8;
      c.model.n_embd = 64;
      c.batch_size = 32;
      c.seq_len = 32;
      c.engine.zero.cpu_streams = streams;
      c.engine.checkpointing = {every};
      const std::string what = std::string("--cpu-streams ") + optim::cpu_streams_name(streams) +
                               ", checkpointing " + c.engine.checkpointing.str();
      const auto measured = measured_memory(c, 2);
      const MemoryPlan plan = plan_memory(c, 2);
      for (int r = 0; r < 2; ++r) {
        const RankMemoryPlan& p = plan.ranks[static_cast<std::size_t>(r)];
        for (std::size_t s = 0; s < measured[r].size(); ++s)
          BOOST_TEST(measured[r][s].peak_allocated >= p.step_peaks[s], what << ", rank " << r);
        const double reserved = static_cast<double>(measured[r].back().peak_reserved);
        BOOST_TEST_MESSAGE(what << ", rank " << r << ": reserved "
                                << measured[r].back().peak_reserved << " B, planned "
                                << p.reserved_peak << " B");
        BOOST_TEST(reserved <= 1.25 * static_cast<double>(p.reserved_peak), what << ", rank " << r);
      }
    }
}

BOOST_AUTO_TEST_CASE(breakdown_names_what_each_setting_moves) {
  TrainerConfig c = base_config("gpt");
  c.model.n_layer = 4;
  const RankMemoryPlan one = plan_memory(c, 1).largest();
  // fp32 on one rank: the zero3 shard and the unsharded parameter are the
  // master itself (Note [Unsharded parameter of a world of one]).
  BOOST_TEST(one.at_peak.zero3_shards == 0u);
  BOOST_TEST(one.at_peak.unsharded_params == 0u);
  BOOST_TEST(one.at_peak.master_and_moments > 0u);
  BOOST_TEST(one.at_peak.activations > 0u);

  c.engine.zero.dtype = DType::bf16;
  const RankMemoryPlan two = plan_memory(c, 2).largest();
  BOOST_TEST(two.at_peak.zero3_shards > 0u);
  BOOST_TEST(two.at_peak.unsharded_params > 0u);
  // Half the master and moments each, on two ranks.
  BOOST_TEST(two.at_peak.master_and_moments < one.at_peak.master_and_moments);

  // Int8 zero3 shards: about half of bf16's (Note [Quantized parameter gather]).
  TrainerConfig int8 = c;
  int8.engine.zero.gather.dtype = optim::GatherDType::int8;
  const RankMemoryPlan quantized = plan_memory(int8, 2).largest();
  BOOST_TEST(quantized.at_peak.zero3_shards < 0.6 * double(two.at_peak.zero3_shards));
  BOOST_TEST(quantized.at_peak.zero3_shards > 0.4 * double(two.at_peak.zero3_shards));

  TrainerConfig blocks = c;
  blocks.engine.checkpointing = parse_activation_checkpointing("blocks");
  BOOST_TEST(plan_memory(blocks, 2).largest().at_peak.activations < two.at_peak.activations);

  TempDir scratch;
  TrainerConfig disk = c;
  disk.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::disk, scratch.str(), 1000};
  const RankMemoryPlan on_disk = plan_memory(disk, 2).largest();
  // The master stays; m and v (twice the master's bytes) leave.
  BOOST_TEST(3 * on_disk.at_peak.master_and_moments == two.at_peak.master_and_moments);
  BOOST_TEST(std::filesystem::is_empty(scratch.path), "a dry run creates no scratch file");
  // bf16 moments (Note [bf16 AdamW moments]): 4 + 2 + 2 bytes per parameter
  // of the shard instead of 4 + 4 + 4.
  TrainerConfig bf16_state = c;
  bf16_state.engine.zero.adamw.state_dtype = DType::bf16;
  const RankMemoryPlan small = plan_memory(bf16_state, 2).largest();
  const double ratio = static_cast<double>(small.at_peak.master_and_moments) /
                       static_cast<double>(two.at_peak.master_and_moments);
  BOOST_TEST(ratio == 8.0 / 12.0, boost::test_tools::tolerance(0.01));
}

// Note [Host memory in the plan]: with --offload-optimizer host the host
// columns hold the master, m and v of the rank's shards, exactly (4 + 2 x 4
// bytes per parameter, 4 + 2 x 2 with bf16 moments), and the host peak is
// within 5% of what a counting host allocator held in a real run on local
// ranks (the plan's blocks round as that allocator's do). Without offload a
// CPU run holds nothing there; a CUDA run's disk offload holds its two chunk
// buffers there.
BOOST_AUTO_TEST_CASE(host_memory_is_the_offloaded_state_as_counted_in_a_run) {
  for (DType state : {DType::f32, DType::bf16})
    for (int world : {1, 3}) {
      TrainerConfig c = base_config("gpt");
      c.model.n_layer = 3;
      c.engine.zero.adamw.state_dtype = state;
      c.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::host, "", 0};
      const std::string name =
          std::string(dtype_name(state)) + " state, " + std::to_string(world) + " rank(s)";
      std::vector<std::size_t> state_bytes(world);
      const std::vector<std::size_t> held = counted_host_peaks(
          c, world, [](int) { return synthetic_text_dataset(); },
          [&](Trainer& trainer, int rank) {
            std::size_t bytes = 0;
            for (const auto& h : trainer.engine().handles())
              bytes +=
                  static_cast<std::size_t>(h->zero1_shard().numel()) * (4 + 2 * dtype_size(state));
            state_bytes[static_cast<std::size_t>(rank)] = bytes;
          });
      const MemoryPlan plan = plan_memory(c, world);
      for (int r = 0; r < world; ++r) {
        const RankMemoryPlan& p = plan.ranks[static_cast<std::size_t>(r)];
        BOOST_TEST(p.host_at_peak.master_and_moments == state_bytes[r], name << ", rank " << r);
        BOOST_TEST(p.at_peak.master_and_moments == 0u, name << ": no state on the device");
        BOOST_TEST(p.host_at_peak.total() == p.host_peak);
        const double error = std::abs(static_cast<double>(p.host_peak) - double(held[r])) /
                             static_cast<double>(held[r]);
        BOOST_TEST(error <= 0.05, name << ", rank " << r << ": host planned " << p.host_peak
                                       << " B, held " << held[r] << " B");
        BOOST_TEST_MESSAGE(name << ", rank " << r << ": host planned " << p.host_peak << " B, held "
                                << held[r] << " B, of it state " << state_bytes[r] << " B");
      }
    }
  TrainerConfig c = base_config("gpt");
  BOOST_TEST(plan_memory(c, 2).largest().host_peak == 0u, "nothing offloaded, nothing on the host");
  TempDir scratch;
  const std::int64_t chunk = 1000;
  c.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::disk, scratch.str(), chunk};
  const RankMemoryPlan cpu = plan_memory(c, 2).largest();
  BOOST_TEST(cpu.host_peak == 0u, "on the cpu the chunk buffers are the device's memory");
  c.engine.zero.device = Device::cuda(0);
  const RankMemoryPlan cuda = plan_memory(c, 2).largest();
  BOOST_TEST(cuda.host_peak >= static_cast<std::size_t>(2 * 2 * chunk * 4),
             "beside a CUDA device two buffers of 2 moments x the chunk: " << cuda.host_peak);
  BOOST_TEST(cuda.host_peak < static_cast<std::size_t>(2 * 2 * chunk * 4) + (1u << 20));
}

// Note [Host memory in the plan]: with a data file and --init-from (a bf16
// file: each read holds the part in bf16 and its f32 conversion) the host
// figure holds the data set, as many bytes as the run's (planned from the
// file's size alone), and the read buffers: a run whose host allocator
// (which the Trainer's reads take their buffers from when one is given)
// counts every host block held, with the data set beside it, holds at its
// peak the plan's host figure: exactly without offload (then the reads are
// all it holds, the tied head's compared range among them), within 5% with
// the state in host memory.
BOOST_AUTO_TEST_CASE(host_memory_holds_the_data_set_and_the_init_from_reads) {
  const std::uint64_t seed = zrt::test::test_seed("host_memory_holds_the_data_set");
  TempDir dir;
  const std::string data_path = dir.str() + "/data.txt";
  std::ofstream(data_path) << synthetic_text(seed, 64 * 1024);
  for (bool offload : {false, true})
    for (int world : {1, 3}) {
      TrainerConfig c = base_config("gpt");
      c.model.n_layer = 3;
      c.init_from = dir.str() + "/init.safetensors";
      std::map<std::string, Tensor> init = make_model(c.model)->init_params(seed);
      for (auto& [name, t] : init) t = t.to(DType::bf16);
      init["lm_head.weight"] = init.at("wte.weight");  // as GPT-2 files hold it: read to compare
      write_safetensors(c.init_from, init);
      if (offload) c.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::host, "", 0};
      const std::string name =
          std::string(offload ? "host offload, " : "") + std::to_string(world) + " rank(s)";
      std::vector<std::size_t> data_bytes(world);
      const std::vector<std::size_t> held = counted_host_peaks(c, world, [&](int rank) {
        Dataset data = load_dataset(data_path);
        data_bytes[static_cast<std::size_t>(rank)] = data.nbytes();
        return data;
      });
      const MemoryPlan plan = plan_memory(c, world, 2, data_file_memory_bytes(data_path));
      for (int r = 0; r < world; ++r) {
        const RankMemoryPlan& p = plan.ranks[static_cast<std::size_t>(r)];
        const std::size_t measured = held[r] + data_bytes[r];
        BOOST_TEST(p.host_at_peak.data == data_bytes[r], name << ", rank " << r);
        BOOST_TEST(p.host_at_peak.total() == p.host_peak);
        if (!offload) {
          BOOST_TEST(p.host_at_peak.loading > 0u, name << ": the reads are the host's peak");
          BOOST_TEST(p.host_peak == measured, name << ", rank " << r);
        }
        const double error = std::abs(static_cast<double>(p.host_peak) - double(measured)) /
                             static_cast<double>(measured);
        BOOST_TEST(error <= 0.05, name << ", rank " << r << ": host planned " << p.host_peak
                                       << " B, held " << measured << " B");
        BOOST_TEST_MESSAGE(name << ", rank " << r << ": host planned " << p.host_peak << " B (data "
                                << p.host_at_peak.data << ", reads " << p.host_at_peak.loading
                                << "), held " << measured << " B");
      }
    }
}

// The plan's bookkeeping is linear in the units: twice the layers, about
// twice the blocks looked at (a breakdown that walked the live blocks at each
// new peak looked at four times as many). Counted, not timed.
BOOST_AUTO_TEST_CASE(planning_is_linear_in_the_layers) {
  TrainerConfig c = base_config("gpt");
  c.model.n_embd = 8;
  c.model.n_head = 1;
  auto visits = [&](int layers) {
    c.model.n_layer = layers;
    // Two dry steps: the bookkeeping of each step is what must be linear.
    return plan_memory(c, 2, 2).largest().bookkeeping_visits;
  };
  const std::size_t small = visits(100), large = visits(200);
  BOOST_TEST_MESSAGE("blocks looked at: " << small << " for 100 layers, " << large << " for 200");
  BOOST_TEST(small > 0u);
  BOOST_TEST(large < small * 5 / 2, large << " blocks for 200 layers, " << small << " for 100");
}

BOOST_AUTO_TEST_CASE(a_cuda_plan_counts_the_attention_workspace) {
  // A CUDA run's attention takes the GEMM path (Note [Attention paths]),
  // whose T² workspace the CPU path does not have: its plan (on CPU streams
  // of CUDA's shape) must hold it. At T = 256 and 8 heads the workspace of
  // 12 x 8 pairs (f32 scores and probabilities, 48 MiB) outweighs the rest
  // of tiny's step (about 27 MiB).
  TrainerConfig c = base_config("gpt");
  c.seq_len = 256;
  c.model.block_size = 256;
  c.model.n_head = 8;
  c.engine.zero.cpu_streams = optim::CpuStreams::all;
  const std::size_t cpu = plan_memory(c, 1).largest().peak;
  c.engine.zero.device = Device::cuda(0);
  const std::size_t cuda = plan_memory(c, 1).largest().peak;
  const std::size_t workspace = 12 * 8 * kernels::attention_gemm_pair_bytes(256, DType::f32);
  // The CUDA peak is the workspace on top of what is live at an attention
  // call, which is no more than the CPU run's peak.
  BOOST_TEST(cuda > workspace, "cuda plan " << cuda << ", attention workspace " << workspace);
  BOOST_TEST(cuda - workspace <= cpu, "cuda plan " << cuda << ", cpu plan " << cpu);
}

// Note [Memory plan]: the cache's free lists can take until the fifth step
// to reserve their last segment; a plan of kPlanSteps holds what 12 real
// steps reserve (two dry steps planned 22 MiB here where the run reserved
// 24 MiB from its fifth step, and --fit listed settings that then ran out).
// Note [Settings that fit]: every setting listed fits the budget, in the
// note's order (no offload before disk); a budget between the settings'
// peaks lists some and not others; fp32 state is listed while any fits, bf16
// state only when none does; a budget under everything lists nothing.
BOOST_AUTO_TEST_CASE(fitting_lists_what_fits_in_cost_order) {
  TempDir scratch;
  TrainerConfig c = base_config("gpt");
  c.model.n_embd = 256;  // 1.6 M parameters: the settings' peaks differ by megabytes
  c.model.n_head = 4;
  using Kind = optim::OptimizerOffload::Kind;
  auto offload = [](const FittingCandidate& f) {
    return f.config.engine.zero.offload_optimizer.kind;
  };
  auto bf16_state = [](const FittingCandidate& f) {
    return f.config.engine.zero.adamw.state_dtype == DType::bf16;
  };
  const auto all = plan_fitting(c, 2, std::numeric_limits<std::size_t>::max(), scratch.str());
  BOOST_TEST_REQUIRE(all.size() > 2u);
  std::size_t least = std::numeric_limits<std::size_t>::max(), most = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(!bf16_state(all[i]), all[i].settings);
    BOOST_TEST((offload(all[i]) != Kind::host),
               all[i].settings << ": on cpu the host is the device");
    if (i > 0) BOOST_TEST((offload(all[i - 1]) == Kind::none || offload(all[i]) == Kind::disk));
    least = std::min(least, all[i].largest.reserved_peak);
    most = std::max(most, all[i].largest.reserved_peak);
  }
  BOOST_TEST(all.front().settings.find("--offload-optimizer none") != std::string::npos,
             all.front().settings);
  BOOST_TEST_REQUIRE(least < most);
  const std::size_t budget = least + (most - least) / 2;
  const auto some = plan_fitting(c, 2, budget, scratch.str());
  BOOST_TEST(!some.empty());
  BOOST_TEST(some.size() < all.size());
  for (const FittingCandidate& f : some) BOOST_TEST(f.largest.reserved_peak <= budget, f.settings);
  for (const FittingCandidate& f : plan_fitting(c, 2, least - 1, scratch.str())) {
    BOOST_TEST(bf16_state(f), f.settings << " fits under every fp32 setting's peak");
    BOOST_TEST(f.largest.reserved_peak <= least - 1, f.settings);
  }
  BOOST_TEST(plan_fitting(c, 2, 1, scratch.str()).empty());
}

BOOST_AUTO_TEST_CASE(the_reserved_peak_covers_the_steps_after_the_plan) {
  TrainerConfig c = base_config("gpt");
  c.model.preset = "small";
  c.batch_size = 4;
  c.seq_len = 64;
  c.engine.zero.dtype = DType::bf16;
  c.engine.prefetch = 2;
  c.steps = 12;
  std::size_t reserved = 0;
  const auto measured = measured_memory(c, 1);
  for (const MemoryStats& m : measured.front()) reserved = std::max(reserved, m.peak_reserved);
  const RankMemoryPlan p = plan_memory(c, 1).largest();
  BOOST_TEST(p.reserved_peak >= reserved,
             "planned " << p.reserved_peak << " B reserved, 12 steps " << reserved << " B");
  BOOST_TEST(plan_memory(c, 1, 2).largest().reserved_peak < reserved,
             "a test of the steps after the second");
}

BOOST_AUTO_TEST_CASE(steady_steps_make_no_raw_allocation) {
  // After two steps every buffer of a step comes from the caching
  // allocator's segments: the raw source (cudaMalloc on CUDA) is not called
  // again. Every strategy, micro-batches, checkpointing and moments on disk.
  TempDir scratch;
  for (Case c : sweep(scratch.str())) {
    if (c.world > 2) continue;
    c.config.steps = 5;
    for (const auto& rank : measured_memory(c.config, c.world))
      BOOST_TEST(
          rank.back().num_raw_allocs == rank[1].num_raw_allocs,
          c.name << ": raw allocations after steps 1, 2 and 5: " << rank.front().num_raw_allocs
                 << ", " << rank[1].num_raw_allocs << ", " << rank.back().num_raw_allocs);
  }
}

// Note [Host memory in the plan]: on --device cpu the device's memory is
// host memory too, so what a rank's process holds grows, over its Trainer's
// construction and steps, by its host figure plus between its allocator's
// peak and its reserved peak (pages of reserved segments that no block has
// touched are not resident), within 5% (the data set, malloc's own).
// Measured by the process's resident peak (VmHWM, reset first), with the
// master and moments in host memory; the plan must not miss either side.
BOOST_AUTO_TEST_CASE(a_cpu_rank_holds_its_reserved_peak_and_host_memory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return;  // shadow memory and quarantines: resident memory means nothing
#endif
  TrainerConfig c = base_config("gpt");
  c.model.n_layer = 4;
  c.model.n_embd = 512;
  c.model.n_head = 8;
  c.model.vocab_size = 8192;
  c.batch_size = 2;
  c.engine.zero.offload_optimizer = {optim::OptimizerOffload::Kind::host, "", 0};
  const RankMemoryPlan p = plan_memory(c, 1).largest();
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
  const double before = status_bytes("VmRSS");
  BOOST_TEST_REQUIRE(before > 0);
  run_local_ranks(1, [&](const CommPtr& comm) {
    Trainer trainer(comm, c, synthetic_text_dataset());
    for (std::int64_t s = 0; s < c.steps; ++s) trainer.step();
  });
  const double grew = status_bytes("VmHWM") - before;
  const double least = static_cast<double>(p.peak + p.host_peak);
  const double most = static_cast<double>(p.reserved_peak + p.host_peak);
  BOOST_TEST_MESSAGE("resident peak grew by " << grew / 1048576 << " MiB; planned host "
                                              << p.host_peak / 1048576.0 << " MiB + peak "
                                              << p.peak / 1048576.0 << " to reserved "
                                              << p.reserved_peak / 1048576.0 << " MiB");
  BOOST_TEST(p.host_peak > p.reserved_peak / 2, "a test of the host side");
  BOOST_TEST(grew >= 0.95 * least, "grew " << grew << " B, planned at least " << least << " B");
  BOOST_TEST(grew <= 1.05 * most, "grew " << grew << " B, planned at most " << most << " B");
}

BOOST_AUTO_TEST_CASE(bad_input_is_a_typed_error) {
  TrainerConfig c = base_config("gpt");
  BOOST_CHECK_THROW(plan_memory(c, 0), InvalidArgument);
  BOOST_CHECK_THROW(plan_memory(c, kMaxPlannedRanks + 1), InvalidArgument);
  BOOST_CHECK_THROW(plan_memory(c, 5), InvalidArgument);  // 12 sequences over 5 ranks
  BOOST_CHECK_THROW(plan_memory(c, 1, 0), InvalidArgument);
  c.seq_len = 100000;
  BOOST_CHECK_THROW(plan_memory(c, 1), InvalidArgument);
  c = base_config("gpt");
  c.model.n_head = 5;  // does not divide the tiny preset's width
  BOOST_CHECK_THROW(plan_memory(c, 1), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
