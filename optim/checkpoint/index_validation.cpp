#include "zrt/optim/checkpoint/index_validation.h"

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "zrt/optim/checkpoint/checksum.h"
#include "zrt/optim/flat_param/flat_param_layout.h"
#include "zrt/runtime/io/safetensors.h"

namespace zrt::optim {

namespace {

// Far beyond any flat parameter (its f32 bytes fit 63 bits with room to
// spare), so the layout arithmetic below cannot overflow.
constexpr std::int64_t kMaxNumel = std::numeric_limits<std::int64_t>::max() / 8;

template <class... Args>
[[noreturn]] void refuse(const std::string& source, const std::string& field, Args&&... what) {
  ZRT_THROW(CheckpointError, source, ": index field ", field, " ", std::forward<Args>(what)...);
}

// shape_numel without its InvalidArgument: nullopt for a negative dim or an overflow.
std::optional<std::int64_t> checked_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

// What the header fixes for the rest of the index.
struct Header {
  ShardingStrategy strategy;
  DType dtype;
  StrategyGroups groups;
  std::string placement;  // "layout.strategy full with layout.world_size 4 and ...", for messages
};

Header validate_header(const CheckpointIndex& x, const std::string& source) {
  check_format_version(x.version, source);
  if (x.world_size < 1) refuse(source, "layout.world_size", "is ", x.world_size, ", must be >= 1");
  const std::optional<ShardingStrategy> strategy = parse_strategy(x.strategy);
  if (!strategy)
    refuse(source, "layout.strategy", "'", x.strategy,
           "' is not a strategy (full, grad-op, no-shard, hybrid, layer-zero)");
  const std::optional<DType> dtype = parse_dtype(x.dtype);
  if (!dtype || (*dtype != DType::f32 && *dtype != DType::bf16 && *dtype != DType::f16))
    refuse(source, "layout.dtype", "'", x.dtype, "' is not a compute dtype (f32, bf16, f16)");
  if (x.zero3_size < 1 || x.world_size % x.zero3_size != 0)
    refuse(source, "layout.zero3_size", "is ", x.zero3_size,
           ", which does not divide layout.world_size ", x.world_size);
  Header h{*strategy, *dtype, strategy_groups(*strategy, x.world_size, x.zero3_size),
           "layout.strategy " + x.strategy + " with layout.world_size " +
               std::to_string(x.world_size) + " and layout.zero3_size " +
               std::to_string(x.zero3_size)};
  if (x.zero3_size != h.groups.zero3_size)
    refuse(source, "layout.zero3_size", "is ", x.zero3_size, ", layout.strategy ", x.strategy,
           " with layout.world_size ", x.world_size, " records ", h.groups.zero3_size);
  if (x.step < 0 || x.step != x.state.next_step)
    refuse(source, "step", "is ", x.step, " but state.next_step is ", x.state.next_step,
           ": both are the step a resumed run trains next");
  return h;
}

void validate_handles(const CheckpointIndex& x, const Header& hd, const std::string& source) {
  std::set<std::string> names, fqns;
  for (const HandleRecord& h : x.handles) {
    const std::string where = "layout.handles[" + h.name + "]";
    if (h.name.empty() || !names.insert(h.name).second)
      refuse(source, where + ".name", h.name.empty() ? "is empty" : "is listed twice");
    if (h.zero1_size != hd.groups.zero1_size)
      refuse(source, where + ".zero1_size", "is ", h.zero1_size, ", ", hd.placement,
             " shards over ", hd.groups.zero1_size, " rank(s)");
    if (h.numel_padded < 1 || h.numel_padded > kMaxNumel || h.numel_padded % h.zero1_size != 0)
      refuse(source, where + ".numel_padded", "is ", h.numel_padded,
             ", not a positive multiple of zero1_size ", h.zero1_size);
    if (h.params.empty())
      refuse(source, where + ".params", "is empty: a flat parameter holds at least one");
    std::vector<ParamSpec> specs;
    std::int64_t total = 0;
    for (const ParamRecord& p : h.params) {
      const std::string pw = where + ".params[" + p.fqn + "]";
      if (p.fqn.empty() || !fqns.insert(p.fqn).second)
        refuse(source, pw + ".fqn", p.fqn.empty() ? "is empty" : "names a parameter listed before");
      const std::optional<std::int64_t> n = checked_numel(p.shape);
      if (!n || *n > h.numel_padded - total)
        refuse(source, pw + ".shape", "is ", shape_str(p.shape),
               ": with the parameters before it, more than the ", h.numel_padded,
               " elements of numel_padded");
      total += *n;
      if (p.pad_rows > 0) {
        if (p.shape.empty() || p.pad_rows > kMaxNumel)
          refuse(source, pw + ".pad_rows", "is ", p.pad_rows,
                 ", padded rows need a parameter of 1 or more dims");
        Shape pad = p.shape;
        pad[0] = p.pad_rows;
        const std::optional<std::int64_t> np = checked_numel(pad);
        if (!np || *np > h.numel_padded - total)
          refuse(source, pw + ".pad_rows", "is ", p.pad_rows,
                 ": with the parameters before it, more than the ", h.numel_padded,
                 " elements of numel_padded");
        total += *np;
      }
      specs.push_back({p.fqn, p.shape, p.pad_rows});
    }
    // The layout rule itself, not a second copy of it: offsets and padding must be exactly its own.
    try {  // quant_block alone, on a one-element layout, so no other fault is blamed on it
      FlatParamLayout({{"x", {1}}}, hd.dtype, 1, h.quant_block);
    } catch (const InvalidArgument& e) {
      refuse(source, where + ".quant_block", "is ", h.quant_block, ": ", e.what());
    }
    const FlatParamLayout layout(std::move(specs), hd.dtype, h.zero1_size, h.quant_block);
    for (std::size_t i = 0; i < h.params.size(); ++i)
      if (h.params[i].offset != layout.param_offset(i))
        refuse(source, where + ".params[" + h.params[i].fqn + "].offset", "is ", h.params[i].offset,
               ", the flat parameter layout (", x.dtype,
               ", parameters in the listed order) puts it at ", layout.param_offset(i));
    if (h.numel_padded != layout.numel_padded())
      refuse(source, where + ".numel_padded", "is ", h.numel_padded,
             ", the flat parameter layout of its parameters pads to ", layout.numel_padded());
  }
}

// A writing rank's tensors: every handle's three shards, F32 [shard numel], and nothing else.
void validate_rank_file(const CheckpointIndex& x, const RankRecord& r, const std::string& where,
                        const std::string& source) {
  if (r.file != rank_file_name(r.rank))
    refuse(source, where + ".file", "is '", r.file, "', rank ", r.rank, " writes ",
           rank_file_name(r.rank));
  std::set<std::string> expected;
  std::uint64_t data_bytes = 0;
  for (const HandleRecord& h : x.handles)
    for (ShardKind kind : kAllShardKinds) {
      const std::string name = shard_tensor_name(h.name, kind);
      const std::string tw = where + ".tensors[" + name + "]";
      expected.insert(name);
      const auto it = r.tensors.find(name);
      if (it == r.tensors.end())
        refuse(source, tw, "is missing: ", r.file, " holds every handle's ", shard_kind_name(kind));
      const TensorRecord& t = it->second;
      if (t.dtype != DType::f32)
        refuse(source, tw + ".dtype", "is ", safetensors_dtype_name(t.dtype), ", shards are F32");
      if (t.shape != Shape{h.shard_numel()})
        refuse(source, tw + ".shape", "is ", shape_str(t.shape), ", zero1 shards of ", h.name,
               " are [", h.shard_numel(), "]");
      if (!is_checksum_hex(t.xxh64))
        refuse(source, tw + ".xxh64", "is '", t.xxh64, "', not 16 lowercase hex digits");
      if (__builtin_add_overflow(data_bytes, static_cast<std::uint64_t>(h.shard_numel()) * 4,
                                 &data_bytes))
        refuse(source, tw + ".shape", "makes the file's data larger than 2^64 bytes");
    }
  for (const auto& [name, t] : r.tensors)
    if (!expected.count(name))
      refuse(source, where + ".tensors[" + name + "]", "is not a shard of any handle");
  if (r.bytes < 8 + data_bytes)  // the safetensors header length comes first
    refuse(source, where + ".bytes", "is ", r.bytes, ", less than the ", data_bytes,
           " bytes of its tensors");
}

void validate_ranks(const CheckpointIndex& x, const Header& hd, const std::string& source) {
  if (x.ranks.size() != static_cast<std::size_t>(x.world_size))
    refuse(source, "ranks", "lists ", x.ranks.size(), " rank(s), layout.world_size is ",
           x.world_size);
  const int zero1_size = hd.groups.zero1_size;
  std::vector<int> writer(static_cast<std::size_t>(zero1_size), -1);  // of each zero1 shard
  for (std::size_t i = 0; i < x.ranks.size(); ++i) {
    const RankRecord& r = x.ranks[i];
    const std::string where = "ranks[" + std::to_string(i) + "]";
    if (r.rank != static_cast<int>(i))
      refuse(source, where + ".rank", "is ", r.rank, ": ranks are listed once each, in order 0..",
             x.world_size - 1);
    const RankPlace place = strategy_rank_place(hd.strategy, x.zero3_size, r.rank);
    if (r.zero1_rank != place.zero1_rank)
      refuse(source, where + ".zero1_rank", "is ", r.zero1_rank, ", ", hd.placement, " puts rank ",
             r.rank, " at zero1 shard ", place.zero1_rank);
    if (!place.writes) {
      if (!r.file.empty() || !r.tensors.empty() || r.bytes != 0)
        refuse(source, where + ".file", "is '", r.file, "' with ", r.tensors.size(),
               " tensor(s) and ", r.bytes, " bytes: in ", hd.placement, " rank ", r.rank,
               " holds a replica and writes no file");
      continue;
    }
    validate_rank_file(x, r, where, source);
    // Implied by the placement; checked on its own so a wrong placement rule cannot pass.
    int& w = writer[static_cast<std::size_t>(r.zero1_rank)];
    if (w >= 0)
      refuse(source, where + ".zero1_rank", "is ", r.zero1_rank, ", the shard rank ", w,
             " writes already");
    w = r.rank;
  }
  for (int z = 0; z < zero1_size; ++z)
    if (writer[static_cast<std::size_t>(z)] < 0)
      refuse(source, "ranks", "have no rank file holding zero1 shard ", z);
}

void validate_state(const CheckpointIndex& x, const Header& hd, const std::string& source) {
  const TrainingState& s = x.state;
  const std::pair<const char*, std::int64_t> counters[] = {
      {"state.next_step", s.next_step},
      {"state.optimizer_step", s.optimizer_step},
      {"state.skipped_total", s.skipped_total},
      {"state.consecutive_skips", s.consecutive_skips}};
  for (const auto& [field, value] : counters)
    if (value < 0) refuse(source, field, "is ", value, ", must be >= 0");
  if (s.consecutive_skips > s.skipped_total)
    refuse(source, "state.consecutive_skips", "is ", s.consecutive_skips,
           ", more than state.skipped_total ", s.skipped_total);
  const bool f16 = hd.dtype == DType::f16;
  if (s.loss_scaler.has_value() != f16)
    refuse(source, "state.loss_scaler",
           f16 ? "is null, but f16 training scales the loss"
               : "is set, but only f16 training scales the loss");
  if (!s.loss_scaler) return;
  // The scale multiplies an fp32 loss: past fp32's range it is inf there.
  if (!std::isfinite(s.loss_scaler->scale) || s.loss_scaler->scale <= 0 ||
      s.loss_scaler->scale > std::numeric_limits<float>::max())
    refuse(source, "state.loss_scaler.scale", "is ", s.loss_scaler->scale,
           ", must be > 0 and finite in fp32 (at most ", std::numeric_limits<float>::max(), ")");
  if (s.loss_scaler->growth_tracker < 0)
    refuse(source, "state.loss_scaler.growth_tracker", "is ", s.loss_scaler->growth_tracker,
           ", must be >= 0");
  if (s.loss_scaler->hysteresis_left < 0)
    refuse(source, "state.loss_scaler.hysteresis_left", "is ", s.loss_scaler->hysteresis_left,
           ", must be >= 0");
}

}  // namespace

void check_format_version(int version, const std::string& source) {
  if (version < kOldestCheckpointFormatVersion || version > kCheckpointFormatVersion)
    ZRT_THROW(CheckpointError, source, ": checkpoint format version ", version,
              " is not supported (this zrt reads ", kOldestCheckpointFormatVersion, " to ",
              kCheckpointFormatVersion, ")");
}

void validate_index(const CheckpointIndex& index, const std::string& source) {
  const Header header = validate_header(index, source);
  validate_handles(index, header, source);
  validate_ranks(index, header, source);
  validate_state(index, header, source);
}

}  // namespace zrt::optim
