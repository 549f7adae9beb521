// Model parameters from a checkpoint's tensors: names are matched to a
// model's units (Note [Checkpoint key mapping]), and every parameter must be
// present with its exact shape.
//
// Note [Checkpoint key mapping]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Hugging Face GPT-2 checkpoints name the body "transformer.wte.weight", ...
// and store attention masks as buffers ("h.0.attn.bias",
// "h.0.attn.masked_bias"). A key is matched after removing a leading
// "transformer."; mask buffers are skipped with a warning on stderr; a tied
// name (e.g. "lm_head.weight") is skipped when it has its primary's shape,
// since the primary is loaded. Any other key is an error (a checkpoint of a
// different model must not half-load), as is a key given twice.
#pragma once

#include <map>
#include <string>

#include "zrt/model_zoo/models/model.h"

namespace zrt::model_zoo {

// The primary parameters of `units` from `tensors` as fp32 cpu tensors.
// CheckpointError naming the missing, unexpected or mis-shaped key (with
// both shapes) and `source`, or a non-finite value (key and flat index).
std::map<std::string, Tensor> match_model_params(const std::vector<UnitDef>& units,
                                                 const std::map<std::string, Tensor>& tensors,
                                                 const std::string& source);

// match_model_params over a safetensors file.
std::map<std::string, Tensor> load_model_params(const std::vector<UnitDef>& units,
                                                const std::string& path);

}  // namespace zrt::model_zoo
