// Where each original parameter lives inside a FlatParameter and inside each
// rank's shard of it. Pure metadata: no tensors, no communication.
//
// Note [Flat parameter layout]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The parameters of one wrap unit are laid out in module order. Before each
// parameter, zeros pad the running total up to a multiple of 16 bytes of the
// compute dtype (4 elements of f32, 8 of bf16/f16), so every original
// parameter view starts at an aligned address. A tied parameter (the same
// tensor under a second name) is stored once, at its first name. After the
// last parameter, zeros pad the total to a multiple of the zero1 group size,
// so the flat parameter splits into equal shards with no copy for the
// reduce-scatter; since the zero3 size divides the zero1 size, the zero3
// shards are equal too. Shard r of W is elements [r*N/W, (r+1)*N/W).
//
// Note [Quantization blocks within one parameter]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A quantized gather or reduce-scatter (Note [Quantized parameter gather],
// Note [Quantized gradient reduce-scatter]) gives each block of a zero1
// shard one scale (int8: 256 elements, max|x| / 127; int4: 64, max|x| / 7,
// which divides the grid). A block that held the
// end of one parameter and the start of the next would quantize the smaller
// one on the larger one's scale: a LayerNorm bias (about 0.01) beside a
// LayerNorm weight (about 1) lost 20-35% of its value (relative RMS error,
// GPT `small` after 300 steps), against 0.2-0.9% for every parameter whose
// blocks are its own. So a layout built with quant_block > 0 starts every
// parameter at a multiple of quant_block and pads the total to a multiple of
// quant_block times the zero1 size: every zero1 shard then starts on the
// block grid, and every block holds one parameter (and zeros) only, as
// ZeRO++ quantizes each parameter apart. The padding is at most
// quant_block - 1 elements a parameter (under 0.05% of GPT-2 124M). The
// quantized runs' layout differs from the others', so a checkpoint records
// quant_block ("quant_block" in index.json, only when > 0) and loading maps
// parameters between the two layouts as between any two.
//
// Note [Padded rows of a parameter]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A parameter may ask for pad_rows zero rows right after its own elements
// (ParamSpec::pad_rows): they are padding like the alignment zeros, so its
// shape, its checkpointed and exported values, and the sum of the others'
// offsets stay the parameter's own, while its unsharded views have the
// padded shape [rows + pad_rows, ...] (a vocabulary padded for aligned
// GEMMs: Note [Padded vocabulary] in model_zoo/models/gpt.h). Padding starts
// at zero in every buffer (masters, moments, gradients); whatever a layer
// writes into the padded rows of its gradient view is zeroed before the
// gradient is summed (FlatParamHandle), so the padding stays zero through
// AdamW (zero moments, no update, decay of a zero is zero) and adds nothing
// to the gradient norm. A checkpoint records pad_rows beside the shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zrt/runtime/dtype.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

// `shape` with pad_rows more rows (dim 0): a parameter's padded shape.
Shape padded_rows_shape(const Shape& shape, std::int64_t pad_rows);

struct ParamSpec {
  std::string fqn;  // fully-qualified name, e.g. "h.0.attn.c_attn.weight"
  Shape shape;
  std::int64_t pad_rows = 0;  // zero rows after it (Note [Padded rows of a parameter])
  std::int64_t numel() const { return shape_numel(shape); }
  // [rows + pad_rows, ...]: the shape of its unsharded views.
  Shape padded_shape() const { return padded_rows_shape(shape, pad_rows); }
  std::int64_t padded_numel() const { return shape_numel(padded_shape()); }
};

// A parameter stored under another name (see SharedParamInfo in the design).
struct SharedParamSpec {
  std::string fqn;         // the second name
  std::size_t prim_index;  // index of the stored (primary) parameter
};

// One run of the flat parameter: an original parameter or padding zeros.
struct FlatSegment {
  std::int64_t offset;
  std::int64_t numel;
  bool is_padding;
  int param_index;  // -1 for padding
};

// How original parameter i intersects one rank's shard. Half-open ranges.
struct ShardParamInfo {
  bool in_shard = false;
  std::int64_t offset_in_shard = 0;  // where its slice starts inside the shard
  std::int64_t numel_in_shard = 0;
  std::int64_t intra_param_start = 0;  // [start, end) of the parameter's flattened elements
  std::int64_t intra_param_end = 0;
  std::int64_t flat_start = 0;  // [start, end) of the parameter in the unsharded flat parameter
  std::int64_t flat_end = 0;
};

class FlatParamLayout {
 public:
  // `params` in module order (tied duplicates already removed), `param_dtype`
  // the compute dtype (sets the alignment), `zero1_size` the divisor of the
  // padded total, `quant_block` the block grid of a quantized collective
  // (0: none; Note [Quantization blocks within one parameter]). Throws
  // InvalidArgument for an empty list, duplicate names, a non-positive zero1
  // size or a quant_block that is negative or not a multiple of the alignment.
  FlatParamLayout(std::vector<ParamSpec> params, DType param_dtype, int zero1_size,
                  std::int64_t quant_block = 0);

  const std::vector<ParamSpec>& params() const { return params_; }
  std::size_t num_params() const { return params_.size(); }
  // Elements per alignment unit (16 bytes of the compute dtype).
  std::int64_t aligned_numel() const { return aligned_numel_; }
  int zero1_size() const { return zero1_size_; }
  // The quantization block grid every parameter starts on (0: none).
  std::int64_t quant_block() const { return quant_block_; }
  // Padded total (divisible by zero1_size) and the parameters' own total.
  std::int64_t numel_padded() const { return numel_padded_; }
  std::int64_t numel_unpadded() const { return numel_unpadded_; }
  // Parameters and padding in order, covering [0, numel_padded()).
  const std::vector<FlatSegment>& segments() const { return segments_; }
  // Offset of original parameter i in the flat parameter.
  std::int64_t param_offset(std::size_t i) const { return param_offsets_[i]; }
  // Elementwise padding mask, for tests and debugging.
  std::vector<bool> padding_mask() const;

  std::int64_t shard_numel(int world_size) const;
  // Per original parameter, how it falls into shard `rank` of `world_size`
  // (world_size must divide zero1_size()).
  std::vector<ShardParamInfo> shard_infos(int rank, int world_size) const;

 private:
  std::vector<ParamSpec> params_;
  std::int64_t aligned_numel_;
  int zero1_size_;
  std::int64_t quant_block_;
  std::int64_t numel_padded_ = 0;
  std::int64_t numel_unpadded_ = 0;
  std::vector<FlatSegment> segments_;
  std::vector<std::int64_t> param_offsets_;
};

}  // namespace zrt::optim
