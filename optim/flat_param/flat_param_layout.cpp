#include "zrt/optim/flat_param/flat_param_layout.h"

#include <algorithm>
#include <set>

namespace zrt::optim {

namespace {
constexpr std::int64_t kAlignmentBytes = 16;
constexpr std::int64_t kMaxQuantBlock = std::int64_t{1} << 20;
}  // namespace

Shape padded_rows_shape(const Shape& shape, std::int64_t pad_rows) {
  if (pad_rows == 0) return shape;
  ZRT_CHECK_ARG(!shape.empty() && pad_rows > 0, "a shape ", shape_str(shape), " cannot have ",
                pad_rows, " padded rows");
  Shape s = shape;
  s[0] += pad_rows;
  return s;
}

FlatParamLayout::FlatParamLayout(std::vector<ParamSpec> params, DType param_dtype, int zero1_size,
                                 std::int64_t quant_block)
    : params_(std::move(params)), zero1_size_(zero1_size), quant_block_(quant_block) {
  ZRT_CHECK_ARG(!params_.empty(), "a flat parameter needs at least one parameter");
  ZRT_CHECK_ARG(zero1_size_ > 0, "zero1 group size must be positive, got ", zero1_size_);
  ZRT_CHECK_ARG(is_floating(param_dtype), "compute dtype ", dtype_name(param_dtype),
                " is not a floating dtype");
  aligned_numel_ = kAlignmentBytes / static_cast<std::int64_t>(dtype_size(param_dtype));
  ZRT_CHECK_ARG(
      quant_block_ >= 0 && quant_block_ % aligned_numel_ == 0 && quant_block_ <= kMaxQuantBlock,
      "quantization block ", quant_block_, " is not a multiple of ", aligned_numel_,
      " elements between 0 and ", kMaxQuantBlock);
  // Note [Quantization blocks within one parameter]
  const std::int64_t param_align = quant_block_ > 0 ? quant_block_ : aligned_numel_;
  std::set<std::string> seen;
  std::int64_t total = 0;
  auto pad_to = [&](std::int64_t multiple) {
    std::int64_t pad = (multiple - total % multiple) % multiple;
    if (pad > 0) {
      segments_.push_back({total, pad, true, -1});
      total += pad;
    }
  };
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    ZRT_CHECK_ARG(seen.insert(p.fqn).second, "parameter name '", p.fqn, "' appears twice");
    ZRT_CHECK_ARG(p.pad_rows >= 0 && (p.pad_rows == 0 || !p.shape.empty()), "parameter '", p.fqn,
                  "' ", shape_str(p.shape), " cannot have ", p.pad_rows, " padded rows");
    std::int64_t n = p.numel();
    pad_to(param_align);
    param_offsets_.push_back(total);
    segments_.push_back({total, n, false, static_cast<int>(i)});
    total += n;
    numel_unpadded_ += n;
    if (const std::int64_t rows = p.padded_numel() - n; rows > 0) {
      segments_.push_back({total, rows, true, -1});
      total += rows;
    }
  }
  const std::int64_t shards_multiple = std::max<std::int64_t>(quant_block_, 1) * zero1_size_;
  pad_to(shards_multiple);
  // A unit of zero-size parameters still gets elements on every rank, so every
  // shard is non-empty and collectives see equal, positive sizes.
  if (total == 0) {
    segments_.push_back({0, shards_multiple, true, -1});
    total = shards_multiple;
  }
  numel_padded_ = total;
}

std::vector<bool> FlatParamLayout::padding_mask() const {
  std::vector<bool> mask(static_cast<std::size_t>(numel_padded_), false);
  for (const auto& s : segments_)
    if (s.is_padding) std::fill_n(mask.begin() + s.offset, s.numel, true);
  return mask;
}

std::int64_t FlatParamLayout::shard_numel(int world_size) const {
  ZRT_CHECK_ARG(world_size > 0 && zero1_size_ % world_size == 0, "shard world size ", world_size,
                " does not divide the zero1 size ", zero1_size_);
  return numel_padded_ / world_size;
}

std::vector<ShardParamInfo> FlatParamLayout::shard_infos(int rank, int world_size) const {
  const std::int64_t n = shard_numel(world_size);
  ZRT_CHECK_ARG(rank >= 0 && rank < world_size, "shard rank ", rank,
                " out of range for world size ", world_size);
  const std::int64_t shard_start = rank * n, shard_end = shard_start + n;
  std::vector<ShardParamInfo> infos;
  infos.reserve(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    ShardParamInfo info;
    info.flat_start = param_offsets_[i];
    info.flat_end = info.flat_start + params_[i].numel();
    const std::int64_t lo = std::max(shard_start, info.flat_start);
    const std::int64_t hi = std::min(shard_end, info.flat_end);
    if (lo < hi) {
      info.in_shard = true;
      info.offset_in_shard = lo - shard_start;
      info.numel_in_shard = hi - lo;
      info.intra_param_start = lo - info.flat_start;
      info.intra_param_end = hi - info.flat_start;
    }
    infos.push_back(info);
  }
  return infos;
}

}  // namespace zrt::optim
