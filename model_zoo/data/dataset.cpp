#include "zrt/model_zoo/data/dataset.h"

namespace zrt::model_zoo {

void check_dataset_fits_model(const Dataset& data, const ModelConfig& config) {
  if (config.kind == "gpt") {
    const GptDims d = resolve_gpt_dims(config);
    ZRT_CHECK_ARG(data.kind == Dataset::Kind::tokens, "data ", data.source,
                  " holds feature rows, but a gpt model trains on tokens");
    ZRT_CHECK_ARG(data.vocab_size <= d.vocab_size, "data ", data.source, " has tokens up to ",
                  data.vocab_size - 1, " but the model's vocab_size is ", d.vocab_size);
    return;
  }
  const MlpDims d = resolve_mlp_dims(config);
  ZRT_CHECK_ARG(data.kind == Dataset::Kind::rows, "data ", data.source,
                " holds tokens, but an mlp model trains on feature rows");
  ZRT_CHECK_ARG(data.x.size(1) == d.d_in, "data ", data.source, " has d_in ", data.x.size(1),
                " but the model's d_in is ", d.d_in);
  ZRT_CHECK_ARG(data.n_classes <= d.n_classes, "data ", data.source, " has labels up to ",
                data.n_classes - 1, " but the model has ", d.n_classes, " classes");
}

}  // namespace zrt::model_zoo
