// index.json cannot lie (Note [Checkpoint format]). Every field of real
// indexes (ZeroModule saves under each strategy) is mutated in turn, and so
// are the structural lies of a list (swapped offsets, swapped zero1 ranks,
// a duplicated rank, ...). With the checksums rewritten, validation must
// refuse each mutation of a field an invariant ties (CheckpointReader, so
// load_checkpoint and zrt-ckpt verify too); with them stale, the checksums
// must refuse every mutation. Checkpoints of every strategy at 1..4 ranks,
// resharded ones and format-1 ones still read.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <functional>
#include <limits>
#include <random>

#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "tests/support/test_seed.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checksum.h"
#include "zrt/optim/checkpoint/index_validation.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/optim/checkpoint/offline_tools.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::optim;
using nlohmann::json;
using zrt::test::Checksums;
using zrt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kStep = 9;
constexpr ShardingStrategy kStrategies[] = {
    ShardingStrategy::full_shard, ShardingStrategy::shard_grad_op, ShardingStrategy::no_shard,
    ShardingStrategy::hybrid_shard, ShardingStrategy::layer_zero};

// This test case's seed, printed with its name (replay with ZRT_TEST_SEED).
std::uint64_t seed_of_this_test() {
  return test::test_seed(boost::unit_test::framework::current_test_case().full_name().c_str());
}

struct Base {
  ShardingStrategy strategy;
  int world, zero3;
  DType dtype;
  std::string str() const {
    return std::string(strategy_name(strategy)) + " " + std::to_string(world) + " rank(s) zero3 " +
           std::to_string(zero3) + " " + dtype_name(dtype);
  }
};

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (double& x : v) x = normal(rng);
  return Tensor::from_doubles(v, DType::f32, Device::cpu(), shape);
}

// The test model: two units of odd shapes, one smaller than any world.
void add_units(ZeroModule& m, std::uint64_t seed) {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));  // the same values on every rank
  m.add_unit("embed", {{"weight", random_tensor({5, 3}, rng)}, {"bias", random_tensor({1}, rng)}});
  m.add_unit("block", {{"w", random_tensor({3, 7}, rng)},
                       {"b", random_tensor({7}, rng)},
                       {"g", random_tensor({2}, rng)}});
}

// The AdamW state dtype a base saves: bf16 with bf16 compute (Note [bf16
// AdamW moments]), else f32.
DType state_dtype_of(const Base& b) { return b.dtype == DType::bf16 ? DType::bf16 : DType::f32; }

// Saves the test model as step kStep of root, with skip counters and (f16) a loss scaler set.
void save_base(const fs::path& root, const Base& b, std::uint64_t seed) {
  run_local_ranks(b.world, [&](const CommPtr& world) {
    ZeroModuleOptions o;
    o.strategy = b.strategy;
    o.zero3_size = b.zero3;
    o.dtype = b.dtype;
    o.adamw.state_dtype = state_dtype_of(b);
    ZeroModule m(world, o);
    add_units(m, seed);
    m.optimizer().load_counters(6, 3, 1);  // 6 steps taken and 3 skipped: next step 9
    CheckpointSaveOptions options = checkpoint_into(root.string());
    options.run_json = R"({"model": "tiny", "lr": 0.001, "layers": [1, 2]})";
    save_checkpoint(m, kStep, options);
  });
}

// Every layout of 1..4 ranks: each strategy, each zero3 size of hybrid and layer-zero.
std::vector<Base> all_bases() {
  std::vector<Base> out;
  const DType dtypes[] = {DType::f32, DType::bf16, DType::f16};
  for (int w = 1; w <= 4; ++w)
    for (ShardingStrategy s : kStrategies) {
      const bool grouped = s == ShardingStrategy::hybrid_shard || s == ShardingStrategy::layer_zero;
      const int own = s == ShardingStrategy::no_shard ? 1 : w;  // the zero3 group of the others
      for (int z = 1; z <= w; ++z)
        if (w % z == 0 && (grouped || z == own)) out.push_back({s, w, z, dtypes[out.size() % 3]});
    }
  return out;
}

// "" when the checkpoint reads and verifies, else the CheckpointError's text.
// Any other exception is an error of the test named `what`.
std::string refusal(const fs::path& path, const std::string& what) {
  try {
    CheckpointReader reader(path.string());
    reader.verify_all();
    return "";
  } catch (const CheckpointError& e) {
    return e.what();
  } catch (const std::exception& e) {
    BOOST_ERROR(what << ": refused with another error than CheckpointError: " << e.what());
    return e.what();
  }
}

// A saved checkpoint and its pristine index files, restored after each mutation.
struct Saved {
  TempDir dir;
  Base base;
  fs::path step;
  std::string index, checksum, latest;

  Saved(const Base& b, std::uint64_t seed) : base(b), step(dir.path / step_dir_name(kStep)) {
    save_base(dir.path, b, seed);
    index = test::read_text(step / kIndexFileName);
    checksum = test::read_text(step / kIndexChecksumFileName);
    latest = test::read_text(dir.path / "latest");
  }
  json pristine() const { return json::parse(index); }
  void restore() const {
    std::ofstream(step / kIndexFileName, std::ios::binary | std::ios::trunc) << index;
    std::ofstream(step / kIndexChecksumFileName, std::ios::binary | std::ios::trunc) << checksum;
    std::ofstream(dir.path / "latest", std::ios::binary | std::ios::trunc) << latest;
  }
  // Writes `mutated` as the index (checksums rewritten or stale) and returns
  // the refusal through the root's `latest` and through the step directory.
  std::pair<std::string, std::string> outcome(const json& mutated, Checksums checksums,
                                              const std::string& what) const {
    test::write_index_text(step, mutated.dump(1) + "\n", checksums);
    std::pair<std::string, std::string> got{refusal(dir.path, what), refusal(step, what)};
    restore();
    return got;
  }
};

// Fields no invariant ties to the others: validation cannot refuse a new
// value of them (their type it still checks); the checksums cover them.
//   parameter names and shapes: a layout cannot tell two names apart, or
//     shapes whose sizes its padding absorbs (the model check on load does);
//   optimizer_step and the skip counters against next_step (see validate_index);
//   the loss scaler's values, as long as they are in range;
//   layer-zero's zero3 size: its zero1 layout and placement do not depend on it.
// The run's flags (/run/...) are opaque: not even their types are checked.
bool free_field(const std::string& pattern, const Base& b) {
  static const char* const kFree[] = {"/layout/handles/#/params/#/fqn",
                                      "/layout/handles/#/params/#/shape",
                                      "/layout/handles/#/params/#/shape/#",
                                      "/state/optimizer_step",
                                      "/state/skipped_total",
                                      "/state/consecutive_skips",
                                      "/state/loss_scaler/scale",
                                      "/state/loss_scaler/growth_tracker",
                                      "/state/loss_scaler/hysteresis_left"};
  for (const char* f : kFree)
    if (pattern == f) return true;
  return pattern == "/layout/zero3_size" && b.strategy == ShardingStrategy::layer_zero;
}

// Every field whose value the index holds: primitive values and arrays of
// numbers (shapes), by JSON pointer, with a pattern naming the field ("#"
// for an array index, "*" for a tensor's name).
struct Field {
  std::string pointer, pattern;
};
void collect_fields(const json& j, const std::string& pointer, const std::string& pattern,
                    std::vector<Field>& out) {
  if (j.is_object()) {
    const bool tensors = pattern.ends_with("/tensors");
    for (const auto& [key, value] : j.items())
      collect_fields(value, pointer + "/" + key, pattern + "/" + (tensors ? "*" : key), out);
    return;
  }
  if (!j.is_array() || std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_number(); }))
    out.push_back({pointer, pattern});
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i)
      collect_fields(j[i], pointer + "/" + std::to_string(i), pattern + "/#", out);
}

// Changes of one value: of its value, and (the last one) of its type.
std::vector<std::pair<std::string, json>> mutations_of(const json& v) {
  std::vector<std::pair<std::string, json>> out;
  if (v.is_number_integer()) {
    const std::int64_t n = v.get<std::int64_t>();
    out = {{"+1", n + 1},
           {"-1", n - 1},
           {"+2^32", n + (std::int64_t{1} << 32)},
           {"as a string", std::to_string(n)}};
  } else if (v.is_number_float()) {
    const double x = v.get<double>();
    out = {{"negated", -x}, {"zero", 0.0}, {"doubled", 2 * x}, {"as a string", std::to_string(x)}};
  } else if (v.is_string()) {
    out = {{"+x", v.get<std::string>() + "x"}, {"emptied", ""}, {"as a number", 7}};
  } else if (v.is_null()) {
    out = {{"set", json{{"scale", 1.0}, {"growth_tracker", 0}, {"hysteresis_left", 1}}},
           {"as a number", 1}};
  } else if (v.is_array()) {
    json longer = v, shorter = v;
    longer.push_back(1);
    if (!shorter.empty()) shorter.erase(shorter.size() - 1);
    out = {{"a dimension more", longer}, {"a dimension less", shorter}, {"as a string", "x"}};
  }
  std::erase_if(out, [&](const auto& m) { return m.second == v; });
  return out;
}

// A lie of the list: applies itself to an index (false: it does not apply
// to this checkpoint) and names what the refusal must say.
struct Lie {
  std::string name;
  std::function<bool(json&)> apply;
  std::vector<std::string> words;
};

// Indices of the ranks that write a file.
std::vector<std::size_t> writers(const json& x) {
  std::vector<std::size_t> out;
  for (std::size_t r = 0; r < x["ranks"].size(); ++r)
    if (!x["ranks"][r]["file"].get<std::string>().empty()) out.push_back(r);
  return out;
}

json& first_tensor(json& x) { return x["ranks"][writers(x).front()]["tensors"].begin().value(); }

void add(json& v, std::int64_t d) { v = v.get<std::int64_t>() + d; }

bool set_loss_scale(json& x, double scale) {
  json& ls = x["state"]["loss_scaler"];
  return !ls.is_null() && (ls["scale"] = scale, true);
}

std::vector<Lie> lies() {
  return {
      {"an offset shifted by one element",
       [](json& x) { return add(x["layout"]["handles"][1]["params"][1]["offset"], 1), true; },
       {"layout.handles[block].params[block.b].offset is"}},
      {"padded rows added to a parameter (Note [Padded rows of a parameter])",
       [](json& x) { return x["layout"]["handles"][1]["params"][0]["pad_rows"] = 2, true; },
       {"index field layout.handles[block].params[block."}},  // the offset after, or the total
      {"negative padded rows",
       [](json& x) { return x["layout"]["handles"][1]["params"][0]["pad_rows"] = -1, true; },
       {"params[block.w].pad_rows"}},
      {"two parameters' offsets swapped",
       [](json& x) {
         json& p = x["layout"]["handles"][1]["params"];
         std::swap(p[0]["offset"], p[1]["offset"]);
         return true;
       },
       {"params[block.w].offset is"}},
      {"two parameters listed in swapped order",
       [](json& x) {
         json& p = x["layout"]["handles"][1]["params"];
         std::swap(p[0], p[1]);
         return true;
       },
       {"offset"}},
      {"the first parameter dropped",
       [](json& x) { return x["layout"]["handles"][0]["params"].erase(0), true; },
       {"params[embed.bias].offset"}},
      {"two ranks' zero1_rank swapped",
       [](json& x) {
         const auto w = writers(x);
         if (w.size() < 2) return false;
         std::swap(x["ranks"][w[0]]["zero1_rank"], x["ranks"][w[1]]["zero1_rank"]);
         return true;
       },
       {"zero1_rank is"}},
      {"two ranks' files swapped",
       [](json& x) {
         const auto w = writers(x);
         if (w.size() < 2) return false;
         std::swap(x["ranks"][w[0]]["file"], x["ranks"][w[1]]["file"]);
         return true;
       },
       {".file is 'rank-0000"}},
      {"two rank records swapped",
       [](json& x) {
         if (x["ranks"].size() < 2) return false;
         std::swap(x["ranks"][0], x["ranks"][1]);
         return true;
       },
       {"ranks[0].rank is 1"}},
      {"a rank listed twice",
       [](json& x) { return x["ranks"].size() >= 2 && (x["ranks"][1]["rank"] = 0, true); },
       {"ranks[1].rank is 0"}},
      {"a writer's record once more, world_size to match",
       [](json& x) {
         x["ranks"].push_back(x["ranks"][writers(x).back()]);
         x["ranks"].back()["rank"] = x["ranks"].size() - 1;
         add(x["layout"]["world_size"], 1);
         return true;
       },
       {"index.json"}},
      {"world_size off by one",
       [](json& x) { return add(x["layout"]["world_size"], 1), true; },
       {"world_size"}},
      {"world_size 2^32 above the truth",
       [](json& x) { return add(x["layout"]["world_size"], std::int64_t{1} << 32), true; },
       {"layout.world_size must be an integer in [1, 2147483647]"}},
      {"step != next_step",
       [](json& x) { return add(x["step"], 1), true; },
       {"index field step is 10"}},
      {"step and next_step moved together",
       [](json& x) { return add(x["step"], 1), add(x["state"]["next_step"], 1), true; },
       {"but the directory is step-000009"}},
      {"a tensor shape off by one",
       [](json& x) { return add(first_tensor(x)["shape"][0], 1), true; },
       {".shape is ["}},
      {"an unknown tensor dtype",
       [](json& x) { return first_tensor(x)["dtype"] = "F7", true; },
       {"unknown safetensors dtype 'F7'"}},
      {"a known but wrong tensor dtype",
       [](json& x) { return first_tensor(x)["dtype"] = "BF16", true; },
       {".dtype is BF16, shards are F32"}},
      {"a tensor checksum replaced by another",
       [](json& x) {
         std::string& sum = first_tensor(x)["xxh64"].get_ref<std::string&>();
         sum[0] = sum[0] == '0' ? '1' : '0';
         return true;
       },
       {"fails its checksum", "the file is corrupt"}},
      {"numel_padded grown by one element per shard, tensor shapes to match",
       [](json& x) {
         json& h = x["layout"]["handles"][0];
         add(h["numel_padded"], h["zero1_size"].get<std::int64_t>());
         for (json& r : x["ranks"])
           for (const char* kind : {"embed.zero1_shard", "embed.exp_avg", "embed.exp_avg_sq"})
             if (r["tensors"].contains(kind)) add(r["tensors"][kind]["shape"][0], 1);
         return true;
       },
       {"layout.handles[embed].numel_padded is", "pads to"}},
      {"a quantization block that is not a multiple of the alignment",
       [](json& x) { return x["layout"]["handles"][1]["quant_block"] = 6, true; },
       {"layout.handles[block].quant_block is 6"}},
      {"a quantization block the offsets do not follow",
       [](json& x) { return x["layout"]["handles"][1]["quant_block"] = 256, true; },
       {"layout.handles[block].params[", "puts it at"}},
      {"zero1_size changed",
       [](json& x) { return add(x["layout"]["handles"][1]["zero1_size"], 1), true; },
       {"layout.handles[block].zero1_size is"}},
      {"a parameter name used twice in a handle",
       [](json& x) {
         json& p = x["layout"]["handles"][1]["params"];
         return p[1]["fqn"] = p[0]["fqn"], true;
       },
       {"params[block.w].fqn names a parameter listed before"}},
      {"a parameter name used in two handles",
       [](json& x) {
         return x["layout"]["handles"][1]["params"][0]["fqn"] =
                    x["layout"]["handles"][0]["params"][0]["fqn"],
                true;
       },
       {"params[embed.weight].fqn names a parameter listed before"}},
      {"a handle listed twice",
       [](json& x) {
         return x["layout"]["handles"][1]["name"] = x["layout"]["handles"][0]["name"], true;
       },
       {"layout.handles[embed].name is listed twice"}},
      {"a handle dropped",
       [](json& x) { return x["layout"]["handles"].erase(1), true; },
       {"tensors[block.", "is not a shard of any handle"}},
      {"an empty parameter list",
       [](json& x) { return x["layout"]["handles"][1]["params"] = json::array(), true; },
       {"params is empty"}},
      {"a parameter shape overflowing 64 bits",
       [](json& x) {
         return x["layout"]["handles"][1]["params"][0]["shape"] = {std::int64_t{1} << 40,
                                                                   std::int64_t{1} << 40},
                true;
       },
       {"params[block.w].shape is [1099511627776, 1099511627776]"}},
      {"a shape of 7 dimensions",
       [](json& x) {
         return x["layout"]["handles"][1]["params"][0]["shape"] = {1, 1, 1, 1, 1, 3, 7}, true;
       },
       {"7 dimensions"}},
      {"a tensor missing",
       [](json& x) {
         json& tensors = x["ranks"][writers(x).front()]["tensors"];
         tensors.erase(tensors.begin());
         return true;
       },
       {"tensors[block.exp_avg] is missing"}},
      {"a tensor more",
       [](json& x) {
         return x["ranks"][writers(x).front()]["tensors"]["embed.momentum"] = first_tensor(x), true;
       },
       {"tensors[embed.momentum] is not a shard of any handle"}},
      {"a negative skip count",
       [](json& x) { return x["state"]["skipped_total"] = -1, true; },
       {"state.skipped_total must be an integer in [0"}},
      {"consecutive_skips above skipped_total",
       [](json& x) { return x["state"]["consecutive_skips"] = 4, true; },
       {"state.consecutive_skips is 4, more than state.skipped_total 3"}},
      {"an optimizer state dtype that is not f32 or bf16",
       [](json& x) { return x["state"]["optimizer_state_dtype"] = "f16", true; },
       {"state.optimizer_state_dtype is 'f16', not f32 or bf16"}},
      {"format version 3",
       [](json& x) { return x["version"] = 3, true; },
       {"format version 3 is not supported"}},
      {"format version 1 beside a checksum file",
       [](json& x) { return x["version"] = 1, true; },
       {"says format version 1", "the version was edited"}},
      {"another strategy, of other groups",
       [](json& x) {
         const int w = x["layout"]["world_size"], z = x["layout"]["zero3_size"];
         const StrategyGroups now =
             strategy_groups(*parse_strategy(x["layout"]["strategy"].get<std::string>()), w, z);
         for (const char* other : {"full", "no-shard"}) {
           const StrategyGroups then = strategy_groups(*parse_strategy(other), w, z);
           if (then.zero1_size != now.zero1_size || then.zero3_size != now.zero3_size)
             return x["layout"]["strategy"] = other, true;
         }
         return false;  // one rank: every strategy is the same
       },
       {"index.json"}},
      {"a replica writes a file",
       [](json& x) {
         for (json& r : x["ranks"])
           if (r["file"] == "") return r["file"] = "rank-00009.safetensors", true;
         return false;
       },
       {"holds a replica and writes no file"}},
      {"a writer writes no file",
       [](json& x) { return x["ranks"][writers(x).front()]["file"] = "", true; },
       {".file is ''"}},
      {"a file outside the step directory",
       [](json& x) {
         return x["ranks"][writers(x).front()]["file"] = "../rank-00000.safetensors", true;
       },
       {"is not a plain file name"}},
      {"the loss scaler dropped or added",
       [](json& x) {
         json& ls = x["state"]["loss_scaler"];
         ls = ls.is_null() ? json{{"scale", 1.0}, {"growth_tracker", 0}, {"hysteresis_left", 1}}
                           : json(nullptr);
         return true;
       },
       {"state.loss_scaler is"}},
      {"a zero loss scale",
       [](json& x) { return set_loss_scale(x, 0.0); },
       {"state.loss_scaler.scale is 0, must be > 0 and finite in fp32"}},
      {"a negative loss scale",
       [](json& x) { return set_loss_scale(x, -2.0); },
       {"state.loss_scaler.scale is -2"}},
      {"a loss scale past fp32's range",  // finite as a double, inf on the fp32 loss
       [](json& x) { return set_loss_scale(x, 1e300); },
       {"state.loss_scaler.scale is 1e+300, must be > 0 and finite in fp32"}},
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_index)

BOOST_AUTO_TEST_CASE(every_layout_of_one_to_four_ranks_validates_and_reshards) {
  const auto seed = seed_of_this_test();
  std::mt19937_64 rng(seed);
  const std::vector<Base> bases = all_bases();
  for (const Base& b : bases) {
    TempDir dir;
    save_base(dir.path, b, seed);
    BOOST_CHECK_MESSAGE(refusal(dir.path, b.str()).empty(),
                        b.str() << ": " << refusal(dir.path, b.str()));
    const fs::path step = dir.path / step_dir_name(kStep);
    BOOST_CHECK_MESSAGE(refusal(step, b.str()).empty(),
                        b.str() << " (step directory): " << refusal(step, b.str()));
    BOOST_CHECK(test::read_text(dir.path / "latest") ==
                step_dir_name(kStep) + "\nindex-xxh64 " + *read_index_checksum_file(step.string()) +
                    "\n");
    // Offline into a random other layout: what reshard writes validates too.
    const Base& to = bases[rng() % bases.size()];
    const std::string what = b.str() + " -> " + to.str();
    try {
      const std::string out = reshard_checkpoint(dir.str(), (dir.path / "out").string(), to.world,
                                                 to.strategy, to.zero3);
      BOOST_CHECK_MESSAGE(refusal(dir.path / "out", what).empty(),
                          what << ": " << refusal(dir.path / "out", what));
      BOOST_CHECK_EQUAL(CheckpointReader(out).index().version, kCheckpointFormatVersion);
      // The state dtype is recorded, and reshard keeps it.
      BOOST_CHECK(CheckpointReader(dir.str()).index().state.optimizer_state_dtype ==
                  state_dtype_of(b));
      BOOST_CHECK(CheckpointReader(out).index().state.optimizer_state_dtype == state_dtype_of(b));
    } catch (const std::exception& e) {
      BOOST_ERROR(what << ": " << e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(every_field_mutated_is_refused_by_validation_or_checksums) {
  const auto seed = seed_of_this_test();
  std::mt19937_64 rng(seed);
  // One layout of each strategy, world size and zero3 size drawn by the seed.
  std::vector<Base> bases;
  for (ShardingStrategy s : kStrategies) {
    std::vector<Base> of;
    for (const Base& b : all_bases())
      if (b.strategy == s && b.world >= 2) of.push_back(b);
    bases.push_back(of[rng() % of.size()]);
  }
  bases.front().dtype = DType::f16;  // one with a loss scaler
  for (const Base& b : bases) {
    const Saved saved(b, seed);
    BOOST_TEST_MESSAGE(b.str());
    BOOST_REQUIRE_MESSAGE(refusal(saved.dir.path, b.str()).empty(),
                          b.str() << ": the intact checkpoint is refused");
    const json pristine = saved.pristine();
    BOOST_REQUIRE_EQUAL(pristine.dump(1) + "\n",
                        saved.index);  // edits are written as the writer writes
    std::vector<Field> fields;
    collect_fields(pristine, "", "", fields);
    std::size_t refused = 0, tried = 0;
    for (const Field& f : fields) {
      const json::json_pointer at(f.pointer);
      const auto mutations = mutations_of(pristine[at]);
      for (std::size_t m = 0; m < mutations.size(); ++m) {
        json mutated = pristine;
        mutated[at] = mutations[m].second;
        const std::string what = b.str() + ": " + f.pointer + " " + mutations[m].first;
        const auto [stale_root, stale_step] = saved.outcome(mutated, Checksums::stale, what);
        for (const std::string& got : {stale_root, stale_step})
          BOOST_CHECK_MESSAGE(
              got.find(std::string(kIndexChecksumFileName) + " records xxh64") != std::string::npos,
              what << ", checksums stale: " << (got.empty() ? "accepted" : got));
        const auto [root, step] = saved.outcome(mutated, Checksums::rewritten, what);
        ++tried;
        refused += !root.empty();
        BOOST_CHECK_MESSAGE(root == step, what << ": the root and the step directory disagree: "
                                               << root << " | " << step);
        if (root.empty()) BOOST_TEST_MESSAGE("accepted (a free field): " << what);
        const bool type_change = m + 1 == mutations.size(), opaque = f.pattern.starts_with("/run");
        if (opaque || (free_field(f.pattern, b) && !type_change)) continue;
        const char* names = f.pattern.ends_with("/bytes") ? "bytes" : "index.json";
        BOOST_CHECK_MESSAGE(root.find(names) != std::string::npos,
                            what << ": " << (root.empty() ? "accepted" : root));
      }
    }
    BOOST_TEST_MESSAGE(b.str() << ": " << fields.size() << " fields, " << refused << " of " << tried
                               << " mutations refused by validation");
    for (const Lie& lie : lies()) {
      json mutated = pristine;
      if (!lie.apply(mutated)) continue;
      const std::string what = b.str() + ": " + lie.name;
      const auto [stale_root, stale_step] = saved.outcome(mutated, Checksums::stale, what);
      for (const std::string& got : {stale_root, stale_step})
        BOOST_CHECK_MESSAGE(got.find("fails its checksum") != std::string::npos,
                            what << ", checksums stale: " << got);
      const auto [root, step] = saved.outcome(mutated, Checksums::rewritten, what);
      for (const std::string& word : lie.words)
        BOOST_CHECK_MESSAGE(
            root.find(word) != std::string::npos,
            what << ": " << (root.empty() ? "accepted" : root) << " (lacks '" << word << "')");
    }
  }
}

BOOST_AUTO_TEST_CASE(checksums_are_checked_wherever_they_are) {
  const auto seed = seed_of_this_test();
  const Saved saved({ShardingStrategy::hybrid_shard, 4, 2, DType::bf16}, seed);
  const fs::path root = saved.dir.path, step = saved.step, sidecar = step / kIndexChecksumFileName;
  auto expect = [&](const fs::path& path, const std::vector<std::string>& words,
                    const std::string& what) {
    const std::string got = refusal(path, what);
    for (const std::string& word : words)
      BOOST_CHECK_MESSAGE(
          got.find(word) != std::string::npos,
          what << ": " << (got.empty() ? "accepted" : got) << " (lacks '" << word << "')");
  };
  // A value no invariant ties (optimizer_step): only the checksums can see it.
  json edited = saved.pristine();
  edited["state"]["optimizer_step"] = 5;
  const std::string text = edited.dump(1) + "\n";
  const std::string recorded = *read_index_checksum_file(step.string());
  const std::string actual = checksum_hex(xxh64(text.data(), text.size()));

  test::write_index_text(step, text, Checksums::stale);
  for (const fs::path& p : {root, step})
    expect(p,
           {(step / kIndexFileName).string(), "fails its checksum", sidecar.string(), recorded,
            actual},
           "index.json edited alone");
  saved.restore();

  // A tool that knows the sidecar but not `latest`: the step alone accepts it, its root does not.
  write_index_files(step.string(), text);
  expect(root,
         {"fails its checksum", (root / "latest").string(), "index-xxh64 " + recorded, actual},
         "index.json and its checksum file edited");
  BOOST_CHECK(refusal(step, "index.json and its checksum file edited, opened directly").empty());
  saved.restore();

  fs::remove(sidecar);
  for (const fs::path& p : {root, step})
    expect(p, {sidecar.string(), "is missing", "format 2"}, "no checksum file");
  saved.restore();

  std::ofstream(sidecar, std::ios::trunc)
      << recorded << " index.json\n";  // one space: not xxhsum's format
  expect(step, {sidecar.string(), "must hold one line"}, "a malformed checksum file");
  saved.restore();

  std::ofstream(root / "latest", std::ios::trunc)
      << step_dir_name(kStep) << "\nindex-xxh64 " << recorded.substr(1) << "\n";
  expect(root, {(root / "latest").string(), "index-xxh64 <16 hex digits>"},
         "a malformed checksum in latest");
  // `latest` of an older zrt, or written by hand: its step's own checksum file still checks.
  std::ofstream(root / "latest", std::ios::trunc) << step_dir_name(kStep) << "\n";
  BOOST_CHECK(refusal(root, "latest without a checksum").empty());
  test::write_index_text(step, text, Checksums::stale);
  expect(root, {sidecar.string(), "fails its checksum"},
         "latest without a checksum, index.json edited");
  saved.restore();

  // The step directory must carry the step's name (or another name altogether).
  fs::rename(step, root / step_dir_name(kStep + 1));
  std::ofstream(root / "latest", std::ios::trunc) << step_dir_name(kStep + 1) << "\n";
  expect(root, {"index field step is 9 but the directory is step-000010"},
         "a renamed step directory");
  fs::rename(root / step_dir_name(kStep + 1), root / "best");
  BOOST_CHECK(refusal(root / "best", "a step directory copied under another name").empty());
}

BOOST_AUTO_TEST_CASE(format_1_checkpoints_read_without_checksums_and_reshard_into_format_2) {
  const auto seed = seed_of_this_test();
  const Saved saved({ShardingStrategy::full_shard, 2, 2, DType::f32}, seed);
  // What the zrt before index checksums wrote: version 1, no checksum file, a one-line `latest`.
  json v1 = saved.pristine();
  v1["version"] = 1;
  test::write_index_text(saved.step, v1.dump(1) + "\n", Checksums::stale);
  fs::remove(saved.step / kIndexChecksumFileName);
  std::ofstream(saved.dir.path / "latest", std::ios::trunc) << step_dir_name(kStep) << "\n";
  BOOST_CHECK_MESSAGE(refusal(saved.dir.path, "format 1").empty(),
                      refusal(saved.dir.path, "format 1"));
  // Its index is validated all the same.
  json lying = v1;
  add(lying["layout"]["handles"][1]["params"][1]["offset"], 1);
  test::write_index_text(saved.step, lying.dump(1) + "\n", Checksums::stale);
  BOOST_CHECK(refusal(saved.dir.path, "format 1 with a shifted offset").find("offset") !=
              std::string::npos);
  test::write_index_text(saved.step, v1.dump(1) + "\n", Checksums::stale);
  const std::string out = reshard_checkpoint(saved.dir.str(), (saved.dir.path / "out").string(), 3,
                                             ShardingStrategy::full_shard, 0);
  BOOST_CHECK_EQUAL(CheckpointReader(out).index().version, kCheckpointFormatVersion);
  BOOST_CHECK(fs::exists(fs::path(out) / kIndexChecksumFileName));
  BOOST_CHECK(refusal(saved.dir.path / "out", "resharded format 1").empty());
}

BOOST_AUTO_TEST_CASE(an_infinite_loss_scale_is_refused) {
  const auto seed = seed_of_this_test();
  const Saved saved({ShardingStrategy::full_shard, 1, 1, DType::f16}, seed);
  // JSON cannot write infinity, a hand can: the parser refuses it.
  std::string text = saved.index;
  const auto at = text.find("\"scale\": ");
  BOOST_REQUIRE(at != std::string::npos);
  text.replace(at, text.find_first_of(",\n", at) - at, "\"scale\": 1e999");
  test::write_index_text(saved.step, text, Checksums::rewritten);
  const std::string got = refusal(saved.dir.path, "an infinite loss scale");
  BOOST_CHECK_MESSAGE(got.find("index.json") != std::string::npos,
                      (got.empty() ? "accepted" : got));
  saved.restore();
  // An index made in memory (what commit_step validates) has no such guard.
  CheckpointIndex index = CheckpointReader(saved.dir.str()).index();
  index.state.loss_scaler->scale = std::numeric_limits<double>::infinity();
  BOOST_CHECK_EXCEPTION(
      validate_index(index, "index.json"), CheckpointError, [](const CheckpointError& e) {
        return std::string(e.what()).find(
                   "index.json: index field state.loss_scaler.scale is inf") != std::string::npos;
      });
}

BOOST_AUTO_TEST_CASE(a_lying_index_is_refused_on_every_rank_by_load_which_changes_nothing) {
  const auto seed = seed_of_this_test();
  struct Case {
    std::string name;
    DType dtype;
    std::function<void(json&)> lie;
    std::string expect;
  };
  const Case cases[] = {
      {"zero1 ranks swapped", DType::f32,
       [](json& x) { std::swap(x["ranks"][0]["zero1_rank"], x["ranks"][1]["zero1_rank"]); },
       "index.json: index field ranks[0].zero1_rank is 1"},
      // Valid JSON for any index, but no scaler's state.
      {"a negative loss scaler growth tracker", DType::f16,
       [](json& x) { x["state"]["loss_scaler"]["growth_tracker"] = -5; }, "growth_tracker"},
  };
  for (const Case& c : cases) {
    const Saved saved({ShardingStrategy::full_shard, 2, 2, c.dtype}, seed);
    test::edit_index(saved.step, c.lie);
    std::vector<std::string> errors(2);
    run_local_ranks(2, [&](const CommPtr& world) {
      ZeroModuleOptions o;
      o.dtype = c.dtype;
      ZeroModule m(world, o);
      add_units(m, seed + 1);  // not the saved values
      const auto before = m.full_params();
      try {
        load_checkpoint(m, saved.dir.str());
      } catch (const CheckpointError& e) {
        errors[static_cast<std::size_t>(world->rank())] = e.what();
      }
      for (const auto& [name, value] : m.full_params())
        ZRT_CHECK_STATE(value.to_doubles() == before.at(name).to_doubles(), c.name, ": ", name,
                        " changed");
      ZRT_CHECK_STATE(m.optimizer().step_count() == 0, c.name, ": the optimizer step moved");
    });
    for (const std::string& e : errors)
      BOOST_CHECK_MESSAGE(e.find(c.expect) != std::string::npos,
                          c.name << ": " << (e.empty() ? "loaded" : e));
  }
}

BOOST_AUTO_TEST_SUITE_END()
