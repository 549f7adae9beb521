// Note [Streamed saving], Note [Streamed loading]: under mpirun -np 4 (a
// process per rank), each rank's peak resident memory (VmHWM, reset through
// /proc/self/clear_refs before each phase) while a GPT of ~23 M parameters
// is initialised, loaded from a safetensors file (--init-from), saved
// (--save) and exported from a checkpoint (zrt-ckpt export, on rank 0)
// stays within
//   what the rank holds after the phase (its share of the state, the
//   engine's allocator) + the largest tensor + kOverhead,
// where kOverhead covers the save's 16 MiB gather chunk and the process's
// own noise (measured: a few MiB). The whole-model paths these replaced
// (full_params() on every rank and one serialised file on rank 0; the
// whole file read by every rank) must break the same bounds: the test can
// fail, and the model is big enough for the margin to mean something.
#include <boost/test/unit_test.hpp>

#include <malloc.h>

#include <fstream>
#include <span>
#include <string>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/model_zoo/models/model.h"
#include "zrt/optim/checkpoint/full_param_file.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/optim/checkpoint/offline_tools.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;

namespace {

constexpr std::int64_t kMiB = std::int64_t(1) << 20;
constexpr std::int64_t kOverhead = 24 * kMiB;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // shadow memory and quarantines: RSS means nothing
#else
constexpr bool kSanitized = false;
#endif

CommPtr world() {
  static CommPtr w = init_world().comm;
  return w;
}

// VmHWM or VmRSS of this process, bytes.
std::int64_t status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string k; in >> k;) {
    std::int64_t kib = 0;
    if (k == key + ":" && in >> kib) return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

// What `fn` adds to the memory the process holds: at its peak, and after
// it. Freed memory is handed back first (malloc_trim), so that a phase
// cannot hide its peak in pages an earlier phase freed.
struct Added {
  std::int64_t peak = 0, kept = 0;
};
template <class F>
Added measure(F&& fn) {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
  const std::int64_t before = status_bytes("VmRSS");
  BOOST_REQUIRE(before > 0 && status_bytes("VmHWM") <= before + kMiB);
  fn();
  const std::int64_t peak = status_bytes("VmHWM") - before;
  malloc_trim(0);
  return {peak, status_bytes("VmRSS") - before};
}

// wte padded to 4096 rows: 1.5 M elements, the largest tensor. With
// --gpt2-medium after the test's arguments (ctest -L soak), GPT-2 medium's
// shape: 24 layers, 1024 wide, a vocabulary of 50304 (wte 51.5 M elements,
// the largest), 355 M parameters.
ModelConfig model_config() {
  const auto& suite = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i < suite.argc; ++i)
    if (std::string(suite.argv[i]) == "--gpt2-medium")
      return testing::gpt_of(24, 16, 1024, 50304, 1024);
  return testing::gpt_of(12, 6, 384, 4000, 64);
}

std::int64_t largest_tensor_bytes() {
  std::int64_t most = 0;
  for (const UnitDef& u : make_model(model_config())->units())
    for (const ParamDef& p : u.params) most = std::max(most, shape_numel(p.shape) * 4);
  return most;
}

std::int64_t total_bytes() {
  std::int64_t n = 0;
  for (const UnitDef& u : make_model(model_config())->units())
    for (const ParamDef& p : u.params) n += shape_numel(p.shape) * 4;
  return n;
}

// A directory every rank sees: rank 0's temporary one.
std::string shared_dir(const model_zoo::test::TempDir& mine) {
  const std::string path = mine.file("");
  const auto all = world()->all_gather_bytes(std::as_bytes(std::span(path)));
  return std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size());
}

void report(const char* phase, std::int64_t added, std::int64_t bound) {
  BOOST_TEST_MESSAGE("rank " << world()->rank() << " " << phase << ": peak +"
                             << added / double(kMiB) << " MiB, bound " << bound / double(kMiB)
                             << " MiB (model " << total_bytes() / double(kMiB) << " MiB)");
}

// A sharded initialisation (Note [Sharded initialisation]); what it keeps
// is the rank's share of the state, which it may exceed by 10% at its peak.
std::unique_ptr<TrainingEngine> init(std::int64_t& share) {
  std::unique_ptr<TrainingEngine> engine;
  const Added a = measure([&] {
    engine = std::make_unique<TrainingEngine>(make_model(model_config()), world(), EngineConfig{});
  });
  share = a.kept;
  report("sharded init", a.peak, share * 11 / 10);
  BOOST_CHECK_LE(a.peak, share * 11 / 10);
  return engine;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(streamed_memory)

BOOST_AUTO_TEST_CASE(a_rank_holds_its_share_and_one_tensor) {
  if (kSanitized) return;
  model_zoo::test::TempDir tmp("streamed_memory");
  const std::string dir = shared_dir(tmp), file = dir + "/w.safetensors";
  const std::int64_t tensor = largest_tensor_bytes();
  std::int64_t share = 0;
  {
    const auto engine = init(share);
    const Added save = measure([&] { optim::save_full_params(engine->module(), file, "--save"); });
    report("--save", save.peak, tensor + kOverhead);
    BOOST_CHECK_LE(save.peak, tensor + kOverhead);
    optim::save_checkpoint(engine->module(), 1, optim::checkpoint_into(dir + "/ck"));
  }
  std::unique_ptr<TrainingEngine> loaded;
  const Added load = measure([&] {
    const auto model = make_model(model_config());
    loaded = std::make_unique<TrainingEngine>(make_model(model_config()), world(), EngineConfig{},
                                              ParamFileSource(model->units(), file));
  });
  report("--init-from", load.peak, share + tensor + kOverhead);
  BOOST_CHECK_LE(load.peak, share + tensor + kOverhead);
  world()->barrier();
  if (world()->rank() == 0) {
    const Added exported =
        measure([&] { optim::export_params(dir + "/ck", dir + "/export.safetensors"); });
    report("export", exported.peak, tensor + kOverhead);
    BOOST_CHECK_LE(exported.peak, tensor + kOverhead);
    BOOST_CHECK(read_safetensors(dir + "/export.safetensors").tensors.size() ==
                read_safetensors(file).tensors.size());
  }
  world()->barrier();
}

// The net works: the paths that held the whole model break the bounds.
BOOST_AUTO_TEST_CASE(whole_model_paths_break_the_bounds) {
  if (kSanitized) return;
  model_zoo::test::TempDir tmp("whole_model_memory");
  const std::string dir = shared_dir(tmp), file = dir + "/w.safetensors";
  const std::int64_t tensor = largest_tensor_bytes();
  std::int64_t share = 0;
  {
    const auto engine = init(share);
    const Added save = measure([&] {
      const auto params = engine->full_params();
      if (world()->rank() == 0) write_safetensors(file, params);
    });
    report("whole-model save", save.peak, tensor + kOverhead);
    BOOST_CHECK_GT(save.peak, tensor + kOverhead);
  }
  world()->barrier();
  std::unique_ptr<TrainingEngine> loaded;
  const Added load = measure([&] {
    const SafetensorsFile whole = read_safetensors(file);
    loaded = std::make_unique<TrainingEngine>(make_model(model_config()), world(), EngineConfig{},
                                              whole.tensors);
  });
  report("whole-file load", load.peak, share + tensor + kOverhead);
  BOOST_CHECK_GT(load.peak, share + tensor + kOverhead);
  world()->barrier();
}

BOOST_AUTO_TEST_SUITE_END()
