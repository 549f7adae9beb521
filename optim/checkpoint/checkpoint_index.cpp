#include "zrt/optim/checkpoint/checkpoint_index.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "zrt/optim/checkpoint/index_validation.h"
#include "zrt/runtime/io/safetensors.h"

namespace zrt::optim {

using nlohmann::json;

const char* shard_kind_name(ShardKind kind) {
  switch (kind) {
    case ShardKind::param:
      return "zero1_shard";
    case ShardKind::exp_avg:
      return "exp_avg";
    case ShardKind::exp_avg_sq:
      return "exp_avg_sq";
  }
  return "?";
}

std::string shard_tensor_name(const std::string& handle, ShardKind kind) {
  return handle + "." + shard_kind_name(kind);
}

std::string rank_file_name(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "rank-%05d.safetensors", rank);
  return buf;
}

std::uint64_t CheckpointIndex::total_bytes() const {
  std::uint64_t n = 0;
  for (const RankRecord& r : ranks) n += r.bytes;
  return n;
}

std::string rank_record_to_json(const RankRecord& r) {
  json tensors = json::object();
  for (const auto& [name, t] : r.tensors)
    tensors[name] = {
        {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"xxh64", t.xxh64}};
  return json{{"rank", r.rank},
              {"zero1_rank", r.zero1_rank},
              {"file", r.file},
              {"bytes", r.bytes},
              {"tensors", tensors}}
      .dump();
}

std::string index_to_json(const CheckpointIndex& x) {
  json handles = json::array();
  for (const HandleRecord& h : x.handles) {
    json params = json::array();
    for (const ParamRecord& p : h.params) {
      params.push_back({{"fqn", p.fqn}, {"shape", p.shape}, {"offset", p.offset}});
      // Absent when 0: an index without padded rows is byte for byte as before.
      if (p.pad_rows > 0) params.back()["pad_rows"] = p.pad_rows;
    }
    handles.push_back({{"name", h.name},
                       {"numel_padded", h.numel_padded},
                       {"zero1_size", h.zero1_size},
                       {"params", params}});
    if (h.quant_block > 0) handles.back()["quant_block"] = h.quant_block;
  }
  json ranks = json::array();
  for (const RankRecord& r : x.ranks) ranks.push_back(json::parse(rank_record_to_json(r)));
  json state = {{"next_step", x.state.next_step},
                {"optimizer_step", x.state.optimizer_step},
                {"skipped_total", x.state.skipped_total},
                {"consecutive_skips", x.state.consecutive_skips},
                {"loss_scaler", nullptr}};
  if (x.state.loss_scaler)
    state["loss_scaler"] = {{"scale", x.state.loss_scaler->scale},
                            {"growth_tracker", x.state.loss_scaler->growth_tracker},
                            {"hysteresis_left", x.state.loss_scaler->hysteresis_left}};
  // Absent when f32: an index of fp32 moments is byte for byte as before.
  if (x.state.optimizer_state_dtype != DType::f32)
    state["optimizer_state_dtype"] = dtype_name(x.state.optimizer_state_dtype);
  json j = {{"format", "zrt-checkpoint"},
            {"version", x.version},
            {"step", x.step},
            {"layout",
             {{"world_size", x.world_size},
              {"strategy", x.strategy},
              {"zero3_size", x.zero3_size},
              {"dtype", x.dtype},
              {"handles", handles}}},
            {"ranks", ranks},
            {"state", state},
            {"run", json::parse(x.run_json)}};
  return j.dump(1) + "\n";
}

StrategyGroups strategy_groups(ShardingStrategy strategy, int world_size, int zero3_size) {
  switch (strategy) {
    case ShardingStrategy::no_shard:
      return {1, 1};
    case ShardingStrategy::hybrid_shard:
      return {zero3_size, zero3_size};
    case ShardingStrategy::layer_zero:
      return {world_size, zero3_size};
    case ShardingStrategy::full_shard:
    case ShardingStrategy::shard_grad_op:
      break;
  }
  return {world_size, world_size};
}

RankPlace strategy_rank_place(ShardingStrategy strategy, int zero3_size, int rank) {
  switch (strategy) {
    case ShardingStrategy::no_shard:
      return {0, rank == 0};
    // Hybrid zero3 groups are ranks with equal rank / Z; replica 0 (the first group) writes.
    case ShardingStrategy::hybrid_shard:
      return {rank % zero3_size, rank / zero3_size == 0};
    case ShardingStrategy::full_shard:
    case ShardingStrategy::shard_grad_op:
    case ShardingStrategy::layer_zero:
      break;
  }
  return {rank, true};
}

namespace {

// An integer that int64 holds (nlohmann keeps larger ones unsigned, and they would wrap).
bool is_int64(const json& v) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<std::uint64_t>() > kMax);
}

// Field access that names the path of a missing or mistyped field.
struct Reader {
  const std::string& source;

  const json& at(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key))
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " is missing");
    return obj.at(key);
  }
  std::int64_t integer(const json& obj, const char* key, const std::string& where,
                       std::int64_t min = 0,
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const {
    const json& v = at(obj, key, where);
    if (!is_int64(v) || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max)
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key,
                " must be an integer in [", min, ", ", max, "], got ", v.dump());
    return v.get<std::int64_t>();
  }
  // An int field: out of int's range it would wrap into a plausible value.
  int int32(const json& obj, const char* key, const std::string& where, int min = 0) const {
    return static_cast<int>(integer(obj, key, where, min, std::numeric_limits<int>::max()));
  }
  std::string string(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_string())
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " must be a string");
    return v.get<std::string>();
  }
  const json& array(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_array())
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " must be an array");
    return v;
  }
  Shape shape(const json& obj, const std::string& where) const {
    Shape s;
    const json& dims = array(obj, "shape", where);
    if (dims.size() > static_cast<std::size_t>(Shape::max_dims))
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".shape has ", dims.size(),
                " dimensions, more than ", Shape::max_dims);
    for (const json& d : dims) {
      if (!is_int64(d) || d.get<std::int64_t>() < 0)
        ZRT_THROW(CheckpointError, source, ": index field ", where, ".shape has a bad dimension ",
                  d.dump());
      s.push_back(d.get<std::int64_t>());
    }
    return s;
  }
};

RankRecord parse_rank_record(const Reader& r, const json& rj) {
  RankRecord rr;
  rr.rank = r.int32(rj, "rank", "ranks[]");
  const std::string where = "ranks[" + std::to_string(rr.rank) + "]";
  rr.zero1_rank = r.int32(rj, "zero1_rank", where);
  rr.file = r.string(rj, "file", where);
  rr.bytes = static_cast<std::uint64_t>(r.integer(rj, "bytes", where));
  if (rr.file.find('/') != std::string::npos || rr.file == "..")
    ZRT_THROW(CheckpointError, r.source, ": ", where, ".file '", rr.file,
              "' is not a plain file name");
  const json& tensors = r.at(rj, "tensors", where);
  if (!tensors.is_object())
    ZRT_THROW(CheckpointError, r.source, ": ", where, ".tensors must be an object");
  for (const auto& [name, tj] : tensors.items()) {
    TensorRecord t;
    const std::string tw = where + ".tensors[" + name + "]";
    t.dtype = parse_safetensors_dtype(r.string(tj, "dtype", tw),
                                      r.source + ": index field " + tw + ".dtype");
    t.shape = r.shape(tj, tw);
    t.xxh64 = r.string(tj, "xxh64", tw);
    rr.tensors[name] = std::move(t);
  }
  return rr;
}

json parse_json(const std::string& text, const std::string& source, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    ZRT_THROW(CheckpointError, source, ": ", what, " is not valid JSON: ", e.what());
  }
}

}  // namespace

RankRecord rank_record_from_json(const std::string& text, const std::string& source) {
  return parse_rank_record(Reader{source}, parse_json(text, source, "rank record"));
}

CheckpointIndex index_from_json(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source, "index");
  const Reader r{source};
  if (!j.is_object() || !j.contains("format") || j["format"] != "zrt-checkpoint")
    ZRT_THROW(CheckpointError, source,
              ": not a zrt checkpoint index (format is not \"zrt-checkpoint\")");
  CheckpointIndex x;
  x.version = r.int32(j, "version", "");
  check_format_version(x.version, source);  // before the fields of a format it may not know
  x.step = r.integer(j, "step", "");
  const json& layout = r.at(j, "layout", "");
  x.world_size = r.int32(layout, "world_size", "layout", 1);
  x.strategy = r.string(layout, "strategy", "layout");
  x.zero3_size = r.int32(layout, "zero3_size", "layout", 1);
  x.dtype = r.string(layout, "dtype", "layout");
  for (const json& hj : r.array(layout, "handles", "layout")) {
    HandleRecord h;
    h.name = r.string(hj, "name", "layout.handles[]");
    const std::string where = "layout.handles[" + h.name + "]";
    h.numel_padded = r.integer(hj, "numel_padded", where, 1);
    h.zero1_size = r.int32(hj, "zero1_size", where, 1);
    if (hj.contains("quant_block"))
      h.quant_block = r.integer(hj, "quant_block", where, 1, std::int64_t{1} << 20);
    for (const json& pj : r.array(hj, "params", where)) {
      ParamRecord p;
      p.fqn = r.string(pj, "fqn", where + ".params[]");
      p.shape = r.shape(pj, where + ".params[" + p.fqn + "]");
      p.offset = r.integer(pj, "offset", where + ".params[" + p.fqn + "]");
      if (pj.contains("pad_rows"))
        p.pad_rows = r.integer(pj, "pad_rows", where + ".params[" + p.fqn + "]");
      h.params.push_back(std::move(p));
    }
    x.handles.push_back(std::move(h));
  }
  for (const json& rj : r.array(j, "ranks", "")) x.ranks.push_back(parse_rank_record(r, rj));
  const json& state = r.at(j, "state", "");
  x.state.next_step = r.integer(state, "next_step", "state");
  x.state.optimizer_step = r.integer(state, "optimizer_step", "state");
  x.state.skipped_total = r.integer(state, "skipped_total", "state");
  x.state.consecutive_skips = r.integer(state, "consecutive_skips", "state");
  const json& ls = r.at(state, "loss_scaler", "state");
  if (!ls.is_null()) {
    optim::DynamicLossScaler::State s;
    const json& scale = r.at(ls, "scale", "state.loss_scaler");
    if (!scale.is_number())
      ZRT_THROW(CheckpointError, source, ": index field state.loss_scaler.scale must be a number");
    s.scale = scale.get<double>();
    s.growth_tracker = r.integer(ls, "growth_tracker", "state.loss_scaler");
    s.hysteresis_left = r.int32(ls, "hysteresis_left", "state.loss_scaler");
    x.state.loss_scaler = s;
  }
  if (state.contains("optimizer_state_dtype")) {
    const std::string d = r.string(state, "optimizer_state_dtype", "state");
    const std::optional<DType> dtype = parse_dtype(d);
    if (!dtype || (*dtype != DType::f32 && *dtype != DType::bf16))
      ZRT_THROW(CheckpointError, source, ": index field state.optimizer_state_dtype is '", d,
                "', not f32 or bf16");
    x.state.optimizer_state_dtype = *dtype;
  }
  x.run_json = j.contains("run") ? j["run"].dump() : "{}";
  validate_index(x, source);
  return x;
}

std::string run_identity(const CheckpointIndex& index) {
  std::vector<std::string> params;
  for (const HandleRecord& h : index.handles)
    for (const ParamRecord& p : h.params) params.push_back(p.fqn + shape_str(p.shape));
  std::sort(params.begin(), params.end());
  std::string id;
  for (const std::string& p : params) id += p + ";";
  const nlohmann::json run = nlohmann::json::parse(index.run_json, nullptr, false);
  if (run.is_object() && run.contains("seed")) id += " seed " + run["seed"].dump();
  return id;
}

}  // namespace zrt::optim
