// A single-process parameter store for a Model: one plain value and gradient
// tensor per primary parameter, tied names resolved to their primary, and a
// runner of the full forward and backward over all stages. Tests and small
// tools use it where the training engine's flat parameters are not wanted.
#pragma once

#include <map>
#include <string>

#include "zrt/model_zoo/models/model.h"

namespace zrt::model_zoo {

class PlainParams {
 public:
  // Copies `values` (every primary parameter of model.units(), any dtype,
  // e.g. model.init_params(seed)) to `dtype` on `device`; gradients start at
  // zero. Throws InvalidArgument for a missing or mis-shaped value.
  PlainParams(const Model& model, const std::map<std::string, Tensor>& values, DType dtype,
              Device device = Device::cpu());

  // Resolves primary and tied fqns (e.g. lm_head.weight → wte.weight);
  // InvalidArgument for an unknown fqn. The lookup refers to this object and
  // gives the padded views (ParamDef::padded_shape); at() and params() the
  // parameters' own shapes, views of the same memory.
  ParamLookup lookup() const;
  const Param& at(const std::string& fqn) const;
  const std::map<std::string, Param>& params() const { return params_; }
  const Param& padded(const std::string& fqn) const { return padded_.at(fqn); }
  void zero_grads();

 private:
  std::map<std::string, Param> params_, padded_;
  std::map<std::string, std::string> tied_;  // second fqn → primary fqn
};

// Runs every stage forward then every stage backward (gradients accumulate
// into the bound views) and returns the loss tensor of the last stage.
Tensor forward_backward(Model& model, const Batch& batch, double dloss = 1.0, Stream stream = {});

}  // namespace zrt::model_zoo
