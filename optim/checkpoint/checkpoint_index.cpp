#include "zrt/optim/checkpoint/checkpoint_index.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "zrt/runtime/io/safetensors.h"

namespace zrt::optim {

using nlohmann::json;

const char* shard_kind_name(ShardKind kind) {
  switch (kind) {
    case ShardKind::param: return "zero1_shard";
    case ShardKind::exp_avg: return "exp_avg";
    case ShardKind::exp_avg_sq: return "exp_avg_sq";
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
    tensors[name] = {{"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"xxh64", t.xxh64}};
  return json{{"rank", r.rank}, {"zero1_rank", r.zero1_rank}, {"file", r.file}, {"bytes", r.bytes},
              {"tensors", tensors}}
      .dump();
}

std::string index_to_json(const CheckpointIndex& x) {
  json handles = json::array();
  for (const HandleRecord& h : x.handles) {
    json params = json::array();
    for (const ParamRecord& p : h.params) params.push_back({{"fqn", p.fqn}, {"shape", p.shape}, {"offset", p.offset}});
    handles.push_back(
        {{"name", h.name}, {"numel_padded", h.numel_padded}, {"zero1_size", h.zero1_size}, {"params", params}});
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

namespace {

// Field access that names the path of a missing or mistyped field.
struct Reader {
  const std::string& source;

  const json& at(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key))
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " is missing");
    return obj.at(key);
  }
  std::int64_t integer(const json& obj, const char* key, const std::string& where, std::int64_t min = 0) const {
    const json& v = at(obj, key, where);
    if (!v.is_number_integer() || v.get<std::int64_t>() < min)
      ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " must be an integer >= ", min,
                ", got ", v.dump());
    return v.get<std::int64_t>();
  }
  std::string string(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_string()) ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " must be a string");
    return v.get<std::string>();
  }
  const json& array(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_array()) ZRT_THROW(CheckpointError, source, ": index field ", where, ".", key, " must be an array");
    return v;
  }
  Shape shape(const json& obj, const std::string& where) const {
    Shape s;
    for (const json& d : array(obj, "shape", where)) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        ZRT_THROW(CheckpointError, source, ": index field ", where, ".shape has a bad dimension ", d.dump());
      s.push_back(d.get<std::int64_t>());
    }
    return s;
  }
};

RankRecord parse_rank_record(const Reader& r, const json& rj) {
  RankRecord rr;
  rr.rank = static_cast<int>(r.integer(rj, "rank", "ranks[]"));
  const std::string where = "ranks[" + std::to_string(rr.rank) + "]";
  rr.zero1_rank = static_cast<int>(r.integer(rj, "zero1_rank", where));
  rr.file = r.string(rj, "file", where);
  rr.bytes = static_cast<std::uint64_t>(r.integer(rj, "bytes", where));
  if (rr.file.find('/') != std::string::npos || rr.file == "..")
    ZRT_THROW(CheckpointError, r.source, ": ", where, ".file '", rr.file, "' is not a plain file name");
  const json& tensors = r.at(rj, "tensors", where);
  if (!tensors.is_object()) ZRT_THROW(CheckpointError, r.source, ": ", where, ".tensors must be an object");
  for (const auto& [name, tj] : tensors.items()) {
    TensorRecord t;
    const std::string tw = where + ".tensors[" + name + "]";
    t.dtype = parse_safetensors_dtype(r.string(tj, "dtype", tw), r.source + ": " + tw);
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
    ZRT_THROW(CheckpointError, source, ": not a zrt checkpoint index (format is not \"zrt-checkpoint\")");
  CheckpointIndex x;
  x.version = static_cast<int>(r.integer(j, "version", ""));
  if (x.version != kCheckpointFormatVersion)
    ZRT_THROW(CheckpointError, source, ": checkpoint format version ", x.version, " is not supported (this zrt reads ",
              kCheckpointFormatVersion, ")");
  x.step = r.integer(j, "step", "");
  const json& layout = r.at(j, "layout", "");
  x.world_size = static_cast<int>(r.integer(layout, "world_size", "layout", 1));
  x.strategy = r.string(layout, "strategy", "layout");
  x.zero3_size = static_cast<int>(r.integer(layout, "zero3_size", "layout", 1));
  x.dtype = r.string(layout, "dtype", "layout");
  std::set<std::string> names;
  for (const json& hj : r.array(layout, "handles", "layout")) {
    HandleRecord h;
    h.name = r.string(hj, "name", "layout.handles[]");
    const std::string where = "layout.handles[" + h.name + "]";
    if (!names.insert(h.name).second) ZRT_THROW(CheckpointError, source, ": handle ", h.name, " is listed twice");
    h.numel_padded = r.integer(hj, "numel_padded", where);
    h.zero1_size = static_cast<int>(r.integer(hj, "zero1_size", where, 1));
    if (h.numel_padded % h.zero1_size != 0 || h.zero1_size > x.world_size)
      ZRT_THROW(CheckpointError, source, ": ", where, " numel_padded ", h.numel_padded,
                " does not split into zero1_size ", h.zero1_size, " shards of a world of ", x.world_size);
    for (const json& pj : r.array(hj, "params", where)) {
      ParamRecord p;
      p.fqn = r.string(pj, "fqn", where + ".params[]");
      p.shape = r.shape(pj, where + ".params[" + p.fqn + "]");
      p.offset = r.integer(pj, "offset", where + ".params[" + p.fqn + "]");
      if (p.offset + shape_numel(p.shape) > h.numel_padded)
        ZRT_THROW(CheckpointError, source, ": ", where, " parameter ", p.fqn, " runs past the flat parameter");
      h.params.push_back(std::move(p));
    }
    x.handles.push_back(std::move(h));
  }
  const json& ranks = r.array(j, "ranks", "");
  if (static_cast<int>(ranks.size()) != x.world_size)
    ZRT_THROW(CheckpointError, source, ": index lists ", ranks.size(), " ranks for a world of ", x.world_size);
  for (const json& rj : ranks) {
    RankRecord rr = parse_rank_record(r, rj);
    if (rr.rank != static_cast<int>(x.ranks.size()))
      ZRT_THROW(CheckpointError, source, ": index ranks are not in order 0..", x.world_size - 1);
    x.ranks.push_back(std::move(rr));
  }
  // Every zero1 shard of every handle must have a writer with all three tensors.
  for (const HandleRecord& h : x.handles)
    for (int z = 0; z < h.zero1_size; ++z) {
      bool found = false;
      for (const RankRecord& rr : x.ranks) {
        if (rr.file.empty() || rr.zero1_rank != z) continue;
        for (ShardKind k : kAllShardKinds) {
          auto it = rr.tensors.find(shard_tensor_name(h.name, k));
          if (it == rr.tensors.end() || it->second.shape != Shape{h.shard_numel()} || it->second.dtype != DType::f32)
            ZRT_THROW(CheckpointError, source, ": ", rr.file, " must hold ", shard_tensor_name(h.name, k),
                      " as F32[", h.shard_numel(), "]");
        }
        found = true;
      }
      if (!found) ZRT_THROW(CheckpointError, source, ": no rank file holds zero1 shard ", z, " of handle ", h.name);
    }
  const json& state = r.at(j, "state", "");
  x.state.next_step = r.integer(state, "next_step", "state");
  x.state.optimizer_step = r.integer(state, "optimizer_step", "state");
  x.state.skipped_total = r.integer(state, "skipped_total", "state");
  x.state.consecutive_skips = r.integer(state, "consecutive_skips", "state");
  const json& ls = r.at(state, "loss_scaler", "state");
  if (!ls.is_null()) {
    optim::DynamicLossScaler::State s;
    const json& scale = r.at(ls, "scale", "state.loss_scaler");
    if (!scale.is_number() || !(scale.get<double>() > 0))
      ZRT_THROW(CheckpointError, source, ": index field state.loss_scaler.scale must be a positive number");
    s.scale = scale.get<double>();
    s.growth_tracker = r.integer(ls, "growth_tracker", "state.loss_scaler");
    s.hysteresis_left = static_cast<int>(r.integer(ls, "hysteresis_left", "state.loss_scaler"));
    x.state.loss_scaler = s;
  }
  x.run_json = j.contains("run") ? j["run"].dump() : "{}";
  return x;
}

}  // namespace zrt::optim
