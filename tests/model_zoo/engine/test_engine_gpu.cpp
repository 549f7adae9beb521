// The engine on CUDA against its CPU run: the tiny GPT for every strategy on
// 1 rank and on 2 and 4 local ranks sharing cuda:0 (the local backend moves CUDA
// tensors on the module's streams) trains as the same setup on the CPU does,
// within the tolerances the CPU equivalence tests use (Note [Comparing
// training runs]: cuBLAS and the CPU GEMMs sum in other orders); prefetch
// depths 0, 1 and 2 train bit for bit alike on the device, as on the CPU,
// and so do GPT's head unit and its default layout; steps after the second
// call cudaMalloc no more; a CUDA run saved (synchronously, and in the
// background through pinned staging) and resumed continues bit for bit; the
// optimizer state in host memory trains as on the device.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/model_zoo/engine/engine_checks.h"
#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/nccl_comm.h"

using namespace zrt;
using namespace zrt::testing;

BOOST_AUTO_TEST_SUITE(engine_gpu)

BOOST_AUTO_TEST_CASE(every_strategy_matches_its_cpu_run) {
  for (int w : {1, 2, 4}) {
    for (TrainSetup setup : equivalence_setups("gpt", w)) {
      setup.steps = 5;
      const TrainOutput cpu = train_tiny_on_local_ranks(w, setup);
      setup.device = Device::cuda(0);
      try {
        expect_same_training(train_tiny_on_local_ranks(w, setup), cpu, {},
                             std::to_string(w) + " ranks, " + describe(setup));
      } catch (const std::exception& e) {
        BOOST_ERROR(e.what());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(prefetch_depth_changes_no_number_on_the_device) {
  TrainSetup s;
  s.device = Device::cuda(0);
  s.micro_batches = 2;
  s.steps = 4;
  try {
    expect_prefetch_depths_alike(2, s);
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

// GPT's head unit (a tie across units, Note [Parameters tied across units])
// on the device: the tie's gradient buffer, its addition into the owner's
// fp32 gradient and the owner's gathers all on the module's streams; bit for
// bit as the default layout there, as on the CPU (clipping off).
BOOST_AUTO_TEST_CASE(head_unit_trains_as_the_default_layout_on_the_device) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    TrainSetup s = sharded_setup(optim::ShardingStrategy::full_shard, 0, dtype, 2, 4);
    s.device = Device::cuda(0);
    s.max_grad_norm = 0;
    try {
      expect_bitwise_alike(2, s, {with_head_unit(s)});
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
}

// Note [Master in host memory] on the device: the master, m and v in pinned
// host memory, updated by the CPU AdamW, the gradient shards copied down and
// the cast masters up asynchronously; the CPU's AdamW and the device's may
// contract their arithmetic differently, so the run matches the device run
// without offload within the equivalence tolerances, for fp32 and bf16, on
// 1 and 2 ranks, and with offloaded gradients too.
BOOST_AUTO_TEST_CASE(optimizer_state_in_host_memory_trains_as_on_the_device) {
  for (int w : {1, 2}) {
    for (const DType dtype : {DType::f32, DType::bf16}) {
      TrainSetup s;
      s.device = Device::cuda(0);
      s.dtype = dtype;
      s.micro_batches = 2;
      s.steps = 5;
      const TrainOutput on_device = train_tiny_on_local_ranks(w, s);
      for (const bool offload_grads : {false, true}) {
        TrainSetup host = s;
        host.offload_optimizer.kind = optim::OptimizerOffload::Kind::host;
        host.offload_grads = offload_grads;
        try {
          expect_same_training(train_tiny_on_local_ranks(w, host), on_device, {},
                               std::to_string(w) + " ranks, " + describe(host));
        } catch (const std::exception& e) {
          BOOST_ERROR(e.what());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bf16_on_the_device_trains_close_to_its_cpu_run) {
  TrainSetup s;
  s.dtype = DType::bf16;
  s.steps = 5;
  const TrainOutput cpu = train_tiny_on_local_ranks(2, s);
  s.device = Device::cuda(0);
  const TrainOutput gpu = train_tiny_on_local_ranks(2, s);
  BOOST_REQUIRE_EQUAL(gpu.losses.size(), cpu.losses.size());
  for (std::size_t i = 0; i < cpu.losses.size(); ++i)
    BOOST_TEST(std::abs(gpu.losses[i] - cpu.losses[i]) <= 2e-2 * cpu.losses[i], "step " << i);
}

BOOST_AUTO_TEST_CASE(steady_steps_make_no_cuda_malloc) {
  // After two steps the device's caching allocator serves every buffer of a
  // step (norm scratch, loss buffers, micro-batches, gathers): its raw
  // source, cudaMalloc, is not called again. As on the CPU (test_memory_plan).
  for (TrainSetup s : equivalence_setups("gpt", 2)) {
    s.device = Device::cuda(0);
    std::vector<std::vector<std::uint64_t>> raw(2);
    run_local_ranks(2, [&](const CommPtr& world) {
      auto trainer = tiny_trainer(world, s);
      for (int step = 0; step < 5; ++step)
        raw[static_cast<std::size_t>(world->rank())].push_back(
            trainer->step().memory.num_raw_allocs);
    });
    for (const auto& r : raw) BOOST_TEST(r.back() == r[1], describe(s));
  }
}

// Note [Master in host memory]: a --save with the master in pinned host
// memory uploads a chunk at a time into the gather buffer, so the device's
// allocator peak grows by the chunk alone (the CPU suite's
// test_streamed_save runs the same check on CPU ranks).
BOOST_AUTO_TEST_CASE(a_save_with_the_master_on_the_host_adds_at_most_the_chunk) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zrt-gpu-save-" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  for (int ranks : {1, 2}) {
    try {
      expect_save_within_chunk(ranks, Device::cuda(0), 1021, 1337, dir);
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// bf16 moments take the f32 state's path (Note [Checkpoints saved in the
// background]): staged in bf16 into pinned memory, widened by the writer;
// the files are the synchronous save's.
BOOST_AUTO_TEST_CASE(a_cuda_run_saved_in_the_background_resumes_bit_exactly) {
  namespace fs = std::filesystem;
  for (const DType moments : {DType::f32, DType::bf16}) {
    const fs::path dir = fs::temp_directory_path() / ("zrt-gpu-ckpt-" + std::to_string(::getpid()));
    const std::string what = std::string(dtype_name(moments)) + " moments: ";
    TrainSetup s;
    s.device = Device::cuda(0);
    s.dtype = DType::bf16;
    s.micro_batches = 2;
    s.steps = 6;
    s.optimizer_state_dtype = moments;
    const TrainOutput never_stopped = train_tiny_on_local_ranks(2, s);
    TrainSetup background = s;
    background.checkpoint_async = true;
    TrainOutput resumed;
    run_local_ranks(2, [&](const CommPtr& world) {
      {
        TrainOutput first;
        auto t = tiny_trainer(world, background);
        train_until(*t, 3, first);
        t->save_checkpoint(
            optim::checkpoint_into((dir / "async").string()));  // pinned staging, then a thread
        optim::save_checkpoint(t->engine().module(), t->next_step(),
                               optim::checkpoint_into((dir / "sync").string()));
        train_until(*t, 4, first);  // changes every shard while the background write may still run
        t->wait_for_checkpoint();
      }
      auto t = tiny_trainer(world, s);
      t->resume((dir / "async").string());
      TrainOutput o;  // steps 3, 4 and 5
      train_until(*t, 6, o);
      o.params = full_params(*t);
      if (world->rank() == 0) resumed = std::move(o);
    });
    auto bytes = [](const fs::path& p) {
      std::ifstream in(p, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    };
    for (const auto& e : fs::directory_iterator(dir / "sync" / "step-000003"))
      BOOST_TEST(
          bytes(e.path()) == bytes(dir / "async" / "step-000003" / e.path().filename()),
          what << e.path().filename() << ": the background save differs from the synchronous one");
    std::error_code ec;
    fs::remove_all(dir, ec);
    // Steps 4-6 of the resumed run against the never-stopped run's.
    BOOST_REQUIRE_EQUAL(resumed.losses.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i)
      BOOST_TEST(resumed.losses[i] == never_stopped.losses[3 + i],
                 what << "loss of step " << 3 + i);
    for (const auto& [name, want] : never_stopped.params)
      BOOST_TEST(resumed.params.at(name) == want, what << name);
  }
}

// Note [Step phase times] on the device: CUDA events on the compute stream
// time each stage's forward and backward and the optimizer, and on the
// streams of the collectives every collective (2 local ranks on one GPU);
// the three compute phases are disjoint parts of the step's device time.
BOOST_AUTO_TEST_CASE(phase_times_come_from_cuda_events) {
  std::vector<PhaseTimes> times(2);
  std::vector<double> step_ms(2);
  run_local_ranks(2, [&](const CommPtr& world) {
    TrainSetup s;
    s.device = Device::cuda(0);
    s.micro_batches = 2;
    s.phase_timer = std::make_shared<PhaseTimer>(s.device);
    auto t = tiny_trainer(world, s);
    t->step();
    s.phase_timer->read();  // the first step's, with its warm-up
    const auto t0 = std::chrono::steady_clock::now();
    t->step();
    const PhaseTimes p = s.phase_timer->read();  // waits for the step's last events
    const auto r = static_cast<std::size_t>(world->rank());
    const auto took = std::chrono::steady_clock::now() - t0;
    step_ms[r] = std::chrono::duration<double, std::milli>(took).count();
    times[r] = p;
  });
  for (std::size_t r = 0; r < 2; ++r) {
    const PhaseTimes& p = times[r];
    BOOST_TEST(p.forward_ms > 0);
    BOOST_TEST(p.backward_ms > 0);
    BOOST_TEST(p.optimizer_ms > 0);
    BOOST_TEST(p.comm_ms > 0);
    BOOST_TEST(p.forward_ms + p.backward_ms + p.optimizer_ms < step_ms[r]);
  }
}

// Every split a run makes, over NCCL (a world of one: NCCL takes one rank
// per GPU, Note [Non-blocking communicator creation]): each strategy's
// groups (no-shard's rank alone, hybrid's and layer-zero's zero3 and
// replica groups, all split from one NCCL world in turn) train as the local
// backend's world of one on the same GPU; checkpoints saved in the
// background split their agreements from the host communicator beside the
// NCCL world, and without one are refused.
BOOST_AUTO_TEST_CASE(an_nccl_world_of_one_makes_every_split_of_a_run) {
#ifdef ZRT_WITH_NCCL
  namespace fs = std::filesystem;
  const CommPtr host = make_local_world(1)[0];
  const CommPtr nccl = make_nccl_communicator(*host, 0);
  for (TrainSetup s : equivalence_setups("gpt", 1)) {
    if (s.micro_batches != 1) continue;
    s.device = Device::cuda(0);
    s.steps = 3;
    try {
      expect_same_training(train_tiny(nccl, s), train_tiny_on_local_ranks(1, s), {},
                           "NCCL against local, " + describe(s));
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
  TrainSetup s;
  s.device = Device::cuda(0);
  s.steps = 2;
  s.checkpoint_async = true;
  BOOST_CHECK_THROW(tiny_trainer(nccl, s), InvalidArgument);  // no host communicator
  s.host_comm = host;
  const fs::path dir =
      fs::temp_directory_path() / ("zrt-gpu-nccl-ckpt-" + std::to_string(::getpid()));
  {
    auto t = tiny_trainer(nccl, s);
    TrainOutput o;
    train_until(*t, 1, o);
    t->save_checkpoint(optim::checkpoint_into(dir.string()));
    train_until(*t, 2, o);
    BOOST_CHECK_EQUAL(t->wait_for_checkpoint(), (dir / "step-000001").string());
  }
  BOOST_CHECK(fs::exists(dir / "step-000001" / "index.json"));
  std::error_code ec;
  fs::remove_all(dir, ec);
  nccl->barrier();  // the world still works after every split
#else
  BOOST_TEST_MESSAGE("no NCCL in this build (-DZRT_NCCL=OFF)");
#endif
}

BOOST_AUTO_TEST_SUITE_END()
