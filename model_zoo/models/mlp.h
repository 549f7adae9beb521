// MLP classifier: Linear → activation → … → Linear over n_classes logits,
// softmax cross-entropy loss. torch.nn.Linear layout (weight [out, in]).
#pragma once

#include "zrt/model_zoo/layers/activation_layer.h"
#include "zrt/model_zoo/layers/cross_entropy.h"
#include "zrt/model_zoo/layers/linear.h"
#include "zrt/model_zoo/models/model.h"

namespace zrt::model_zoo {

class Mlp : public Model {
 public:
  Mlp(const MlpDims& dims, DType dtype, Device device);

  const MlpDims& dims() const { return dims_; }
  std::string kind() const override { return "mlp"; }
  // One unit per layer: "layers.{i}" = layers.{i}.weight [out, in], layers.{i}.bias [out].
  std::vector<UnitDef> units() const override;
  // torch.nn.Linear's default: weight and bias uniform(-1/sqrt(in), 1/sqrt(in)),
  // each element drawn by its name and index (Note [Counter-based parameter init]).
  std::map<std::string, ParamInit> param_inits() const override;
  void bind(const ParamLookup& lookup) override;
  // One stage per layer; the last also computes the loss.
  int num_stages() const override { return static_cast<int>(widths_.size()) - 1; }
  int stage_unit(int s) const override;
  Tensor stage_forward(int s, const Tensor& x, const Batch& batch, Stream stream) override;
  Tensor stage_backward(int s, const Tensor& dy, Stream stream) override;
  // The hidden layers after the first: stages 1 .. num_stages() - 2.
  std::vector<int> block_stages() const override;
  void release_stage(int s) override;
  std::int64_t id_limit() const override { return dims_.n_classes; }

 private:
  void check_stage(int s, const char* what) const;

  MlpDims dims_;
  DType dtype_;
  Device device_;
  std::vector<std::int64_t> widths_;  // d_in, hidden..., n_classes
  std::vector<Linear> layers_;
  std::vector<ActivationLayer> acts_;  // after every layer but the last
  CrossEntropy loss_{0, /*in_place=*/true};
};

}  // namespace zrt::model_zoo
