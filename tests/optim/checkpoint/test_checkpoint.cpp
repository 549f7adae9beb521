// Checkpoints of training runs on local ranks: a run interrupted by save +
// resume equals the never-stopped run bit for bit (same world, strategy and
// dtype) or within the usual tolerance (another world size or strategy);
// bad checkpoints and failed saves raise on every rank and change nothing.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "tests/support/rank_check.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::testing;
using zrt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 20, kSaveAt = 10;

// Rank 0's view of a run on `w` local ranks.
TrainOutput on_ranks(int w, const std::function<TrainOutput(const CommPtr&)>& fn) {
  TrainOutput out;
  run_local_ranks(
      w,
      [&](const CommPtr& world) {
        TrainOutput o = fn(world);
        if (world->rank() == 0) out = std::move(o);
      },
      std::chrono::seconds(120));
  return out;
}

TrainOutput never_stopped(int w, TrainSetup s) {
  s.steps = kSteps;
  return on_ranks(w, [&](const CommPtr& world) { return train_tiny(world, s); });
}

// Trains kSaveAt steps on `w` ranks under `a`, saves, and continues on `w2`
// ranks under `b` from the checkpoint in fresh trainers.
TrainOutput interrupted(int w, TrainSetup a, int w2, TrainSetup b, const std::string& dir) {
  a.steps = b.steps = kSteps;
  TrainOutput first = on_ranks(w, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, a);
    TrainOutput o;
    train_until(*t, kSaveAt, o);
    t->save_checkpoint(zrt::optim::checkpoint_into(dir));
    return o;
  });
  TrainOutput second = on_ranks(w2, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, b);
    t->resume(dir);
    ZRT_EXPECT(t->next_step() == kSaveAt, "resumed at step ", t->next_step());
    TrainOutput o;
    train_until(*t, kSteps, o);
    o.params = full_params(*t);
    return o;
  });
  first.losses.insert(first.losses.end(), second.losses.begin(), second.losses.end());
  first.params = second.params;
  return first;
}

void expect_bitwise(const TrainOutput& got, const TrainOutput& want, const std::string& what) {
  BOOST_REQUIRE_EQUAL(got.losses.size(), want.losses.size());
  for (std::size_t s = 0; s < want.losses.size(); ++s)
    BOOST_CHECK_MESSAGE(got.losses[s] == want.losses[s], what << ": loss of step " << s << " is "
                                                              << got.losses[s] << ", never stopped "
                                                              << want.losses[s]);
  BOOST_REQUIRE_EQUAL(got.params.size(), want.params.size());
  for (const auto& [name, ref] : want.params) {
    const auto& v = got.params.at(name);
    std::size_t differ = 0;
    for (std::size_t e = 0; e < ref.size(); ++e) differ += v[e] != ref[e];
    BOOST_CHECK_MESSAGE(differ == 0,
                        what << ": " << differ << " elements of " << name << " differ");
  }
}

TrainSetup setup(optim::ShardingStrategy s, int z, DType dtype) {
  TrainSetup t;
  t.strategy = s;
  t.zero3_size = z;
  t.dtype = dtype;
  t.micro_batches = 2;
  t.batch_size = 24;  // divisible by 1..4 ranks x 2 micro-batches
  return t;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(offloaded_optimizer_state_resumes_either_way) {
  // Note [Optimizer state on disk]: a checkpoint of an offloaded run is like
  // any other; resuming it with or without offload continues bit for bit.
  const TrainSetup plain = setup(optim::ShardingStrategy::full_shard, 2, DType::f32);
  const TrainOutput want = never_stopped(2, plain);
  TempDir scratch;
  TrainSetup offloaded = plain;
  offloaded.offload_optimizer = {optim::OptimizerOffload::Kind::disk, scratch.str(), 999};
  TrainSetup on_host = plain;  // Note [Master in host memory]
  on_host.offload_optimizer.kind = optim::OptimizerOffload::Kind::host;
  for (const auto& [a, b, what] : {std::tuple{offloaded, plain, "offloaded, resumed in memory"},
                                   {plain, offloaded, "in memory, resumed offloaded"},
                                   {on_host, offloaded, "in host memory, resumed on disk"},
                                   {plain, on_host, "in memory, resumed in host memory"}}) {
    TempDir dir;
    expect_bitwise(interrupted(2, a, 2, b, dir.str()), want, what);
  }
}

BOOST_AUTO_TEST_CASE(bf16_optimizer_state_resumes_into_either_state_dtype) {
  // Note [bf16 AdamW moments]: a bf16-state checkpoint records its state
  // dtype and saves the moments widened to f32. Resumed with bf16 state
  // (also with the moments on disk) it continues bit for bit, the rounding
  // keyed by the restored step; resumed with f32 state, or an
  // f32 checkpoint resumed with bf16 state, it converts: the first resumed
  // step's loss (the parameters are the saved ones) is the never-stopped
  // run's, and the rest stays close to it.
  TrainSetup f32 = setup(optim::ShardingStrategy::full_shard, 2, DType::f32);
  f32.micro_batches = 1;
  TrainSetup bf16 = f32;
  bf16.optimizer_state_dtype = DType::bf16;
  const TrainOutput want_bf16 = never_stopped(2, bf16), want_f32 = never_stopped(2, f32);
  TempDir scratch;
  TrainSetup on_disk = bf16;
  on_disk.offload_optimizer = {optim::OptimizerOffload::Kind::disk, scratch.str(), 999};
  {
    TempDir dir;
    expect_bitwise(interrupted(2, bf16, 2, bf16, dir.str()), want_bf16, "bf16 state");
    const optim::CheckpointReader reader(dir.str());
    BOOST_TEST(reader.index().state.optimizer_state_dtype == DType::bf16);
  }
  {
    TempDir dir;
    expect_bitwise(interrupted(2, bf16, 2, on_disk, dir.str()), want_bf16,
                   "bf16 state, resumed on disk");
  }
  for (const auto& [a, b, want, what] :
       {std::tuple{bf16, f32, want_bf16, "bf16 state resumed as f32"},
        {f32, bf16, want_f32, "f32 state resumed as bf16"}}) {
    TempDir dir;
    const TrainOutput got = interrupted(2, a, 2, b, dir.str());
    BOOST_TEST(got.losses.at(kSaveAt) == want.losses.at(kSaveAt), what);
    BOOST_TEST(optim::CheckpointReader(dir.str()).index().state.optimizer_state_dtype ==
               a.optimizer_state_dtype);
    try {
      expect_same_training(got, want, {.loss_rtol = 1e-3, .param_atol = 2e-3, .param_rl2 = 1e-3},
                           what);
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(resume_is_bit_exact) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (auto [strategy, z] : {std::pair{optim::ShardingStrategy::full_shard, 4},
                               {optim::ShardingStrategy::hybrid_shard, 2},
                               {optim::ShardingStrategy::layer_zero, 2}}) {
      const TrainSetup s = setup(strategy, z, dtype);
      TempDir dir;
      expect_bitwise(interrupted(4, s, 4, s, dir.str()), never_stopped(4, s), describe(s));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_background_save_resumes_bit_exactly) {
  // The first trainer ends while its save may still be writing: its end waits.
  TempDir dir;
  TrainSetup s = setup(optim::ShardingStrategy::hybrid_shard, 2, DType::bf16);
  TrainSetup background = s;
  background.checkpoint_async = true;
  expect_bitwise(interrupted(4, background, 4, s, dir.str()), never_stopped(4, s),
                 "saved in the background");
}

BOOST_AUTO_TEST_CASE(resume_keeps_the_loss_scaler) {
  // f16 scales the loss: the scaler's state must survive to stay bit-exact.
  const TrainSetup s = setup(optim::ShardingStrategy::full_shard, 2, DType::f16);
  TempDir dir;
  expect_bitwise(interrupted(2, s, 2, s, dir.str()), never_stopped(2, s), describe(s));
}

BOOST_AUTO_TEST_CASE(reshard_on_load) {
  using S = optim::ShardingStrategy;
  struct Case {
    int w;
    TrainSetup a;
    int w2;
    TrainSetup b;
  };
  const Case cases[] = {
      {4, setup(S::full_shard, 4, DType::f32), 2, setup(S::full_shard, 2, DType::f32)},
      {2, setup(S::full_shard, 2, DType::f32), 4, setup(S::full_shard, 4, DType::f32)},
      {4, setup(S::hybrid_shard, 2, DType::f32), 1, setup(S::full_shard, 1, DType::f32)},
      {1, setup(S::full_shard, 1, DType::f32), 3, setup(S::full_shard, 3, DType::f32)},
      {4, setup(S::full_shard, 4, DType::f32), 4, setup(S::layer_zero, 2, DType::f32)},
      {2, setup(S::no_shard, 1, DType::f32), 3, setup(S::shard_grad_op, 3, DType::f32)},
  };
  const TrainOutput ref = never_stopped(1, setup(S::full_shard, 1, DType::f32));
  for (const Case& c : cases) {
    TempDir dir;
    const std::string what = std::to_string(c.w) + " ranks " + describe(c.a) + " -> " +
                             std::to_string(c.w2) + " ranks " + describe(c.b);
    try {
      expect_same_training(interrupted(c.w, c.a, c.w2, c.b, dir.str()), ref, {}, what);
    } catch (const std::exception& e) {
      BOOST_ERROR(what << ": " << e.what());
    }
  }
}

namespace {

// Saves step 3 of a 2-rank run into `dir`, then applies `damage` to it; a
// fresh 2-rank run at step 2 must fail to load it on every rank with a
// message matching every word of `expect`, its parameters and step untouched.
void expect_load_refused(const std::string& name,
                         const std::function<void(const fs::path&)>& damage,
                         const std::vector<std::string>& expect,
                         TrainSetup loader = setup(optim::ShardingStrategy::full_shard, 2,
                                                   DType::f32)) {
  TempDir dir;
  const TrainSetup s = setup(optim::ShardingStrategy::full_shard, 2, DType::f32);
  on_ranks(2, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, s);
    TrainOutput o;
    train_until(*t, 3, o);
    t->save_checkpoint(zrt::optim::checkpoint_into(dir.str()));
    return o;
  });
  damage(dir.path / "step-000003");
  const auto errors = std::make_shared<std::vector<std::string>>(2);
  on_ranks(2, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, loader);
    TrainOutput o;
    train_until(*t, 2, o);
    const auto before = full_params(*t);
    try {
      t->resume(dir.str());
      ZRT_EXPECT(false, name, ": the damaged checkpoint loaded");
    } catch (const CheckpointError& e) {
      (*errors)[world->rank()] = e.what();
    }
    ZRT_EXPECT(t->next_step() == 2, name, ": the step moved to ", t->next_step());
    ZRT_EXPECT(full_params(*t) == before, name, ": parameters changed");
    train_until(*t, 3, o);  // the run goes on
    return o;
  });
  BOOST_TEST_MESSAGE(name << ": " << (*errors)[0]);
  BOOST_CHECK_MESSAGE((*errors)[0] == (*errors)[1],
                      name << ": ranks disagree: " << (*errors)[0] << " | " << (*errors)[1]);
  for (const std::string& word : expect)
    BOOST_CHECK_MESSAGE((*errors)[0].find(word) != std::string::npos,
                        name << ": message lacks '" << word << "': " << (*errors)[0]);
}

void flip_byte(const fs::path& file, std::uint64_t from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-static_cast<std::streamoff>(from_end), std::ios::end);
  char c = 0;
  f.read(&c, 1);
  f.seekp(-static_cast<std::streamoff>(from_end), std::ios::end);
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
}

}  // namespace

BOOST_AUTO_TEST_CASE(damaged_checkpoints_are_refused_and_change_nothing) {
  // The data section ends with the last tensor in name order: tiny GPT's
  // units are embed_head, h.0, h.1 (and ln_f's), so h.1.zero1_shard.
  expect_load_refused("flipped byte",
                      [](const fs::path& d) { flip_byte(d / "rank-00001.safetensors", 5); },
                      {"rank-00001.safetensors", "tensor h.1.zero1_shard", "checksum"});
  expect_load_refused("truncated file",
                      [](const fs::path& d) {
                        fs::resize_file(d / "rank-00000.safetensors",
                                        fs::file_size(d / "rank-00000.safetensors") - 100);
                      },
                      {"rank-00000.safetensors", "truncated"});
  expect_load_refused("missing rank file",
                      [](const fs::path& d) { fs::remove(d / "rank-00001.safetensors"); },
                      {"rank-00001.safetensors", "missing"});
  expect_load_refused("bad index",
                      [](const fs::path& d) { std::ofstream(d / "index.json") << "{\"format\": "; },
                      {"index.json", "fails its checksum"});
  // Intact files under an index that lies, its checksums rewritten: validation refuses it.
  using nlohmann::json;
  using zrt::test::edit_index;
  const auto shift_offset = [](json& x) {
    json& offset = x["layout"]["handles"][1]["params"][1]["offset"];
    offset = offset.get<std::int64_t>() + 1;
  };
  expect_load_refused("offset shifted by one element",
                      [&](const fs::path& d) { edit_index(d, shift_offset); },
                      {"index.json", "params[h.0.ln_1.bias].offset"});
  const auto swap_zero1_ranks = [](json& x) {
    std::swap(x["ranks"][0]["zero1_rank"], x["ranks"][1]["zero1_rank"]);
  };
  expect_load_refused("zero1 ranks swapped",
                      [&](const fs::path& d) { edit_index(d, swap_zero1_ranks); },
                      {"index.json", "ranks[0].zero1_rank is 1"});
  expect_load_refused(
      "offset shifted, checksum stale",
      [&](const fs::path& d) { edit_index(d, shift_offset, zrt::test::Checksums::stale); },
      {"index.json.xxh64", "fails its checksum"});
  expect_load_refused("missing latest target", [](const fs::path& d) { fs::remove_all(d); },
                      {"latest", "does not exist"});
  TrainSetup wider = setup(optim::ShardingStrategy::full_shard, 2, DType::f32);
  wider.model = "mlp";
  expect_load_refused(
      "another model", [](const fs::path&) {}, {"another model"}, wider);
}

namespace {

// On `ranks` ranks: saves step 1 into `dir`, then step 2 with `before_write`
// (the fault), then trains step 3 (training goes on after a failed save).
// Each rank's error of the second save.
std::vector<std::string> errors_of_a_failing_second_save(
    const std::string& dir, int ranks, const std::function<void(int)>& before_write) {
  const TrainSetup s = setup(optim::ShardingStrategy::full_shard, ranks, DType::f32);
  const auto errors = std::make_shared<std::vector<std::string>>(ranks);
  on_ranks(ranks, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, s);
    TrainOutput o;
    train_until(*t, 1, o);
    t->save_checkpoint(zrt::optim::checkpoint_into(dir));
    train_until(*t, 2, o);
    zrt::optim::CheckpointSaveOptions failing = zrt::optim::checkpoint_into(dir);
    failing.before_write = before_write;
    try {
      t->save_checkpoint(failing);
    } catch (const CheckpointError& e) {
      (*errors)[world->rank()] = e.what();
    }
    train_until(*t, 3, o);
    return o;
  });
  return *errors;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_rank_failing_to_write_fails_the_save_on_every_rank) {
  TempDir dir;
  const std::vector<std::string> errors =
      errors_of_a_failing_second_save(dir.str(), 3, [](int rank) {
        if (rank == 1) ZRT_THROW(CheckpointError, "disk full (injected)");
      });
  for (int r = 0; r < 3; ++r) {
    BOOST_CHECK_MESSAGE(errors[r].find("rank 1") != std::string::npos &&
                            errors[r].find("disk full (injected)") != std::string::npos,
                        "rank " << r << ": " << errors[r]);
    BOOST_CHECK_EQUAL(errors[r], errors[0]);
  }
  BOOST_CHECK(!fs::exists(dir.path / "step-000002"));
  BOOST_CHECK(!fs::exists(dir.path / "step-000002.tmp"));
  BOOST_CHECK_EQUAL(zrt::optim::resolve_checkpoint(dir.str()), (dir.path / "step-000001").string());
}

// The step is complete when `latest` is written last; if that write fails
// (a disk full by then), the step is not left beside the older `latest`,
// where a resume would set it aside as an abandoned trajectory.
BOOST_AUTO_TEST_CASE(a_step_whose_latest_fails_is_not_left_behind) {
  TempDir dir;
  const std::vector<std::string> errors =
      errors_of_a_failing_second_save(dir.str(), 2, [&](int rank) {
        // After the save cleared old temporaries: latest.tmp cannot be written.
        if (rank == 0) fs::create_directories(dir.path / "latest.tmp" / "in-the-way");
      });
  for (int r = 0; r < 2; ++r)
    BOOST_CHECK_MESSAGE(errors[r].find("latest") != std::string::npos,
                        "rank " << r << ": " << errors[r]);
  BOOST_CHECK(!fs::exists(dir.path / "step-000002"));
  BOOST_CHECK(!fs::exists(dir.path / "step-000002.tmp"));
  BOOST_CHECK_EQUAL(zrt::optim::resolve_checkpoint(dir.str()), (dir.path / "step-000001").string());
}

BOOST_AUTO_TEST_CASE(keep_last_prunes_after_the_new_step_is_complete) {
  TempDir dir;
  fs::create_directories(dir.path / "step-000009.tmp");  // a killed save's leftovers
  std::ofstream(dir.path / "latest.tmp") << "step-000009\n";
  // A user's directory named like a step, without an index: not a checkpoint.
  fs::create_directories(dir.path / "step-000000");
  std::ofstream(dir.path / "step-000000" / "notes.txt") << "mine\n";
  const TrainSetup s = setup(optim::ShardingStrategy::full_shard, 2, DType::f32);
  on_ranks(2, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, s);
    TrainOutput o;
    for (int step = 1; step <= 4; ++step) {
      train_until(*t, step, o);
      t->save_checkpoint(zrt::optim::checkpoint_into(dir.str(), 2));
    }
    return o;
  });
  BOOST_CHECK(zrt::optim::indexed_steps(dir.str()) == (std::vector<std::int64_t>{3, 4}));
  BOOST_CHECK(fs::exists(dir.path / "step-000000" / "notes.txt"));
  BOOST_CHECK_EQUAL(zrt::optim::resolve_checkpoint(dir.str()), (dir.path / "step-000004").string());
  BOOST_CHECK(!fs::exists(dir.path / "step-000009.tmp"));
  BOOST_CHECK(!fs::exists(dir.path / "latest.tmp"));
}

// Note [Ranks agree on checkpoints]: every rank loads one checkpoint (or a
// copy of it) and saves one step under one root; two checkpoints' shards
// would make one model of both without a word.
BOOST_AUTO_TEST_CASE(the_ranks_load_and_save_one_checkpoint) {
  TempDir dir;
  const std::string a = (dir.path / "a").string(), b = (dir.path / "b").string();
  const TrainSetup s = setup(optim::ShardingStrategy::full_shard, 2, DType::f32);
  on_ranks(2, [&](const CommPtr& world) {
    auto t = tiny_trainer(world, s);
    TrainOutput o;
    for (int step = 1; step <= 2; ++step) {
      train_until(*t, step, o);
      t->save_checkpoint(zrt::optim::checkpoint_into(a));
    }
    return o;
  });
  fs::create_directories(b);
  fs::copy(fs::path(a) / "step-000001", fs::path(b) / "step-000001", fs::copy_options::recursive);
  const std::string a1 = (fs::path(a) / "step-000001").string();
  const std::string a2 = (fs::path(a) / "step-000002").string();
  const std::string b1 = (fs::path(b) / "step-000001").string();
  // Each rank's error of `fn` ("" where it returned).
  auto errors_of = [&](const std::function<void(model_zoo::Trainer&, int rank)>& fn) {
    const auto errors = std::make_shared<std::vector<std::string>>(2);
    on_ranks(2, [&](const CommPtr& world) {
      auto t = tiny_trainer(world, s);
      try {
        fn(*t, world->rank());
      } catch (const CheckpointError& e) {
        (*errors)[world->rank()] = e.what();
      }
      return TrainOutput{};
    });
    return *errors;
  };
  // A copy of the same step loads; two steps of one run do not.
  std::vector<std::string> errors =
      errors_of([&](model_zoo::Trainer& t, int rank) { t.resume(rank == 0 ? a1 : b1); });
  BOOST_CHECK_MESSAGE(errors[0].empty() && errors[1].empty(), errors[0] << errors[1]);
  errors = errors_of([&](model_zoo::Trainer& t, int rank) { t.resume(rank == 0 ? a1 : a2); });
  for (int r = 0; r < 2; ++r)
    BOOST_CHECK_MESSAGE(errors[r].find("the ranks read different checkpoints, " + a1 +
                                       " on rank 0 and " + a2 + " on rank 1") != std::string::npos,
                        "rank " << r << ": " << errors[r]);
  // A save under another root, or of another step, is named as such.
  errors = errors_of([&](model_zoo::Trainer& t, int rank) {
    t.save_checkpoint(zrt::optim::checkpoint_into(rank == 0 ? a : (dir.path / "c").string()));
  });
  BOOST_CHECK_MESSAGE(
      errors[0].find("failed on rank 1: the step's directory " + a +
                     "/step-000000.tmp that rank 0 made is not at ") != std::string::npos &&
          errors[0].find("every rank must save under the same root") != std::string::npos,
      errors[0]);
  errors = errors_of([&](model_zoo::Trainer& t, int rank) {
    zrt::optim::save_checkpoint(t.engine().module(), 5 + rank, zrt::optim::checkpoint_into(a));
  });
  BOOST_CHECK_MESSAGE(
      errors[0].find("failed on rank 0: rank 0 saves step 5 and rank 1 step 6: "
                     "every rank must pass the same next_step") != std::string::npos,
      errors[0]);
  BOOST_CHECK_EQUAL(errors[1], errors[0]);
  BOOST_CHECK(!fs::exists(fs::path(a) / "step-000005"));
  BOOST_CHECK(!fs::exists(fs::path(a) / "step-000005.tmp"));
  BOOST_CHECK(!fs::exists(fs::path(a) / "step-000000"));
  BOOST_CHECK(!fs::exists(dir.path / "c" / "step-000000"));
}

BOOST_AUTO_TEST_SUITE_END()
