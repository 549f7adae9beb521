#include "zrt/model_zoo/models/model.h"

#include "zrt/kernels/nn/id_check.h"
#include "zrt/model_zoo/models/gpt.h"
#include "zrt/model_zoo/models/mlp.h"
#include "zrt/optim/flat_param/flat_param_layout.h"

namespace zrt::model_zoo {

void Model::set_id_check(Tensor flag) {
  if (flag.numel() != 0) kernels::check_id_flag("Model::set_id_check", flag, Device::cpu());
  id_flag_ = std::move(flag);
}

void Model::throw_if_bad_ids(const Tensor& host_flags) const {
  kernels::throw_if_bad_ids(host_flags, id_limit());
}

std::map<std::string, Tensor> Model::init_params(std::uint64_t seed) const {
  const std::map<std::string, ParamInit> inits = param_inits();
  std::map<std::string, Tensor> out;
  for (const UnitDef& u : units())
    for (const ParamDef& p : u.params) {
      const auto it = inits.find(p.fqn());
      ZRT_CHECK_STATE(it != inits.end(), kind(), ": no initialisation for '", p.fqn(), "'");
      Tensor t = Tensor::empty(p.shape, DType::f32);
      fill_param_init(t, it->second, seed, p.fqn());
      out[p.fqn()] = std::move(t);
    }
  return out;
}

std::string ParamDef::fqn() const { return module_path.empty() ? name : module_path + "." + name; }

Shape ParamDef::padded_shape() const { return optim::padded_rows_shape(shape, pad_rows); }

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  validate_model_config(config);
  if (config.kind == "gpt")
    return std::make_unique<Gpt>(resolve_gpt_dims(config), config.dtype, config.device,
                                 config.head_unit);
  return std::make_unique<Mlp>(resolve_mlp_dims(config), config.dtype, config.device);
}

std::vector<ParamDef> all_param_defs(const std::vector<UnitDef>& units) {
  std::vector<ParamDef> defs;
  for (const UnitDef& u : units) defs.insert(defs.end(), u.params.begin(), u.params.end());
  return defs;
}

}  // namespace zrt::model_zoo
