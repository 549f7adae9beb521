// Model parameters from a checkpoint's tensors: names are matched to a
// model's units (Note [Checkpoint key mapping]), and every parameter must be
// present with its exact shape.
//
// Note [Checkpoint key mapping]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Hugging Face GPT-2 checkpoints name the body "transformer.wte.weight", ...
// and store attention masks as buffers ("h.0.attn.bias",
// "h.0.attn.masked_bias"). A key is matched after removing a leading
// "transformer."; mask buffers are skipped, said in one line
// (skipped_buffers_note); a tied name (e.g. "lm_head.weight") is skipped
// when it has its primary's shape and values, since the primary is loaded
// (other values, an untied head, are an error: they would be dropped), and
// is the primary's value when the primary is not in the file (safetensors'
// save_model keeps one name of a tied tensor). Any other key is an error (a
// checkpoint of a different model must not half-load), as is a key given
// twice.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zrt/model_zoo/models/model.h"
#include "zrt/runtime/io/safetensors.h"

namespace zrt::model_zoo {

// The primary parameters of `units` from `tensors` as fp32 cpu tensors.
// CheckpointError naming the missing, unexpected or mis-shaped key (with
// both shapes) and `source`, or a non-finite value (key and flat index).
std::map<std::string, Tensor> match_model_params(const std::vector<UnitDef>& units,
                                                 const std::map<std::string, Tensor>& tensors,
                                                 const std::string& source);

// "SOURCE: skipped N attention-mask buffer(s), not parameters ('KEY', ...)":
// what match_model_params prints to stderr, and a Trainer on rank 0 for its
// --init-from file; "" for none.
std::string skipped_buffers_note(const std::string& source,
                                 const std::vector<std::string>& skipped);

// match_model_params over a safetensors file.
std::map<std::string, Tensor> load_model_params(const std::vector<UnitDef>& units,
                                                const std::string& path);

// Note [Streamed loading]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A file of initial weights is matched to the model from its header alone
// (the same rules and errors as match_model_params); the values are then
// read by ranges, each rank only the elements of its own shards (as sharded
// initialisation draws them, Note [Sharded initialisation]), converted to
// fp32 and checked finite piece by piece. No rank reads or holds the whole
// file. A read holds, for its duration, one buffer of the part in the
// file's dtype and (unless that is f32) one of its f32 conversion, taken from
// `buffers` (the module's host allocator, so the memory plan counts them:
// Note [Host memory in the plan]); on a discarding stream (a dry run, Note
// [Dry runs]) it takes the same buffers and reads nothing.
class ParamFileSource {
 public:
  // CheckpointError naming the missing, unexpected or mis-shaped key.
  // `buffers` null: plain host memory.
  ParamFileSource(const std::vector<UnitDef>& units, const std::string& path,
                  AllocatorPtr buffers = nullptr);
  const std::string& path() const { return reader_->path(); }
  // Elements first, first + 1, ... of parameter `fqn` into dst (f32, any
  // device); CheckpointError for a non-finite value (key and flat index).
  void read(const std::string& fqn, const Tensor& dst, std::int64_t first, Stream stream) const;
  // Hugging Face's attention-mask buffers the file holds, which are no
  // parameters and were left out (skipped_buffers_note says so).
  const std::vector<std::string>& skipped_keys() const { return skipped_; }

 private:
  std::shared_ptr<const SafetensorsReader> reader_;
  std::map<std::string, std::string> key_of_;                  // fqn → key
  std::map<std::string, std::vector<std::string>> tied_keys_;  // fqn → its tied names' keys
  std::vector<std::string> skipped_;
  AllocatorPtr buffers_;
};

}  // namespace zrt::model_zoo
