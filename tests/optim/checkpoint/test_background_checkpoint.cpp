// Checkpoints saved in the background (Note [Checkpoints saved in the
// background]): the files are those a synchronous save of the same step
// writes, byte for byte, even when training has changed every shard before
// the write begins (f32 and bf16 moments, in memory, host or disk); a write that fails on one rank fails on every rank at
// the next wait, leaves no step behind, and the next save works.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "tests/support/rank_check.h"
#include "zrt/optim/checkpoint/background_checkpoint.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::testing;
using zrt::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file of two step directories, byte for byte; the differences found.
std::vector<std::string> differing_files(const fs::path& a, const fs::path& b) {
  std::vector<std::string> out;
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(a)) {
    ++files;
    const fs::path other = b / e.path().filename();
    if (!fs::exists(other))
      out.push_back(e.path().filename().string() + " is missing from " + b.string());
    else if (file_bytes(e.path()) != file_bytes(other))
      out.push_back(e.path().filename().string() + " differs");
  }
  if (files !=
      static_cast<std::size_t>(std::distance(fs::directory_iterator(b), fs::directory_iterator())))
    out.push_back("the directories hold different numbers of files");
  return out;
}

// The f32 bits of a host tensor's values, widened apart from zrt's casts:
// a bf16 value is the high half of its f32.
std::vector<std::uint32_t> f32_bits(const Tensor& t) {
  std::vector<std::uint32_t> out(static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::f32) {
    std::memcpy(out.data(), t.data_ptr(), t.nbytes());
    return out;
  }
  ZRT_EXPECT(t.dtype() == DType::bf16, "f32_bits of ", t.str());
  const auto* half = static_cast<const std::uint16_t*>(t.data_ptr());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::uint32_t{half[i]} << 16;
  return out;
}

// Per rank: set once that rank's training changed its state after the save.
struct Gates {
  explicit Gates(int n) : open(static_cast<std::size_t>(n)) {}
  std::vector<std::atomic<bool>> open;
  void wait(int rank) const {
    while (!open[static_cast<std::size_t>(rank)].load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_background_save_writes_what_a_synchronous_save_writes) {
  // Every strategy, dtype (f16: the loss scaler's state) and moments on disk
  // (read into temporaries while the compute runs on a stream of its own).
  std::vector<std::pair<TrainSetup, int>> cases;
  for (TrainSetup s : one_setup_per_strategy()) cases.push_back({s, 4});
  TrainSetup on_disk;
  on_disk.batch_size = 12;
  on_disk.cpu_streams = optim::CpuStreams::all;
  on_disk.offload_optimizer.kind = optim::OptimizerOffload::Kind::disk;
  cases.push_back({on_disk, 3});
  // bf16 moments (Note [bf16 AdamW moments]), staged in bf16 and widened by
  // the writer: in memory, beside a master in host memory, and on disk.
  for (const auto kind : {optim::OptimizerOffload::Kind::none, optim::OptimizerOffload::Kind::host,
                          optim::OptimizerOffload::Kind::disk}) {
    TrainSetup bf16 = kind == optim::OptimizerOffload::Kind::disk ? on_disk : TrainSetup{};
    bf16.batch_size = 12;
    bf16.optimizer_state_dtype = DType::bf16;
    bf16.offload_optimizer.kind = kind;
    cases.push_back({bf16, 3});
  }
  for (auto& [s, ranks] : cases) {
    TempDir sync_dir, async_dir;
    if (s.offload_optimizer.kind == optim::OptimizerOffload::Kind::disk)
      s.offload_optimizer.dir = sync_dir.str();
    s.checkpoint_async = true;
    const std::string what = std::string(s.model) + " " + optim::strategy_name(s.strategy) + " " +
                             dtype_name(s.dtype) + ", " + dtype_name(s.optimizer_state_dtype) +
                             " moments, offload " + s.offload_optimizer.str();
    auto gates = std::make_shared<Gates>(ranks);
    run_local_ranks(
        ranks,
        [&](const CommPtr& world) {
          auto t = tiny_trainer(world, s);
          TrainOutput o;
          train_until(*t, 2, o);
          t->save_checkpoint(optim::checkpoint_into(async_dir.str()));
          // The synchronous save of the same step (it waits for the background
          // one: Note [Checkpoints wait for the save in flight]).
          const std::string sync_step = optim::save_checkpoint(
              t->engine().module(), t->next_step(), optim::checkpoint_into(sync_dir.str() + "/ck"));
          ZRT_EXPECT(!sync_step.empty(), "no synchronous save");
          // Writes of the next background save start only after training changed every shard.
          optim::CheckpointSaveOptions gated = optim::checkpoint_into(async_dir.str() + "/gated");
          gated.before_write = [gates](int rank) { gates->wait(rank); };
          t->save_checkpoint(gated);
          train_until(*t, 4, o);
          gates->open[static_cast<std::size_t>(world->rank())] = true;
          const std::string written = t->wait_for_checkpoint();
          ZRT_EXPECT(written == async_dir.str() + "/gated/step-000002", "wait returned ", written);
        },
        std::chrono::seconds(120));
    const fs::path sync_step = sync_dir.path / "ck" / "step-000002";
    for (const fs::path& async_step :
         {async_dir.path / "step-000002", async_dir.path / "gated" / "step-000002"}) {
      BOOST_REQUIRE_MESSAGE(fs::exists(async_step / "index.json"),
                            what << ": " << async_step << " was not written");
      for (const std::string& d : differing_files(sync_step, async_step))
        BOOST_ERROR(what << ": " << async_step << ": " << d);
    }
    BOOST_CHECK_EQUAL(optim::resolve_checkpoint((async_dir.path / "gated").string()),
                      (async_dir.path / "gated" / "step-000002").string());
  }
}

// Note [Checkpoints saved in the background]: the snapshot copies the state
// as it lives, bf16 moments in bf16 (the plain copy f32 state takes, no cast
// in the pause): 12 bytes per parameter of a rank's shard, 8 with bf16
// moments; the file holds the live moments widened exactly, and is a
// synchronous save's.
BOOST_AUTO_TEST_CASE(the_staging_holds_the_state_in_its_own_dtypes) {
  for (const DType moments : {DType::f32, DType::bf16})
    for (const auto kind :
         {optim::OptimizerOffload::Kind::none, optim::OptimizerOffload::Kind::host}) {
      TempDir sync_dir, async_dir;
      TrainSetup s;
      s.batch_size = 12;
      s.optimizer_state_dtype = moments;
      s.offload_optimizer.kind = kind;
      const std::string what =
          std::string(dtype_name(moments)) + " moments, offload " + s.offload_optimizer.str();
      run_local_ranks(
          2,
          [&](const CommPtr& world) {
            auto t = tiny_trainer(world, s);
            TrainOutput o;
            train_until(*t, 1, o);
            optim::ZeroModule& module = t->engine().module();
            std::uint64_t shard_elements = 0;
            for (const auto& h : module.handles())
              shard_elements += static_cast<std::uint64_t>(h->zero1_shard().numel());
            optim::BackgroundCheckpointSaver saver(module);
            saver.save(t->next_step(), optim::checkpoint_into(async_dir.str()));
            const std::uint64_t per_param = moments == DType::bf16 ? 8 : 12;
            ZRT_EXPECT(saver.staging_bytes() == per_param * shard_elements, what, ": staged ",
                       saver.staging_bytes(), " bytes for ", shard_elements,
                       " parameters of the shard, not ", per_param, " a parameter");
            ZRT_EXPECT(saver.wait() == async_dir.str() + "/step-000001", what,
                       ": the background save was not written");
            // The file's moments are the live ones, widened exactly.
            const SafetensorsFile file = read_safetensors(
                (async_dir.path / "step-000001" / optim::rank_file_name(world->rank())).string());
            for (std::size_t k = 0; k < module.handles().size(); ++k) {
              const std::string& unit = module.handles()[k]->name();
              const auto& opt = module.optimizer();
              for (const auto& [kind, live] :
                   {std::pair{optim::ShardKind::exp_avg, opt.exp_avg_shard(k)},
                    std::pair{optim::ShardKind::exp_avg_sq, opt.exp_avg_sq_shard(k)}}) {
                const std::string name = optim::shard_tensor_name(unit, kind);
                ZRT_EXPECT(f32_bits(file.tensors.at(name)) == f32_bits(live), what, ": ", name,
                           " in the file is not the live moment widened");
              }
            }
            optim::save_checkpoint(module, t->next_step(), optim::checkpoint_into(sync_dir.str()));
          },
          std::chrono::seconds(120));
      for (const std::string& d :
           differing_files(sync_dir.path / "step-000001", async_dir.path / "step-000001"))
        BOOST_ERROR(what << ": " << d);
    }
}

// Note [Checkpoints wait for the save in flight]: a load made while a
// background save is written reads that save's step, not the one before; a
// synchronous save waits for it too; a second saver of the module is refused.
BOOST_AUTO_TEST_CASE(a_load_during_a_background_save_reads_that_save) {
  TempDir dir, other;
  TrainSetup s;
  s.batch_size = 12;
  s.checkpoint_async = true;
  run_local_ranks(
      2,
      [&](const CommPtr& world) {
        auto t = tiny_trainer(world, s);
        optim::ZeroModule& module = t->engine().module();
        TrainOutput o;
        train_until(*t, 1, o);
        t->save_checkpoint(optim::checkpoint_into(dir.str()));
        t->wait_for_checkpoint();
        train_until(*t, 2, o);
        const auto saved = module.full_params();
        // The write starts late: without the wait, the load below finds step 1.
        optim::CheckpointSaveOptions slow = optim::checkpoint_into(dir.str());
        slow.before_write = [](int) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        };
        t->save_checkpoint(slow);
        train_until(*t, 3, o);  // the state moves on from the saved one
        const optim::TrainingState state = optim::load_checkpoint(module, dir.str());
        ZRT_EXPECT(state.next_step == 2, "rank ", world->rank(), " loaded next_step ",
                   state.next_step, " while step 2 was written; expected 2");
        const auto loaded = module.full_params();
        for (const auto& [name, value] : saved)
          ZRT_EXPECT(loaded.at(name).to_doubles() == value.to_doubles(), name,
                     " is not the value the background save wrote");
        ZRT_EXPECT(t->wait_for_checkpoint().empty(), "the load collected the save in flight");
        // A synchronous save waits alike: the next resolve finds it, not a half-written step.
        t->save_checkpoint(slow);
        const std::string sync_step =
            optim::save_checkpoint(module, 7, optim::checkpoint_into(other.str()));
        ZRT_EXPECT(t->wait_for_checkpoint().empty(), "the synchronous save collected the save");
        ZRT_EXPECT(!sync_step.empty(), "no synchronous save");
        // Boost.Test's checks are for the main thread: a rank says it with ZRT_EXPECT.
        std::string refused;
        try {
          optim::BackgroundCheckpointSaver second(module);
        } catch (const InvalidArgument& e) {
          refused = e.what();
        }
        ZRT_EXPECT(refused.find("a BackgroundCheckpointSaver of this module exists already") !=
                       std::string::npos,
                   "a second saver: '", refused, "'");
      },
      std::chrono::seconds(120));
  // The trainer's own step count (3) named the second background save.
  BOOST_CHECK_EQUAL(optim::resolve_checkpoint(dir.str()), (dir.path / "step-000003").string());
  BOOST_CHECK(fs::exists(other.path / "step-000007" / "index.json"));
}

BOOST_AUTO_TEST_CASE(a_failed_background_write_fails_on_every_rank_and_the_next_save_works) {
  TempDir dir;
  TrainSetup s;
  s.batch_size = 12;
  s.checkpoint_async = true;
  const auto errors = std::make_shared<std::vector<std::string>>(3);
  run_local_ranks(
      3,
      [&](const CommPtr& world) {
        auto t = tiny_trainer(world, s);
        TrainOutput o;
        train_until(*t, 1, o);
        t->save_checkpoint(optim::checkpoint_into(dir.str()));
        train_until(*t, 2, o);
        optim::CheckpointSaveOptions failing = optim::checkpoint_into(dir.str());
        failing.before_write = [](int rank) {
          if (rank == 1) ZRT_THROW(CheckpointError, "disk full (injected)");
        };
        t->save_checkpoint(failing);  // returns: the write fails in the background
        train_until(*t, 3, o);        // training goes on meanwhile
        try {
          t->wait_for_checkpoint();
        } catch (const CheckpointError& e) {
          (*errors)[world->rank()] = e.what();
        }
        ZRT_EXPECT(t->wait_for_checkpoint().empty(), "a failure is reported once");
        t->save_checkpoint(optim::checkpoint_into(dir.str()));
        ZRT_EXPECT(t->wait_for_checkpoint() == dir.str() + "/step-000003",
                   "the save after a failed one");
        // The writer's exchanges are not in the ring a hang report reads (Note [Flight recorder]).
        for (const FlightEntry& e : world->flight_recorder()->entries())
          ZRT_EXPECT(e.group.find("checkpoint") == std::string::npos, "the world's ring holds ",
                     e.op, " on ", e.group);
      },
      std::chrono::seconds(120));
  for (int r = 0; r < 3; ++r) {
    BOOST_CHECK_MESSAGE((*errors)[r].find("step-000002 failed on rank 1") != std::string::npos &&
                            (*errors)[r].find("disk full (injected)") != std::string::npos,
                        "rank " << r << ": " << (*errors)[r]);
    BOOST_CHECK_EQUAL((*errors)[r], (*errors)[0]);
  }
  BOOST_CHECK(!fs::exists(dir.path / "step-000002"));
  BOOST_CHECK(!fs::exists(dir.path / "step-000002.tmp"));
  BOOST_CHECK(fs::exists(dir.path / "step-000001" / "index.json"));
  BOOST_CHECK_EQUAL(optim::resolve_checkpoint(dir.str()), (dir.path / "step-000003").string());
}

// Beside an NCCL world the agreements take a host communicator (the MPI
// bootstrap): given one, the saver splits from it and the world carries none
// of the save's exchanges; the files are a synchronous save's. A host
// communicator of other ranks is refused before any collective.
BOOST_AUTO_TEST_CASE(a_host_communicator_carries_the_agreements) {
  constexpr int kRanks = 3;
  TempDir sync_dir, async_dir;
  TrainSetup s;
  s.batch_size = 12;
  const std::vector<CommPtr> host = make_local_world(kRanks);
  run_local_ranks(
      kRanks,
      [&](const CommPtr& world) {
        const int r = world->rank();
        auto t = tiny_trainer(world, s);
        TrainOutput o;
        train_until(*t, 1, o);
        optim::ZeroModule& module = t->engine().module();
        bool refused = false;
        try {
          optim::BackgroundCheckpointSaver other(
              module, host[static_cast<std::size_t>((r + 1) % kRanks)].get());
        } catch (const InvalidArgument&) {
          refused = true;
        }
        ZRT_EXPECT(refused, "a host communicator of other ranks was taken");
        const CommPtr& mine = host[static_cast<std::size_t>(r)];
        const std::uint64_t world_seq = world->sequence_number(),
                            host_seq = mine->sequence_number();
        {
          optim::BackgroundCheckpointSaver saver(module, mine.get());
          saver.save(t->next_step(), optim::checkpoint_into(async_dir.str()));
          ZRT_EXPECT(saver.wait() == async_dir.str() + "/step-000001",
                     "the background save was not written");
        }
        ZRT_EXPECT(world->sequence_number() == world_seq, "the world carried ",
                   world->sequence_number() - world_seq, " collectives of the background save");
        ZRT_EXPECT(mine->sequence_number() == host_seq + 1,
                   "the saver split from the host communicator ",
                   mine->sequence_number() - host_seq, " times");
        optim::save_checkpoint(module, t->next_step(), optim::checkpoint_into(sync_dir.str()));
      },
      std::chrono::seconds(120));
  for (const std::string& d :
       differing_files(sync_dir.path / "step-000001", async_dir.path / "step-000001"))
    BOOST_ERROR(d);
}
