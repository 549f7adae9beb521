// Note [Streamed saving]: save_full_params, gathering a few elements of a
// unit at a time on 1 to 4 local ranks (uneven shards, a parameter smaller
// than the world, the LM head tied in a unit of its own), writes the bytes
// of write_safetensors(full_params()), every strategy; a NaN in one rank's
// shard fails every rank alike before any file exists. With the master in
// host memory (--offload-optimizer host) a save adds at most its chunk to the
// device's allocator, however large a unit's shard.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/model_zoo/models/model.h"
#include "zrt/optim/checkpoint/full_param_file.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;

namespace {

using S = optim::ShardingStrategy;
using zrt::model_zoo::test::TempDir;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(streamed_save)

BOOST_AUTO_TEST_CASE(writes_the_bytes_of_the_whole_model_file) {
  const std::uint64_t seed = zrt::test::test_seed("streamed_save");
  TempDir dir("streamed_save");
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (const auto& [strategy, zero3] : {std::pair{S::full_shard, 0}, std::pair{S::no_shard, 0},
                                          std::pair{S::hybrid_shard, ranks % 2 ? 1 : 2}}) {
      const std::string want = dir.file("whole.st"), got = dir.file("streamed.st");
      run_local_ranks(ranks, [&](const CommPtr& world) {
        EngineConfig e;
        e.seed = seed;
        e.zero.strategy = strategy;
        e.zero.zero3_size = zero3;
        TrainingEngine engine(make_model(testing::odd_gpt_config(true)), world, e);
        const auto params = engine.full_params();
        if (world->rank() == 0) write_safetensors(want, params);
        // 5 elements at a time: pieces cut inside parameters and across them.
        optim::save_full_params(engine.module(), got, "--save", 5);
      });
      BOOST_CHECK_MESSAGE(bytes_of(got) == bytes_of(want), ranks << " rank(s), "
                                                                 << optim::strategy_name(strategy)
                                                                 << ": the streamed file differs");
    }
}

// Note [Master in host memory]: the master's chunks go up one at a time,
// straight into this rank's slot of the gather buffer, so the save's device
// memory is the chunk, not the unit's shard (here 21 to 65 times the chunk).
BOOST_AUTO_TEST_CASE(a_master_in_host_memory_adds_at_most_the_chunk_to_the_device) {
  const std::uint64_t seed = zrt::test::test_seed("streamed_save_offload");
  TempDir dir("streamed_save_offload");
  for (int ranks = 1; ranks <= 3; ++ranks) {
    // 1021 elements: prime, so pieces cut inside parameters.
    const auto added =
        testing::expect_save_within_chunk(ranks, Device::cpu(), 1021, seed, dir.file(""));
    BOOST_TEST(added.size() == static_cast<std::size_t>(ranks));
    for (std::size_t r = 0; r < added.size(); ++r)
      BOOST_TEST_MESSAGE(ranks << " rank(s), rank " << r << ": the save added " << added[r]
                               << " bytes");
  }
}

BOOST_AUTO_TEST_CASE(a_nan_in_one_shard_fails_every_rank_before_any_file) {
  for (const auto kind :
       {optim::OptimizerOffload::Kind::none, optim::OptimizerOffload::Kind::host}) {
    TempDir dir("streamed_save_nan");
    const std::string path = dir.file("w.st");
    std::vector<std::string> errors(3);
    run_local_ranks(3, [&](const CommPtr& world) {
      EngineConfig e;
      e.zero.offload_optimizer.kind = kind;
      TrainingEngine engine(make_model(testing::odd_gpt_config(true)), world, e);
      if (world->rank() == 2) {
        const auto& h = engine.handles()[0];  // embed: wte, then wpe
        const auto& info = h->zero1_shard_infos()[1];
        BOOST_REQUIRE(info.in_shard);
        h->zero1_shard().data<float>()[info.offset_in_shard] = std::nanf("");
      }
      try {
        optim::save_full_params(engine.module(), path, "--save " + path);
      } catch (const ResourceError& e) {
        errors[static_cast<std::size_t>(world->rank())] = e.what();
      }
    });
    for (const std::string& e : errors) {
      BOOST_CHECK_MESSAGE(
          e.find("parameter 'wpe.weight' holds NaN or Inf") != std::string::npos,
          (kind == optim::OptimizerOffload::Kind::host ? "offload host" : "no offload")
              << ": a rank said: '" << e << "'");
      BOOST_CHECK_EQUAL(e, errors[0]);
    }
    BOOST_CHECK(std::filesystem::is_empty(std::filesystem::path(path).parent_path()));
  }
}

BOOST_AUTO_TEST_SUITE_END()
