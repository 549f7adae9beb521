// Note [Streamed saving]: save_full_params, gathering a few elements of a
// unit at a time on 1 to 4 local ranks (uneven shards, a parameter smaller
// than the world, the LM head tied in a unit of its own), writes the bytes
// of write_safetensors(full_params()), every strategy; a NaN in one rank's
// shard fails every rank alike before any file exists.
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

BOOST_AUTO_TEST_CASE(a_nan_in_one_shard_fails_every_rank_before_any_file) {
  TempDir dir("streamed_save_nan");
  const std::string path = dir.file("w.st");
  std::vector<std::string> errors(3);
  run_local_ranks(3, [&](const CommPtr& world) {
    TrainingEngine engine(make_model(testing::odd_gpt_config(true)), world, EngineConfig{});
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
    BOOST_CHECK_MESSAGE(e.find("parameter 'wpe.weight' holds NaN or Inf") != std::string::npos,
                        "a rank said: '" << e << "'");
    BOOST_CHECK_EQUAL(e, errors[0]);
  }
  BOOST_CHECK(std::filesystem::is_empty(std::filesystem::path(path).parent_path()));
}

BOOST_AUTO_TEST_SUITE_END()
