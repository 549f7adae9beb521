// A training data set held in host memory: a token stream (gpt) or rows of
// features with class labels (mlp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "zrt/model_zoo/models/model_config.h"
#include "zrt/runtime/tensor.h"

namespace zrt::model_zoo {

struct Dataset {
  enum class Kind { tokens, rows };
  Kind kind = Kind::tokens;
  Tensor tokens;                // tokens: i32 [len]
  std::int64_t vocab_size = 0;  // tokens: every token is < vocab_size
  Tensor x;                     // rows: f32 [N, d_in]
  Tensor y;                     // rows: i64 [N], class labels
  std::int64_t n_classes = 0;   // rows: every label is in [0, n_classes)
  std::string source;           // file name or generator, for messages

  // Tokens (len) or rows (N).
  std::int64_t size() const { return kind == Kind::tokens ? tokens.numel() : y.numel(); }
  // The host memory it holds (Note [Host memory in the plan]).
  std::size_t nbytes() const { return tokens.nbytes() + x.nbytes() + y.nbytes(); }
};

// InvalidArgument naming the problem unless the data fits the model: tokens
// for gpt within its vocabulary, rows for mlp with its d_in and labels below
// its n_classes.
void check_dataset_fits_model(const Dataset& data, const ModelConfig& config);

}  // namespace zrt::model_zoo
