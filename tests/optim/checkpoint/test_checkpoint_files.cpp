// The pieces under engine checkpoints: step directory names, `latest`,
// index.json validation, and resharding a saved flat-parameter layout into
// any other (random odd shapes, parameters smaller than the world size).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/flat_param/flat_param_layout.h"

using namespace zrt;
using namespace zrt::optim;
namespace fs = std::filesystem;
using zrt::test::TempDir;

namespace {

// Value of element e of parameter p of `kind`: distinct everywhere.
float value(std::size_t p, std::int64_t e, ShardKind kind) {
  return static_cast<float>(p * 100000 + e) + 0.25f * static_cast<float>(static_cast<int>(kind));
}

// Saves one handle over `specs` as `world` zero1 shards, as an engine would.
CheckpointIndex save_layout(const std::string& root, const std::vector<optim::ParamSpec>& specs,
                            int world) {
  const optim::FlatParamLayout layout(specs, DType::f32, world);
  CheckpointIndex index;
  index.step = index.state.next_step = 7;
  index.world_size = world;
  index.strategy = "full";
  index.zero3_size = world;
  index.dtype = "f32";
  HandleRecord h{"unit", layout.numel_padded(), world, 0, {}};
  for (std::size_t i = 0; i < specs.size(); ++i)
    h.params.push_back({specs[i].fqn, specs[i].shape, layout.param_offset(i)});
  index.handles = {h};
  begin_step(root, index.step);
  for (int r = 0; r < world; ++r) {
    std::map<std::string, Tensor> tensors;
    const auto infos = layout.shard_infos(r, world);
    for (ShardKind kind : kAllShardKinds) {
      Tensor t = Tensor::full({layout.shard_numel(world)}, -1.0,
                              DType::f32);  // padding: not zero on purpose
      for (std::size_t p = 0; p < specs.size(); ++p)
        for (std::int64_t e = infos[p].intra_param_start; e < infos[p].intra_param_end; ++e)
          t.data<float>()[infos[p].offset_in_shard + e - infos[p].intra_param_start] =
              value(p, e, kind);
      tensors[shard_tensor_name("unit", kind)] = t;
    }
    RankRecord rec;
    rec.rank = r;
    rec.zero1_rank = r;
    rec.file = rank_file_name(r);
    write_rank_file((fs::path(step_tmp_dir(root, index.step)) / rec.file).string(), tensors, rec);
    index.ranks.push_back(rec);
  }
  commit_step(root, index, 0);
  return index;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_files)

BOOST_AUTO_TEST_CASE(step_names) {
  BOOST_CHECK_EQUAL(step_dir_name(120), "step-000120");
  BOOST_CHECK_EQUAL(step_dir_name(12345678), "step-12345678");
  BOOST_CHECK(parse_step_dir_name("step-000120") == std::optional<std::int64_t>(120));
  BOOST_CHECK(parse_step_dir_name("step-12345678") == std::optional<std::int64_t>(12345678));
  // Only the names step_dir_name writes: a user's copy step-4 is not step 4.
  for (const char* bad : {"step-", "step-12a", "step-000120.tmp", "latest", "xstep-1", "step-4",
                          "step-0120", "step-0000120", "step-+00120", "step-012345678",
                          "step-9223372036854775808", "step-99999999999999999999"})
    BOOST_CHECK_MESSAGE(!parse_step_dir_name(bad), bad);
  // Every step an int64 counts reads back: a run of 10^18 steps resumes.
  for (std::int64_t step : {std::int64_t{999999999999999999}, std::int64_t{1000000000000000000},
                            std::numeric_limits<std::int64_t>::max()})
    BOOST_CHECK(parse_step_dir_name(step_dir_name(step)) == std::optional<std::int64_t>(step));
}

BOOST_AUTO_TEST_CASE(a_directory_written_into_is_no_checkpoint_step) {
  TempDir dir;
  const fs::path step = dir.path / step_dir_name(2);
  fs::create_directories(step);
  std::ofstream(step / "index.json") << "{}";
  auto refused = [](const fs::path& where, const std::string& words) {
    try {
      check_directory_outside_checkpoint_steps({"--checkpoint-dir", where.string()});
      BOOST_ERROR("accepted " << where);
    } catch (const InvalidArgument& e) {
      BOOST_CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  refused(step, "is checkpoint step " + fs::canonical(step).string() +
                    " itself: writing there would change that step; name the directory that "
                    "holds the steps, " +
                    fs::canonical(dir.path).string());
  refused(step / "sub" / "deeper", "is inside checkpoint step " + fs::canonical(step).string());
  // A step's name without its index.json, and the root of the steps, are directories.
  check_directory_outside_checkpoint_steps({"--checkpoint-dir", dir.path.string()});
  fs::create_directories(dir.path / step_dir_name(3));
  check_directory_outside_checkpoint_steps(
      {"--checkpoint-dir", (dir.path / step_dir_name(3)).string()});
}

BOOST_AUTO_TEST_CASE(reshard_any_layout_into_any_other) {
  std::mt19937 rng(20261123);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<optim::ParamSpec> specs;
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int p = 0; p < n; ++p) {
      Shape shape;
      const int dims = 1 + static_cast<int>(rng() % 2);
      for (int d = 0; d < dims; ++d)
        shape.push_back(1 + static_cast<std::int64_t>(rng() % 7));  // often < world
      specs.push_back({"p" + std::to_string(p), shape});
    }
    const int w = 1 + static_cast<int>(rng() % 5), w2 = 1 + static_cast<int>(rng() % 5);
    TempDir dir;
    save_layout(dir.path.string(), specs, w);
    CheckpointReader reader(dir.path.string());
    BOOST_CHECK_GT(reader.verify_all(), 0u);
    // Every shard of the new layout, bf16 alignment included, element by element.
    const optim::FlatParamLayout target(specs, DType::bf16, w2);
    std::vector<std::string> fqns;
    for (const auto& s : specs) fqns.push_back(s.fqn);
    for (int r = 0; r < w2; ++r) {
      const auto infos = target.shard_infos(r, w2);
      for (ShardKind kind : kAllShardKinds) {
        Tensor out = Tensor::empty({target.shard_numel(w2)}, DType::f32);
        fill_shard(reader, fqns, infos, kind, out);
        const auto mask = target.padding_mask();
        for (std::int64_t e = 0; e < out.numel(); ++e) {
          const std::int64_t flat = r * target.shard_numel(w2) + e;
          float want = 0;
          if (!mask[flat])
            for (std::size_t p = 0; p < specs.size(); ++p)
              if (flat >= target.param_offset(p) &&
                  flat < target.param_offset(p) + specs[p].numel())
                want = value(p, flat - target.param_offset(p), kind);
          if (out.data<float>()[e] != want) {
            BOOST_ERROR("trial " << trial << " " << w << " -> " << w2 << " shard " << r
                                 << " element " << e << ": " << out.data<float>()[e] << ", want "
                                 << want);
            return;
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(index_errors_name_the_field) {
  TempDir dir;
  save_layout(dir.path.string(), {{"a", {3}}, {"b", {2, 2}}}, 2);
  const fs::path index = dir.path / "step-000007" / "index.json";
  std::stringstream text;
  text << std::ifstream(index).rdbuf();
  const std::string good = text.str();
  auto refused = [&](const std::string& from, const std::string& to, const std::string& word) {
    std::string bad = good;
    const auto at = bad.find(from);
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, from);
    bad.replace(at, from.size(), to);
    try {
      index_from_json(bad, "index.json");
      BOOST_ERROR("accepted: " << to);
    } catch (const CheckpointError& e) {
      BOOST_CHECK_MESSAGE(std::string(e.what()).find(word) != std::string::npos, e.what());
    }
  };
  index_from_json(good, "index.json");
  refused("\"version\": 2", "\"version\": 99", "version 99");
  refused("\"world_size\": 2", "\"world_size\": 3", "world_size");
  refused("\"zero1_rank\": 1", "\"zero1_rank\": 0", "ranks[1].zero1_rank is 0");
  refused("\"format\": \"zrt-checkpoint\"", "\"format\": \"other\"", "not a zrt checkpoint");
  refused("\"next_step\": 7", "\"next_step\": -1", "next_step");
  refused("\"world_size\": 2", "\"world_size\": 4294967298",
          "world_size");  // 2^32 + 2 must not wrap to 2
}

BOOST_AUTO_TEST_CASE(resolve_names_what_is_missing) {
  TempDir dir;
  auto fails = [](const std::string& path, const std::string& word) {
    try {
      resolve_checkpoint(path);
      BOOST_ERROR("resolved " << path);
    } catch (const CheckpointError& e) {
      BOOST_CHECK_MESSAGE(std::string(e.what()).find(word) != std::string::npos, e.what());
    }
  };
  fails((dir.path / "nope").string(), "no such checkpoint");
  fails(dir.path.string(), "not a checkpoint");
  std::ofstream(dir.path / "latest") << "garbage\n";
  fails(dir.path.string(), "does not name a step");
  std::ofstream(dir.path / "latest") << "step-000004\r\n";  // a Windows line end, shown
  fails(dir.path.string(), "holds 'step-000004\\r'");
  std::ofstream(dir.path / "latest") << "step-000004\n";
  fails(dir.path.string(), "names step-000004, which does not exist; no other step here is a");
  fails((dir.path / "latest").string(), "does not exist");  // the `latest` file itself
  // The checkpoints left are the way on: the newest is named.
  fs::create_directories(dir.path / "step-000004");
  fs::create_directories(dir.path / "step-000002");
  std::ofstream(dir.path / "step-000002" / "index.json") << "{}";
  fails(dir.path.string(),
        "names step-000004, which has no index.json; the newest checkpoint "
        "here is " +
            (dir.path / "step-000002").string());
  fs::remove_all(dir.path / "step-000002");
  fs::remove_all(dir.path / "step-000004");
  std::ofstream(dir.path / "latest") << "step-000004\nindex-xxh64 12345\n";
  fails(dir.path.string(), "index-xxh64 <16 hex digits>");
  std::ofstream(dir.path / "latest") << "step-000004\nindex-xxh64 0123456789abcdef\nmore\n";
  fails(dir.path.string(), "and more");
  // Steps whose `latest` is gone: the newest is named, to pass instead.
  // A directory named like a step without its index.json is none.
  fs::remove(dir.path / "latest");
  for (const char* step : {"step-000002", "step-000004"}) {
    fs::create_directories(dir.path / step);
    std::ofstream(dir.path / step / "index.json") << "{}";
  }
  fs::create_directories(dir.path / "step-000009");
  fails(dir.path.string(),
        "holds 2 checkpoint step(s), newest step-000004, but no `latest` file "
        "naming one: name a step directory, such as " +
            (dir.path / "step-000004").string());
}

BOOST_AUTO_TEST_SUITE_END()
