// What model to build: a kind ("gpt" or "mlp"), a named preset and optional
// overrides of its dimensions, the compute dtype and the device. Resolving
// checks every dimension so a bad configuration fails here, naming the field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zrt/runtime/device.h"
#include "zrt/runtime/dtype.h"

namespace zrt::model_zoo {

struct GptDims {
  std::int64_t n_layer = 0;
  std::int64_t n_head = 0;
  std::int64_t n_embd = 0;
  std::int64_t vocab_size = 0;
  std::int64_t block_size = 0;  // the longest sequence (rows of wpe)
  // Rows of the token embedding and the LM head inside the model: vocab_size
  // rounded up to ModelConfig::vocab_align (Note [Padded vocabulary] in
  // gpt.h); 0 or vocab_size: none padded.
  std::int64_t padded_vocab_size = 0;
  std::int64_t model_vocab() const { return std::max(vocab_size, padded_vocab_size); }
};

struct MlpDims {
  std::int64_t d_in = 0;
  std::vector<std::int64_t> hidden;  // widths of the hidden layers, in order
  std::int64_t n_classes = 0;
  std::string activation = "gelu";  // "gelu" (tanh approximation) | "relu"
};

struct ModelConfig {
  std::string kind = "gpt";     // "gpt" | "mlp"
  std::string preset = "tiny";  // gpt: tiny | small | gpt2-124m; mlp: tiny
  // gpt overrides
  std::optional<std::int64_t> n_layer{}, n_head{}, n_embd{}, vocab_size{}, block_size{};
  // gpt: the model pads its vocabulary to a multiple of this many rows for
  // aligned GEMMs (Note [Padded vocabulary] in gpt.h); 1: no padding.
  std::int64_t vocab_align = kDefaultVocabAlign;
  static constexpr std::int64_t kDefaultVocabAlign = 128;
  // mlp overrides
  std::optional<std::int64_t> d_in{}, n_classes{};
  std::optional<std::vector<std::int64_t>> hidden{};
  std::optional<std::string> activation{};
  DType dtype = DType::f32;  // compute dtype of parameters and activations
  Device device = Device::cpu();
  // gpt: ln_f and the LM head in a wrap unit of their own ("head"), the head
  // tied across units to wte in unit 0 (Note [Parameters tied across units]).
  // Trains the same numbers as the default layout.
  bool head_unit = false;
};

// The preset named by config.preset with the overrides applied; throws
// InvalidArgument for a wrong kind, an unknown preset or a bad dimension.
GptDims resolve_gpt_dims(const ModelConfig& config);
MlpDims resolve_mlp_dims(const ModelConfig& config);

// Checks kind, dtype and dimensions of either kind (InvalidArgument).
void validate_model_config(const ModelConfig& config);

}  // namespace zrt::model_zoo
