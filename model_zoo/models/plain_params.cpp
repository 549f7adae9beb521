#include "zrt/model_zoo/models/plain_params.h"

namespace zrt::model_zoo {

PlainParams::PlainParams(const Model& model, const std::map<std::string, Tensor>& values,
                         DType dtype, Device device) {
  for (const UnitDef& u : model.units()) {
    for (const ParamDef& p : u.params) {
      const std::string fqn = p.fqn();
      auto it = values.find(fqn);
      ZRT_CHECK_ARG(it != values.end(), "PlainParams: no value for parameter ", fqn);
      ZRT_CHECK_ARG(it->second.shape() == p.shape, "PlainParams: value of ", fqn, " is ",
                    shape_str(it->second.shape()), ", the model expects ", shape_str(p.shape));
      // Padded rows start at zero and are views the layers see; at() and
      // params() are the parameter's own rows (Note [Padded vocabulary] in gpt.h).
      Tensor value = Tensor::zeros(p.padded_shape(), dtype, device);
      (p.pad_rows ? value.narrow(0, p.shape[0]) : value).copy_(it->second);
      const Param padded{value.set_name(fqn), Tensor::zeros(p.padded_shape(), dtype, device)};
      padded_[fqn] = padded;
      params_[fqn] =
          p.pad_rows ? Param{padded.value.narrow(0, p.shape[0]), padded.grad.narrow(0, p.shape[0])}
                     : padded;
    }
    for (const auto& [second, primary] : u.tied) tied_[second] = primary;
  }
}

const Param& PlainParams::at(const std::string& fqn) const {
  auto t = tied_.find(fqn);
  auto it = params_.find(t == tied_.end() ? fqn : t->second);
  ZRT_CHECK_ARG(it != params_.end(), "PlainParams: unknown parameter ", fqn);
  return it->second;
}

ParamLookup PlainParams::lookup() const {
  return [this](const std::string& fqn) {
    auto t = tied_.find(fqn);
    auto it = padded_.find(t == tied_.end() ? fqn : t->second);
    ZRT_CHECK_ARG(it != padded_.end(), "PlainParams: unknown parameter ", fqn);
    return it->second;
  };
}

void PlainParams::zero_grads() {
  for (auto& [fqn, p] : padded_) p.grad.zero_();
}

Tensor forward_backward(Model& model, const Batch& batch, double dloss, Stream stream) {
  const int n = model.num_stages();
  Batch b = batch;
  b.dloss = dloss;  // the loss stage takes the gradient in its forward (Note [Fused classifier])
  Tensor x;
  for (int s = 0; s < n; ++s) x = model.stage_forward(s, x, b, stream);
  Tensor loss = x;
  Tensor d = Tensor::from_doubles({dloss}, DType::f32);
  for (int s = n - 1; s >= 0; --s) d = model.stage_backward(s, d, stream);
  return loss;
}

}  // namespace zrt::model_zoo
