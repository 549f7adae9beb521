// Every public options struct takes a designated initializer that names one
// member, as the README's {.dtype = zrt::DType::bf16} does: each member has a
// default member initializer, so -Wextra's missing-field-initializers (an
// error here) has nothing to report. Compiled, never run.
#include "zrt/kernels/ops/adamw.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/optim/lr_schedule.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::test {

void designated_options() {
  [[maybe_unused]] optim::ZeroModuleOptions zero{.dtype = DType::bf16};
  [[maybe_unused]] optim::ZeroModuleOptions nested{.grad_reduce = {.op = ReduceOp::sum},
                                                   .gather = {.dtype = optim::GatherDType::int8},
                                                   .adamw = {.weight_decay = 0.01},
                                                   .offload_optimizer = {.dir = "/tmp"}};
  [[maybe_unused]] optim::FlatParamOptions flat{.param_dtype = DType::bf16};
  [[maybe_unused]] optim::AdamWOptions adamw{.eps = 1e-6};
  [[maybe_unused]] optim::OptimizerOffload offload{.kind = optim::OptimizerOffload::Kind::host};
  [[maybe_unused]] optim::LossScalerOptions scaler{.init_scale = 1024};
  [[maybe_unused]] optim::WarmupCosineOptions schedule{.max_lr = 1e-3};
  [[maybe_unused]] optim::CheckpointSaveOptions save{.keep_last = 2};
  [[maybe_unused]] model_zoo::ModelConfig model{.preset = "small"};
  [[maybe_unused]] model_zoo::EngineConfig engine{.prefetch = 2};
  [[maybe_unused]] model_zoo::TrainerConfig trainer{.steps = 3};
  [[maybe_unused]] kernels::AdamWStepOptions step{.grad_scale = 0.5};
  [[maybe_unused]] CachingAllocatorConfig allocator{.poison = true};
  [[maybe_unused]] SafetensorsWriteOptions safetensors{.keep_float_dtypes = true};
}

}  // namespace zrt::test
