#include "zrt/model_zoo/models/mlp.h"

#include <cmath>

#include "zrt/model_zoo/models/param_init.h"

namespace zrt::model_zoo {

Mlp::Mlp(const MlpDims& dims, DType dtype, Device device)
    : dims_(dims), dtype_(dtype), device_(device) {
  widths_.push_back(dims_.d_in);
  widths_.insert(widths_.end(), dims_.hidden.begin(), dims_.hidden.end());
  widths_.push_back(dims_.n_classes);
}

std::vector<UnitDef> Mlp::units() const {
  std::vector<UnitDef> units;
  for (std::size_t i = 0; i + 1 < widths_.size(); ++i) {
    const std::string path = "layers." + std::to_string(i);
    units.push_back(
        {path,
         {{path, "weight", {widths_[i + 1], widths_[i]}}, {path, "bias", {widths_[i + 1]}}},
         {}});
  }
  return units;
}

std::map<std::string, ParamInit> Mlp::param_inits() const {
  std::map<std::string, ParamInit> out;
  for (const UnitDef& u : units()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(u.params[0].shape[1]));
    for (const ParamDef& p : u.params) out[p.fqn()] = ParamInit::uniform(-bound, bound);
  }
  return out;
}

void Mlp::bind(const ParamLookup& lookup) {
  ZRT_CHECK_CALL(layers_.empty(), "mlp: bind called twice");
  const auto act =
      dims_.activation == "relu" ? kernels::Activation::relu : kernels::Activation::gelu;
  for (const UnitDef& u : units()) {
    layers_.emplace_back(lookup(u.params[0].fqn()), lookup(u.params[1].fqn()),
                         WeightLayout::out_in);
  }
  for (std::size_t i = 0; i + 1 < layers_.size(); ++i) acts_.emplace_back(act);
}

int Mlp::stage_unit(int s) const {
  check_stage(s, "stage_unit");
  return s;
}

void Mlp::check_stage(int s, const char* what) const {
  ZRT_CHECK_ARG(s >= 0 && s < num_stages(), "mlp ", what, ": stage ", s, " is not in [0, ",
                num_stages(), ")");
}

Tensor Mlp::stage_forward(int s, const Tensor& x, const Batch& batch, Stream stream) {
  check_stage(s, "stage_forward");
  ZRT_CHECK_CALL(!layers_.empty(), "mlp stage_forward: bind() has not been called");
  Tensor in = x;
  if (s == 0) {
    const Tensor& xs = batch.inputs;
    ZRT_CHECK_ARG(xs.dim() == 2 && xs.size(1) == dims_.d_in, "mlp: inputs ", xs.str(),
                  " must be [b, ", dims_.d_in, "]");
    in = xs;
    if (xs.dtype() != dtype_ || xs.device() != device_) {
      in = Tensor::empty(xs.shape(), dtype_, device_,
                         xs.device() == device_ ? xs.storage().allocator() : nullptr, stream);
      in.copy_(xs, stream);  // in stream order: after the copy that wrote the batch
    }
  }
  const bool last = s == num_stages() - 1;
  Tensor y = layers_[static_cast<std::size_t>(s)].forward(in, stream);
  if (!last) return acts_[static_cast<std::size_t>(s)].forward(y, stream);
  const Tensor& t = batch.targets;
  ZRT_CHECK_ARG(t.dim() == 1 && t.size(0) == y.size(0), "mlp: targets ", t.str(), " must be [",
                y.size(0), "]");
  return loss_.forward(y, t.device() == device_ ? t : t.to(device_), batch.normaliser, stream,
                       id_check(), batch.dloss);
}

std::vector<int> Mlp::block_stages() const {
  std::vector<int> stages;
  for (int s = 1; s + 1 < num_stages(); ++s) stages.push_back(s);
  return stages;
}

void Mlp::release_stage(int s) {
  ZRT_CHECK_ARG(s >= 1 && s + 1 < num_stages(), "mlp release_stage: stage ", s,
                " is not a hidden block (1..", num_stages() - 2, ")");
  ZRT_CHECK_CALL(!layers_.empty(), "mlp release_stage: bind() has not been called");
  layers_[static_cast<std::size_t>(s)].release();
  acts_[static_cast<std::size_t>(s)].release();
}

Tensor Mlp::stage_backward(int s, const Tensor& dy, Stream stream) {
  check_stage(s, "stage_backward");
  ZRT_CHECK_CALL(!layers_.empty(), "mlp stage_backward: bind() has not been called");
  Tensor d;
  if (s == num_stages() - 1) {
    ZRT_CHECK_ARG(dy.numel() == 1, "mlp: the last stage takes dloss as a 1-element tensor, got ",
                  dy.str());
    d = loss_.backward(dy.item(0), stream);
  } else {
    d = acts_[static_cast<std::size_t>(s)].backward(dy, stream);
  }
  Tensor dx = layers_[static_cast<std::size_t>(s)].backward(d, GradMode::accumulate, stream);
  return s == 0 ? Tensor() : dx;
}

}  // namespace zrt::model_zoo
