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
      Tensor value = Tensor::empty(p.shape, dtype, device);
      value.copy_(it->second);
      params_[fqn] = Param{value.set_name(fqn), Tensor::zeros(p.shape, dtype, device)};
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
  return [this](const std::string& fqn) { return at(fqn); };
}

void PlainParams::zero_grads() {
  for (auto& [fqn, p] : params_) p.grad.zero_();
}

Tensor forward_backward(Model& model, const Batch& batch, double dloss, Stream stream) {
  const int n = model.num_stages();
  Tensor x;
  for (int s = 0; s < n; ++s) x = model.stage_forward(s, x, batch, stream);
  Tensor loss = x;
  Tensor d = Tensor::from_doubles({dloss}, DType::f32);
  for (int s = n - 1; s >= 0; --s) d = model.stage_backward(s, d, stream);
  return loss;
}

}  // namespace zrt::model_zoo
